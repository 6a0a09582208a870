"""The analysis, shown: a terminal table (rich), report.md, and a figure (matplotlib, Agg).

Everything here reads the analysis dict (analysis.json) and computes no statistics. The terminal
table and report.md are rendered from the same list of sections, so they say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .results import atomic_write

UNDECIDED = ("undecided", "differs")  # verdicts that come with "seeds needed"


@dataclass
class Section:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # lines under the table
    show_header: bool = True


# -- formatting ---------------------------------------------------------------------------------


class _Fmt:
    """Numbers in the metric's units: accuracy in points to 2 decimals, anything else 4 digits."""

    def __init__(self, analysis: dict):
        self.points = analysis.get("unit") == "pts"
        self.unit = " pts" if self.points else ""

    def value(self, x) -> str:
        if x is None:
            return "—"
        return f"{x:.2f}" if self.points else f"{x:.4g}"

    def signed(self, x) -> str:
        if x is None:
            return "—"
        return f"{x:+.2f}" if self.points else f"{x:+.4g}"

    def interval(self, ci) -> str:
        if not ci or ci[0] is None or ci[1] is None:
            return "—"
        return f"[{self.signed(ci[0])}, {self.signed(ci[1])}]{self.unit}"


def _p(p) -> str:
    if p is None:
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.2g}"


def _num(x, spec: str = ".3g") -> str:
    return "—" if x is None else format(x, spec)


def _seeds(n) -> str:
    return "more than a million" if n is None else str(n)


# -- the content --------------------------------------------------------------------------------


def headline(analysis: dict) -> str:
    direction = "higher is better" if analysis.get("higher_is_better", True) else "lower is better"
    unit = f"{analysis['unit']}, " if analysis.get("unit") else ""
    return (
        f"{analysis.get('experiment')}: factor {analysis.get('factor')}, metric {analysis['metric']} "
        f"({unit}{direction}), baseline {analysis['baseline']}, alpha {analysis['alpha']:g}"
    )


def sections(analysis: dict) -> list[Section]:
    """What the report says, in order; rendered to the terminal and to markdown alike."""
    f = _Fmt(analysis)
    out = []

    arms = Section("Arms", ["arm", "factor value", "n", "mean ± std", "min", "max"])
    for name, arm in analysis["arms"].items():
        arms.rows.append([
            name, str(arm.get("factor_value")), str(arm["n"]),
            f"{f.value(arm['mean'])} ± {f.value(arm['std'])}", f.value(arm["min"]), f.value(arm["max"]),
        ])
    out.append(arms)

    floor = analysis["noise_floor"]
    margin = analysis["margin"]
    noise = Section("Noise floor", ["", "", ""], show_header=False)
    for name, std in floor["seed_std"].items():
        noise.rows.append([f"seed std, {name}", f"{f.value(std)}{f.unit}", "std across seeds (ddof=1)"])
    noise.rows.append(["seed std, pooled", f"{f.value(floor['pooled_seed_std'])}{f.unit}", "over the arms"])
    if floor.get("test_set_floor") is not None:
        noise.rows.append([
            "test-set floor", f"{f.value(floor['test_set_floor'])}{f.unit}",
            f"binomial sqrt(p(1-p)/n), n_test = {floor['n_test']}",
        ])
    noise.rows.append(["margin", f"±{f.value(margin['value'])}{f.unit}", margin["source"]])
    noise.notes.append(f"margin: {margin['description']}")
    if analysis.get("pairing_verified"):
        noise.notes.append(
            "pairing verified: " + " and ".join(analysis["pairing_verified"])
            + " fingerprints are equal across arms in every seed"
        )
    out.append(noise)

    k = analysis.get("multiple_comparisons", {}).get("comparisons", 1)
    for name, c in analysis["comparisons"].items():
        s = Section(f"{name} vs {c['baseline']} ({c['n_pairs']} paired seeds)", ["", "", ""], show_header=False)
        level = f"{c['t']['confidence_level']:.0%}"
        s.rows += [
            [f"mean difference {name} - {c['baseline']}", f"{f.signed(c['mean_diff'])}{f.unit}",
             f"means {f.value(c['mean_arm'])} vs {f.value(c['mean_baseline'])}"],
            [f"t {level} CI", f.interval(c["t"]["ci"]), c["t"]["note"] or f"paired t, df {_num(c['t']['df'], 'g')}"],
            [f"bootstrap {level} CI", f.interval(c["bootstrap"]["ci"]), _bootstrap_detail(c["bootstrap"])],
            ["sd of differences", f"{f.value(c['noise']['std_diff'])}{f.unit}", _pairing_detail(c["noise"], f)],
            ["p, paired t", _p(c["t"]["pvalue"]), "against 0"],
            ["p, Wilcoxon signed-rank", _p(c["wilcoxon"]["pvalue"]), c["wilcoxon"]["method"]],
            ["p, sign-flip permutation", _p(c["permutation"]["pvalue"]), _permutation_detail(c["permutation"])],
            ["p, Welch (unpaired)", _p(c["welch"]["pvalue"]), "what ignoring the pairing would say"],
            ["effect size d_z", _num(c["d_z"]), "mean / sd of the differences"],
            ["p, beyond the margin", _p(c["minimum_effect"]["pvalue"]), f"minimum-effect test, H0: |Δ| ≤ {f.value(margin['value'])}"],
            ["p, within the margin", _p(c["tost"]["pvalue"]), f"TOST, H0: |Δ| ≥ {f.value(margin['value'])}"],
        ]
        if k > 1:
            h = c["holm"]
            s.rows.append([
                "Holm-adjusted p", f"{_p(h['t'])} / {_p(h['minimum_effect'])} / {_p(h['tost'])}",
                f"t / beyond / within, over {k} comparisons",
            ])
        if c.get("final_weights_identical"):
            s.rows.append(["final weights", "bitwise identical", "in every paired seed"])
        if c["verdict"]["code"] in UNDECIDED:
            need = c["seeds_needed"]
            if c["verdict"]["code"] == "differs":
                s.rows.append(["seeds needed", _seeds(need["to_settle_margin"]),
                               "to settle the margin if the true difference is as observed"])
            else:
                s.rows.append(["seeds needed", f"{_seeds(need['at_margin'])} / {_seeds(need['at_observed'])}",
                               "to detect a difference the size of the margin / of the observed one"])
            s.notes.append(f"seeds needed assume: {need['assumptions']}")
        if c.get("missing_seeds"):
            s.notes.append(f"baseline seeds without a partner in {name}: {', '.join(map(str, c['missing_seeds']))}")
        s.notes.insert(0, f"verdict ({c['verdict']['code']}): {c['verdict']['sentence']}")
        out.append(s)

    if analysis.get("excluded"):
        out.append(Section("Excluded runs", ["seed", "arm", "reason"],
                           [[str(e["seed"]), str(e["arm"]), e["reason"]] for e in analysis["excluded"]]))
    if analysis.get("not_compared"):
        out.append(Section("Not compared", ["arm", "baseline", "reason"],
                           [[str(n["arm"]), str(n["baseline"]), n["reason"]] for n in analysis["not_compared"]]))
    if analysis.get("unreadable"):
        out.append(Section("Unreadable files", ["path", "reason"],
                           [[u["path"], u["reason"]] for u in analysis["unreadable"]]))
    certificate = analysis.get("certificate")
    if isinstance(certificate, dict) and certificate.get("line"):
        out.append(Section("Reproducibility", [], notes=[str(certificate["line"])], show_header=False))
    out += sequential_sections(analysis)
    return out


def sequential_sections(analysis: dict) -> list[Section]:
    """The looks of a sequential run (analysis["sequential"], harness/sequential.py): a line per look."""
    seq = analysis.get("sequential")
    if not isinstance(seq, dict) or not isinstance(seq.get("arms"), dict):
        return []
    f = _Fmt(seq)
    d = seq.get("design") or {}
    margin = d.get("margin")
    s = Section(f"Sequential looks ({seq.get('status')})",
                ["arm", "look", "seeds", "estimate", "repeated CI", "critical t", "decision"])
    for arm, a in seq["arms"].items():
        for x in a.get("looks") or []:
            s.rows.append([arm, str(x["look"]), str(x["n"]), f"{f.signed(x['estimate'])}{f.unit}",
                           f.interval(x["interval"]), _num(x["critical"], ".3f"), x["decision"]])
    s.notes += [f"sequential decision ({a['decision']}): {a['sentence']}" for a in seq["arms"].values()]
    s.notes.append(
        f"design, declared before the data: looks at {', '.join(map(str, d.get('looks') or []))} seeds, "
        f"alpha {d.get('alpha')}, margin {'±' + f.value(margin) + f.unit if margin else 'none'}, "
        f"{d.get('spending')} spending, futility {d.get('futility')}; each look's interval covers the true "
        f"difference at every look at once, so the decision keeps its error rate wherever the run stopped. "
        f"The fixed-N tests above, on the same seeds, do not account for the looks.")
    skewed = [f"{arm} {a['looks'][-1]['skewness']:+.2f}" for arm, a in seq["arms"].items()
              if a.get("looks") and abs(a["looks"][-1].get("skewness") or 0.0) >= 1.0]
    if skewed:  # the boundaries assume normal differences; skew inflates the error (docs/sequential.md)
        s.notes.append(f"skewed differences at the last look ({', '.join(skewed)}): the boundaries assume normal "
                       f"differences, and skew of 1 raises the error rate to ~0.07 at alpha 0.05; prefer "
                       f"spending=obrien-fleming or a larger min_seeds for this metric.")
    if seq.get("stopped"):
        s.notes.append(f"stopped unsettled: {seq['stopped']}")
    return [s]


def _bootstrap_detail(b: dict) -> str:
    if b["method"] == "none":
        return b["note"]
    text = f"{b['method']}, {b['n_resamples']} resamples of the pairs, seed {b['seed']}"
    return f"{text}; {b['note']}" if b.get("note") else text


def _permutation_detail(p: dict) -> str:
    if p.get("method"):
        return p["method"]
    if p["exact"]:
        return f"exact over all {p['n_resamples']} sign patterns"
    return f"{p['n_resamples']} random sign patterns, seed {p['seed']}"


def _pairing_detail(noise: dict, f: _Fmt) -> str:
    rho = noise.get("correlation")
    text = f"rho {_num(rho, '.2f')} between arms; unpaired {f.value(noise['unpaired_std_diff'])}{f.unit}"
    if noise.get("variance_ratio") is not None:
        text += f": pairing left {noise['variance_ratio']:.0%} of the variance"
    return text


# -- terminal -----------------------------------------------------------------------------------


def render_table(analysis: dict, console: Console | None = None) -> None:
    """Print the analysis to the terminal as rich tables."""
    console = console or Console()
    console.print(Text(headline(analysis), style="bold"))
    for s in sections(analysis):
        if s.rows:
            table = Table(title=s.title, title_justify="left", show_header=s.show_header, box=box.SIMPLE_HEAD)
            for column in s.columns:
                table.add_column(column)
            for row in s.rows:
                table.add_row(*(Text(cell) for cell in row))  # Text: brackets in values are not markup
            console.print(table)
        else:
            console.print(Text(s.title, style="italic"))
        for note in s.notes:
            style = "bold" if note.startswith("verdict") else None
            console.print(Text(note, style=style))
        console.print()


# -- markdown -----------------------------------------------------------------------------------


def markdown(analysis: dict) -> str:
    lines = [f"# Analysis: {analysis.get('experiment')}", "", headline(analysis), ""]
    for s in sections(analysis):
        lines += [f"## {s.title}", ""]
        if s.rows:
            header = s.columns if s.show_header else [""] * len(s.columns)
            lines.append("| " + " | ".join(_cell(c) for c in header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in s.rows]
            lines.append("")
        for note in s.notes:
            lines += [f"**{note}**" if note.startswith("verdict") else note, ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_markdown(analysis: dict, path) -> None:
    text = markdown(analysis)
    atomic_write(path, lambda f: f.write(text.encode()))


# -- figure -------------------------------------------------------------------------------------


def write_figure(analysis: dict, path) -> None:
    """PNG: (left) each seed's baseline -> arm line; (right) the differences, t CI and ±margin."""
    # Figure + the Agg canvas directly: no pyplot, so no global backend or figure state is touched.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    f = _Fmt(analysis)
    baseline = analysis["baseline"]
    comparisons = analysis["comparisons"]
    margin = analysis["margin"]["value"]
    fig = Figure(figsize=(10, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)

    for j, c in enumerate(comparisons.values(), start=1):
        for _, a, b in c["pairs"]:
            color = "tab:green" if b > a else "tab:red" if b < a else "0.5"
            left.plot([0, j], [a, b], color=color, alpha=0.6, linewidth=1, marker="o", markersize=3)
    left.set_xticks(range(len(comparisons) + 1), [baseline, *comparisons])
    left.set_xlim(-0.3, len(comparisons) + 0.3)
    left.set_ylabel(analysis["metric"] + (f" ({f.unit.strip()})" if f.unit else ""))
    left.set_title("each seed, baseline → arm")

    right.axhspan(-margin, margin, color="0.88", label=f"±margin {f.value(margin)}{f.unit}")
    right.axhline(0, color="0.3", linewidth=0.8)
    for j, c in enumerate(comparisons.values()):
        diffs = [b - a for _, a, b in c["pairs"]]
        spread = [j - 0.15 + 0.3 * i / max(1, len(diffs) - 1) for i in range(len(diffs))]
        right.scatter(spread, diffs, s=16, color="tab:blue", alpha=0.7, zorder=3)
        low, high = c["t"]["ci"]
        if low is not None and high is not None:
            mean = c["mean_diff"]
            right.errorbar([j + 0.3], [mean], yerr=[[mean - low], [high - mean]], fmt="s", color="black",
                           capsize=4, zorder=4, label="mean, t CI" if j == 0 else None)
    right.set_xticks(range(len(comparisons)), [f"{arm} - {baseline}" for arm in comparisons])
    right.set_xlim(-0.5, len(comparisons) - 0.3)
    right.set_ylabel("difference" + (f" ({f.unit.strip()})" if f.unit else ""))
    right.set_title("differences per seed")
    right.legend(loc="best", fontsize=8)
    atomic_write(path, lambda out: fig.savefig(out, format="png"))

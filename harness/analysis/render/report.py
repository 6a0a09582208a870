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

from harness.ledger.record import fdr_words  # the level the ledger gave, when stats.fdr set one
from harness.analysis.render.summary import Fmt as _Fmt, pairing_line

UNDECIDED = ("undecided", "differs")  # verdicts that come with "seeds needed"


@dataclass
class Section:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # lines under the table
    show_header: bool = True


# -- formatting ---------------------------------------------------------------------------------


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
    direction = analysis.get("direction") or ("max" if analysis.get("higher_is_better", True) else "min")
    words = "higher is better" if direction == "max" else "lower is better"
    unit = f"{analysis['unit']}, " if analysis.get("unit") else ""
    level = fdr_words((analysis.get("declaration") or {}).get("fdr")) or f"alpha {analysis['alpha']:g}"
    return (
        f"{analysis.get('experiment')}: factor {analysis.get('factor')}, metric {analysis['metric']} "
        f"({unit}{words}, declared {direction}), baseline {analysis['baseline']}, {level}"
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
    out.append(_noise_section(analysis, f))
    for name, c in analysis["comparisons"].items():
        out.append(_comparison_section(analysis, name, c, f))
    if analysis.get("dose_trend"):
        out.append(_dose_trend_section(analysis, f))
    elif len(analysis["arms"]) >= 3 and analysis.get("dose_trend_why"):
        out.append(Section("Dose trend", [], notes=[f"not applicable: {analysis['dose_trend_why']}"], show_header=False))

    ident = analysis.get("identity") or {}
    if ident.get("allowed_mixed"):
        out.append(Section("MIXED IDENTITY (compared anyway, --allow-mixed-identity)", ["arm", "baseline", "differs"],
                           [[arm, c["baseline"], ", ".join(c["differs"]) or "nothing"]
                            for arm, c in (ident.get("comparisons") or {}).items()],
                           notes=["these arms differ in more than the factor: a difference mixes the factor "
                                  "with the parts named here"]
                           + [f"{h['path']} {h['problem']}" for h in ident.get("hash_disagreements") or []]))
    if analysis.get("excluded"):
        out.append(Section("Excluded runs", ["seed", "arm", "reason"],
                           [[str(e["seed"]), str(e["arm"]), e["reason"]] for e in analysis["excluded"]]))
    if analysis.get("not_compared"):
        out.append(Section("Not compared", ["arm", "baseline", "reason"],
                           [[str(n["arm"]), str(n["baseline"]), n["reason"]] for n in analysis["not_compared"]]))
    if analysis.get("unreadable"):
        out.append(Section("Unreadable files", ["path", "reason"],
                           [[u["path"], u["reason"]] for u in analysis["unreadable"]]))
    if analysis.get("data_unverified"):
        out.append(Section("Data", [], show_header=False, notes=[
            f"data not verified: {analysis['data_unverified']} run(s) loaded their data files without checking "
            "the official checksums (data.verify=false)"]))
    if analysis.get("replicas_differ"):
        from harness.analysis.render.summary import replicas_line

        out.append(Section("Replicas", ["seed", "arm", "what differs"],
                           [[str(r["seed"]), str(r["arm"]), r["says"]] for r in analysis["replicas_differ"]],
                           notes=[replicas_line(analysis["replicas_differ"])]))
    if analysis.get("examples_set_aside"):
        from harness.analysis.render.summary import set_aside_line

        out.append(Section("Per-example records", [], show_header=False,
                           notes=[set_aside_line(analysis["examples_set_aside"])]))
    certificate = analysis.get("certificate")
    if isinstance(certificate, dict) and certificate.get("line"):
        out.append(Section("Reproducibility", [], notes=[str(certificate["line"])], show_header=False))
    out += sequential_sections(analysis)
    return out


def _dose_trend_section(analysis: dict, f: _Fmt) -> Section:
    """The paired trend test over a numeric factor (dose_trend.dose_trend)."""
    t = analysis["dose_trend"]
    lin = t["linearity"]
    level = _pct(t["confidence_level"])
    row = [", ".join(f"{a}={d:g}" for a, d in zip(t["arms"], t["doses"])), str(t["seeds"]),
           f"{t['slope_per_unit']:+.3g}", f"[{t['ci'][0]:+.3g}, {t['ci'][1]:+.3g}]", _p(t["pvalue"]),
           "—" if lin["pvalue"] is None else f"F({lin['df'][0]}, {lin['df'][1]}) = {lin['statistic']:.3g}, p = {_p(lin['pvalue'])}"]
    unit = f.unit.strip()
    per = f"{analysis['metric']}{' (' + unit + ')' if unit else ''} per unit of {analysis.get('factor')}"
    words = (f"a trend: {t['slope_per_unit']:+.3g} {per}" if t["trend"] else "no trend shown (never read as no effect of the dose)")
    if lin["departs"]:
        words += "; the response departs from a line, so the slope is an average over a curve"
    elif lin["departs"] is False:
        words += "; no departure from a line shown"
    return Section("Dose trend", ["doses", "seeds", f"slope ({per})", f"{level} CI", "p", "departure from a line"], [row],
                   notes=[words, "method: " + t["method"]])


def sequential_sections(analysis: dict) -> list[Section]:
    """The looks of a sequential run (analysis["sequential"], harness/experiment/adaptive/sequential_policy.py): a line per look."""
    seq = analysis.get("sequential")
    if not isinstance(seq, dict) or not isinstance(seq.get("arms"), dict):
        return []
    f = _Fmt(seq)
    d = seq.get("design") or {}
    margin = d.get("margin")
    s = Section(f"Sequential looks ({seq.get('status')})",
                ["arm", "look", "seeds", "estimate", "repeated CI", "critical", "decision"])
    for arm, a in seq["arms"].items():
        for x in a.get("looks") or []:
            early = x.get("nominal_alpha") == 0  # a futility-only look: no alpha spent, no interval
            s.rows.append([arm, str(x["look"]), str(x["n"]), f"{f.signed(x['estimate'])}{f.unit}",
                           "— (futility-only look)" if early else f.interval(x["interval"]),
                           "—" if early else _num(x["critical"], ".3f"), x["decision"]])
    s.notes += [f"sequential decision ({a['decision']}): {a['sentence']}" for a in seq["arms"].values()]
    rule = " (rule better: the predictive chance of showing better)" if d.get("futility_rule") == "better" else ""
    s.notes.append(
        f"design, declared before the data: "
        + (f"futility-only looks at {', '.join(map(str, d['futility_looks']))} seeds (no alpha spent, no claim), then "
           if d.get("futility_looks") else "")
        + f"looks at {', '.join(map(str, d.get('looks') or []))} seeds, "
        f"alpha {d.get('alpha')}, margin {'±' + f.value(margin) + f.unit if margin else 'none'}, "
        f"{d.get('spending')} spending, futility {d.get('futility')}{rule}; each look's interval covers the true "
        f"difference at every look at once, so the decision keeps its error rate wherever the run stopped. "
        f"The fixed-N tests above, on the same seeds, do not account for the looks.")
    skewed = [f"{arm} {a['looks'][-1]['skewness']:+.2f}" for arm, a in seq["arms"].items()
              if a.get("looks") and abs(a["looks"][-1].get("skewness") or 0.0) >= 1.0]
    if skewed:  # the boundaries hold up to skewness 2; outlying seeds are another matter (docs/sequential.md)
        s.notes.append(f"skewed differences at the last look ({', '.join(skewed)}): the boundaries hold for normal "
                       f"and gamma-shaped differences up to skewness 2 in either direction; skew this large can "
                       f"also come from a few outlying seeds (a diverged run), which no boundary covers: inspect "
                       f"this arm's seeds.")
    if seq.get("stopped"):
        s.notes.append(f"stopped unsettled: {seq['stopped']}")
    return [s]


def _noise_section(analysis: dict, f: _Fmt) -> Section:
    floor = analysis["noise_floor"]
    margin = analysis["margin"]
    noise = Section("Noise floor", ["", "", ""], show_header=False)
    for name, std in floor["seed_std"].items():
        noise.rows.append([f"seed std, {name}", f"{f.value(std)}{f.unit}", "std across seeds (ddof=1)"])
    noise.rows.append(["seed std, pooled", f"{f.value(floor['pooled_seed_std'])}{f.unit}", "over the arms"])
    if floor.get("test_set_floor") is not None:
        noise.rows.append([
            "test-set floor", f"{f.value(floor['test_set_floor'])}{f.unit}",
            f"binomial sqrt(p(1-p)/n), n_test = {floor['n_test']} (Jordan 2024)",
        ])
    if margin["source"] == "auto":
        noise.rows.append(["margin", f"±{f.value(margin['value'])}{f.unit}",
                           f"ESTIMATED FROM THE DATA; 'beyond' against ±{f.value(margin['high'])}, "
                           f"'equivalent' against ±{f.value(margin['low'])}"])
    elif margin["source"] == "none":
        noise.rows.append(["margin", "none", "better or worse than 0 only; no equivalence claim"])
    else:
        noise.rows.append(["margin", f"±{f.value(margin['value'])}{f.unit}",
                           margin.get("declared") or "declared before the data"])
    noise.notes.append(f"margin: {margin['description']}")
    ts = analysis.get("test_set_noise") or {}
    if ts and not ts.get("available"):
        noise.notes.append(f"test-set noise: not in the intervals: {ts.get('reason')}")
    noise.notes.append(pairing_line(analysis))
    setup = analysis.get("setup") or {}
    if any(setup.values()):
        noise.notes.append("setup: " + "; ".join(f"{k} {', '.join(v) or '—'}" for k, v in setup.items()))
    return noise


def _comparison_section(analysis: dict, name: str, c: dict, f: _Fmt) -> Section:
    margin = analysis["margin"]
    k = c.get("decision", {}).get("n_comparisons", 1)
    s = Section(f"{name} vs {c['baseline']} ({c['n_pairs']} paired seeds)", ["", "", ""], show_header=False)
    level = f"{c['t']['confidence_level']:.0%}"
    p_dec = c["decision"]["pvalues"]
    iv = c["intervals"]
    s.rows += [
        [f"mean difference {name} - {c['baseline']}", f"{f.signed(c['mean_diff'])}{f.unit}",
         f"means {f.value(c['mean_arm'])} vs {f.value(c['mean_baseline'])}"],
        [f"t {level} CI", f.interval(c["t"]["ci"]),
         c["t"]["note"] or f"paired t, df {_num(c['t']['df'], 'g')}" + (", unadjusted" if k > 1 else "")],
    ]
    if k > 1 and margin["source"] == "none":  # no margin: the interval against 0 is the one that decides
        s.rows.append([f"decision CI, vs 0 ({_pct(iv['zero']['level'])})",
                       f.interval([iv["zero"]["low"], iv["zero"]["high"]]), iv["zero"]["about"]])
    elif k > 1 or margin["source"] == "auto":
        s.rows += [
            [f"decision CI, vs 0 ({_pct(iv['zero']['level'])})", f.interval([iv["zero"]["low"], iv["zero"]["high"]]),
             iv["zero"]["about"]],
            [f"decision CI, beyond ({_pct(iv['beyond']['level'])})",
             f.interval([iv["beyond"]["low"], iv["beyond"]["high"]]), f"against ±{f.value(iv['beyond']['margin'])}"],
            [f"decision CI, within ({_pct(iv['equivalent']['level'])})",
             f.interval([iv["equivalent"]["low"], iv["equivalent"]["high"]]), f"against ±{f.value(iv['equivalent']['margin'])}"],
        ]
    s.rows += [
        [f"studentized bootstrap {level} CI", f.interval(c["bootstrap"]["ci"]), _bootstrap_detail(c["bootstrap"])],
        ["sd of differences", f"{f.value(c['noise']['std_diff'])}{f.unit}", _pairing_detail(c["noise"], f, analysis, name)],
        ["p, paired t (raw)", _p(c["t"]["pvalue"]), f"against 0; decision p {_p(p_dec['zero'])}"],
        ["p, Wilcoxon signed-rank (Pratt)", _p(c["wilcoxon"]["pvalue"]), _wilcoxon_detail(c["wilcoxon"])],
        ["p, sign-flip permutation", _p(c["permutation"]["pvalue"]), _permutation_detail(c["permutation"])],
        ["p, Welch (unpaired)", _p(c["welch"]["pvalue"]), "what ignoring the pairing would say"],
        ["effect size d_z", _num(c["d_z"]), "mean / sd of the differences"],
    ]
    if margin["source"] == "none":  # its tests ran at 0: better or worse, and no equivalence to test
        s.rows.append(["p, better or worse (raw)", _p(c["minimum_effect"]["pvalue"]),
                       f"no margin: the two-sided test against 0 that decides it; decision p {_p(p_dec['beyond'])}"])
    else:
        s.rows += [
            ["p, beyond the margin (raw)", _p(c["minimum_effect"]["pvalue"]),
             f"minimum-effect test, H0: |Δ| ≤ {f.value(c['minimum_effect']['margin'])}; decision p {_p(p_dec['beyond'])}"],
            ["p, within the margin (raw)", _p(c["tost"]["pvalue"]),
             f"TOST, H0: |Δ| ≥ {f.value(c['tost']['margin'])}; decision p {_p(p_dec['equivalent'])}"],
        ]
    ts = c.get("test_set")
    if ts:
        s.rows += [
            ["test-set SE of the difference", f"{f.value(ts['se_test_set'])}{f.unit}",
             f"seed SE {f.value(ts['se_seeds'])}{f.unit}; {ts['discordant']:.3g} examples disagree per seed "
             f"(McNemar SE of one seed {f.value(ts['mcnemar_se'])}{f.unit})"],
            [f"CI for the data distribution ({_pct(ts['level'])})", f.interval(ts["distribution_ci"]),
             f"seeds x test examples, df {ts['df']:.3g}"],
        ]
    if c.get("final_weights_identical"):
        s.rows.append(["final weights", "bitwise identical", "in every paired seed"])
    need = c["seeds_needed"]
    sequential = isinstance(analysis.get("sequential"), dict)
    if c["verdict"]["code"] in UNDECIDED and not sequential:  # in sequential mode the design plans the seeds
        if margin["source"] == "none":
            s.rows.append(["seeds needed", _seed_range(need["at_observed"], need.get("at_observed_range")),
                           "to detect a difference the size of the observed one (no margin)"])
        elif c["verdict"]["code"] == "differs":
            s.rows.append(["seeds needed", _seed_range(need["to_settle_margin"], need.get("to_settle_margin_range")),
                           "to settle the margin if the true difference is as observed"])
        else:
            s.rows.append(["seeds needed",
                           f"{_seed_range(need['at_margin'], need.get('at_margin_range'))} / "
                           f"{_seed_range(need['at_observed'], need.get('at_observed_range'))}",
                           "to detect a difference the size of the margin / of the observed one"])
        s.notes.append(f"seeds needed assume: {need['assumptions']}")
    for metric, o in (c.get("other_metrics") or {}).items():
        s.rows.append([f"other metric: {metric} ({o['direction']})", f"{o['mean_diff']:+.4g} {_plain_interval(o['ci'])}",
                       f"{o['reading']}; p {_p(o['pvalue'])}, Holm p {_p(o['pvalue_holm'])} ({o['n_pairs']} pairs)"])
    if c.get("missing_seeds"):
        s.notes.append(f"baseline seeds without a partner in {name}: {', '.join(map(str, c['missing_seeds']))}")
    if c["verdict"].get("beyond_test_set"):
        s.notes.insert(0, c["verdict"]["beyond_test_set"])
    if sequential:
        s.notes.insert(0, f"fixed-N reading ({c['verdict']['code']}), information only: the sequential decision "
                          f"below is the verdict, and this reading does not account for its looks. {c['verdict']['sentence']}")
    else:
        s.notes.insert(0, f"verdict ({c['verdict']['code']}): {c['verdict']['sentence']}")
    return s


def _pct(level: float) -> str:
    return f"{100 * level:.2f}".rstrip("0").rstrip(".") + "%"


def _plain_interval(ci) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"[{ci[0]:+.4g}, {ci[1]:+.4g}]"


def _seed_range(n, rng) -> str:
    if not rng or (rng[0] is None and rng[1] is None):
        return _seeds(n)
    return f"{_seeds(n)} ({_seeds(rng[0])} to {_seeds(rng[1])})"


def _bootstrap_detail(b: dict) -> str:
    if b["method"] == "none":
        return b["note"]
    if b["method"] == "studentized":  # the row's label already says what it is
        text = f"bootstrap-t, {b['n_resamples']} resamples of the pairs, seed {b['seed']}"
        undefined = None in (b.get("ci") or [None])  # say why, in words (a 3-seed interval is infinite)
        return f"{text}; {b['note']}" if undefined and b.get("note") else text
    text = f"{b['method']}, {b['n_resamples']} resamples of the pairs, seed {b['seed']}"
    return f"{text}; {b['note']}" if b.get("note") else text


def _wilcoxon_detail(w: dict) -> str:
    # Say which variant, so that a reader who reruns R's wilcox.test knows why it prints another p.
    text = w["method"]
    if w.get("zero_method") == "pratt":
        text += ("; Pratt: zeros ranked, then dropped. R's wilcox.test(paired = TRUE) drops zeros first "
                 "and uses a normal approximation here, so it prints another p")
    return text


def _permutation_detail(p: dict) -> str:
    if p.get("method"):
        return p["method"]
    if p["exact"]:
        return f"exact over all {p['n_resamples']} sign patterns"
    return f"{p['n_resamples']} random sign patterns, seed {p['seed']}"


def _pairing_detail(noise: dict, f: _Fmt, analysis: dict, arm: str) -> str:
    rho = noise.get("correlation")
    unpaired = f"unpaired {f.value(noise['unpaired_std_diff'])}{f.unit}"
    if rho is None:
        constant = [name for name, key in ((analysis["baseline"], "std_a"), (arm, "std_b")) if noise.get(key) == 0]
        return (f"correlation undefined: {' and '.join(constant) or 'an arm'} gives the same value in every seed; "
                f"{unpaired}")
    ratio = noise.get("variance_ratio")
    text = f"rho {rho:.2f} between arms; {unpaired}"
    if ratio is None:
        return text
    if ratio <= 1:
        return f"{text}: pairing removed {1 - ratio:.0%} of the variance"
    return (f"{text}: the arms are negatively correlated, so pairing removed nothing; the differences "
            f"vary {ratio:.2g}x as much as unpaired ones would")


# -- terminal -----------------------------------------------------------------------------------


def render_table(analysis: dict, console: Console | None = None, *, tables: bool = False) -> None:
    """Print the analysis to the terminal: the verdict screen (summary.py), and with ``tables``
    every table report.md holds."""
    from harness.analysis.render.summary import lines

    console = console or Console()
    screen = lines(analysis)
    console.print(Text(screen[0], style="bold"))
    for line in screen[1:]:
        console.print(Text(line, style="bold" if line.startswith(("  ", "ALTERNATIVE")) and "=" not in line else None))
    if not tables:
        console.print(Text("every table: report.md (or tables=true; python -m harness.analyze DIR --tables)",
                           style="dim"))
        return
    console.print()
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

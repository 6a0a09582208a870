"""The declared conditions read together: the primary claim of an experiment with ``ab.conditions``.

Each condition (``condition=NAME/``) keeps its own plain A/B analysis and verdict. This module makes
the root's files from them: analysis.json (schema harness.conditions/1), report.md (one summary table,
the verdict sentence in words, the heterogeneity and the peers' aggregates) and analysis.png (a forest
plot per arm: each condition's effect and interval, the average's diamond, the prediction interval
for a new condition, and the declared margin). The numbers are across_conditions.across's: the average
effect decided by a t over the K effects (it holds alpha with few seeds per condition), the random-
effects REML / Hartung-Knapp estimate, tau with its Q-profile interval and I^2 beside it.

Every condition's effect is in the declared units of stats.metric (the declaration refuses a condition
that changes what is measured), so the effects are on one scale as they are.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis import across_conditions

SCHEMA = "harness.conditions/1"
KIND = "conditions"
CONDITION_DIR = "condition={}"


def analyze_conditions_dir(root, *, write: bool = True, ledger=None) -> tuple[dict, dict]:
    """Each condition's folder analysed as its declaration.json says, then the root summary (written
    with ``write``). Returns (summary, {name: that condition's analysis}). The same call made after
    the runs, so that it reproduces their files exactly."""
    from harness.analysis.analyze import analyze_dir
    from harness.analysis.selection import AnalysisError
    from harness.config import declaration as declaration_io
    from harness.config.metric_spec import DeclarationError

    root = Path(root)
    try:
        declaration = declaration_io.read(root)
    except DeclarationError as e:
        raise AnalysisError(str(e)) from None
    if declaration is None or not declaration.conditions:
        raise AnalysisError(f"{root} has no declaration.json with ab.conditions: not an experiment across conditions.")
    analyses, errors, folders = {}, {}, {}
    for name in declaration.conditions:
        folder = root / CONDITION_DIR.format(name)
        folders[name] = folder.name
        try:
            analyses[name] = analyze_dir(folder, declaration=declaration_io.read(folder), write=write)
        except (AnalysisError, DeclarationError) as e:
            errors[name] = str(e)
    summary = analyze_conditions(analyses, declaration, errors, folders=folders)
    if write:
        write_conditions(summary, root)
        from harness.ledger.record import record_declared  # the claim across them, once (ledger: the config's node)

        record_declared(summary, root, ledger)
    return summary, analyses


def analyze_conditions(analyses: dict, declaration, errors: dict | None = None, folders: dict | None = None) -> dict:
    """The root summary: ``analyses`` maps a condition's name to its plain A/B analysis."""
    errors, folders = errors or {}, folders or {}
    rows = []
    for name in declaration.conditions:
        a = analyses.get(name)
        row = {"name": name, "overrides": list(declaration.conditions[name]), "folder": folders.get(name)}
        if a is None:
            row["not_analysed"] = errors.get(name, "no analysis")
        else:
            row["comparisons"] = {arm: {
                "n_pairs": c["n_pairs"], "mean_diff": c["mean_diff"], "ci": c["t"]["ci"],
                "confidence_level": c["t"]["confidence_level"], "pvalue": c["t"]["pvalue"],
                "verdict": c["verdict"]["code"], "sentence": c["verdict"]["sentence"],
                "a": [p[1] for p in c["pairs"]], "b": [p[2] for p in c["pairs"]],
            } for arm, c in a["comparisons"].items()}
        rows.append(row)
    spec = declaration.primary
    across = {}
    for arm in declaration.others:
        conditions = [{"label": r["name"], "value": None, "a": r["comparisons"][arm]["a"], "b": r["comparisons"][arm]["b"]}
                      for r in rows if arm in r.get("comparisons", {}) and len(r["comparisons"][arm]["a"]) >= 2]
        block = across_conditions.across(conditions, direction=spec.direction, alpha=declaration.alpha,
                                         n_resamples=declaration.bootstrap_resamples,
                                         bootstrap_seed=declaration.bootstrap_seed, unit=spec.unit)
        if block is None:
            across[arm] = {"not_computed": f"{len(conditions)} condition(s) could be analysed for {arm}: "
                                           "an average across conditions needs at least two"}
            continue
        block["sentence"] = across_conditions.sentence(block, arm=arm, baseline=declaration.baseline,
                                                       unit=spec.unit, kind=KIND)
        block["margin"] = margin_words(declaration.margin, spec.unit)
        if isinstance(declaration.margin, (int, float)) and "pooled" in block:
            block["sentence"] += " " + _against_margin(block["pooled"]["ci"], declaration.margin, spec.unit)
        across[arm] = block
    return {
        "schema": SCHEMA, "experiment": declaration.experiment, "factor": declaration.factor,
        "arms": dict(declaration.arms), "baseline": declaration.baseline, "metric": declaration.metric,
        "unit": spec.unit, "direction": spec.direction, "alpha": declaration.alpha, "margin": declaration.margin,
        "primary": "the average effect across the declared conditions (declared before the data, in "
                   "declaration.json); each condition's own verdict is in its folder",
        "declaration": declaration.to_dict(), "conditions": rows, "across_conditions": across,
    }


def _against_margin(ci, margin: float, unit: str) -> str:
    """The average's interval against the declared margin (either direction: beyond it, inside it)."""
    low, high = ci
    u = f" {unit}" if unit else ""
    if low > margin or high < -margin:
        return f"The average is beyond the declared margin ±{margin:g}{u} (its whole interval)."
    if -margin < low and high < margin:
        return f"The average is within the declared margin ±{margin:g}{u} (its whole interval): no effect that matters on average."
    return f"Whether the average is beyond the declared margin ±{margin:g}{u} is not shown (its interval straddles it)."


def margin_words(margin, unit: str) -> str:
    if margin is None:
        return "no margin declared (better or worse than 0)"
    if margin == "auto":
        return "auto: estimated per condition from its own seeds (each condition's report); none is drawn here"
    return f"±{margin:g}{' ' + unit if unit else ''}, declared"


def _n(x, unit="") -> str:
    return "n/a" if x is None else f"{x:+.3g}{unit}"


def _ci(ci, unit="") -> str:
    return "n/a" if not ci or ci[0] is None else f"[{ci[0]:+.3g}, {ci[1]:+.3g}]{unit}"


def summary_table(summary: dict, arm: str) -> list[str]:
    """The one table: per condition, then the average, random effects, prediction, tau and I^2."""
    block = summary["across_conditions"].get(arm) or {}
    u = f" {summary['unit']}" if summary.get("unit") else ""
    out = [f"| condition | overrides | pairs | {arm} - {summary['baseline']} | CI | p (paired t) | p (Holm, {KIND}) | verdict |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    holm = dict(zip(block.get("labels", []), (block.get("better_on") or {}).get("pvalues_holm", [])))
    for r in summary["conditions"]:
        c = (r.get("comparisons") or {}).get(arm)
        overrides = " ".join(r["overrides"])
        if c is None:
            out.append(f"| {r['name']} | {overrides} | 0 | not analysed: {r.get('not_analysed', '')} | | | | |")
            continue
        p_holm = holm.get(r["name"])
        out.append(f"| {r['name']} | {overrides} | {c['n_pairs']} | {_n(c['mean_diff'], u)} | {_ci(c['ci'])} | "
                   f"{c['pvalue']:.3g} | {'n/a' if p_holm is None else f'{p_holm:.3g}'} | {c['verdict'].replace('_', ' ')} |")
    if "pooled" in block:
        p, h = block["pooled"], block["heterogeneity"]
        re = p["random_effects"]
        pi = p["prediction_interval"]
        k = block["conditions"]
        out += [f"| **average** (t over the {k} effects) | | {k} | **{_n(p['estimate'], u)}** | {_ci(p['ci'])} | {p['pvalue']:.3g} | | |",
                f"| random effects (REML, Hartung-Knapp) | | {k} | {_n(re['estimate'], u)} | {_ci(re['ci'])} | {re['pvalue']:.3g} | | |",
                f"| a new condition (prediction interval{', cut to the range an effect can take' if p.get('prediction_range') else ''}) | | | | {_ci(pi)} | | | |",
                f"| tau, between-condition sd (REML, Q-profile) | | | {h['tau']:.3g}{u} | [{h['tau_ci'][0]:.3g}, {h['tau_ci'][1]:.3g}] | | | |",
                f"| I^2 | | | {100 * h['i2']:.0f}% | [{100 * h['i2_ci'][0]:.0f}%, {100 * h['i2_ci'][1]:.0f}%] | "
                f"{h['pvalue']:.3g} (Alexander-Govern) | | |"]
    return out


def markdown(summary: dict, figure: str | None = "analysis.png") -> str:
    k = len(summary["conditions"])
    out = [f"# {summary['experiment']}: {', '.join(summary['arms'])} across {k} conditions", ""]
    if figure:
        out += [f"![forest plot: each condition's effect, the average, a new condition's prediction interval]({figure})", ""]
    out += ["## Across conditions (the declared primary claim)", ""]
    for arm, block in summary["across_conditions"].items():
        if "not_computed" in block and "pooled" not in block:
            out += [f"**{arm} vs {summary['baseline']}**: not computed: {block['not_computed']}", ""]
            continue
        out += [f"**{arm} vs {summary['baseline']}**: {block['sentence']}", ""]
        out += summary_table(summary, arm) + [""]
        out += across_conditions.lines(block, arm=arm, baseline=summary["baseline"], unit=summary.get("unit") or "", kind=KIND)[2:]
        out += [f"- margin: {block['margin']}", ""]
    d = summary["declaration"]
    out += ["## Declared (declaration.json, before the data)", "",
            f"- metric {summary['metric']} ({summary['unit'] or 'no unit'}, "
            f"{'higher' if summary['direction'] == 'max' else 'lower'} is better); alpha {summary['alpha']:g}; "
            f"baseline {summary['baseline']}; factor {summary['factor']} "
            f"({', '.join(f'{a}={v}' for a, v in summary['arms'].items())}); seeds {d['seeds']}",
            "- conditions: " + "; ".join(f"{r['name']} [{' '.join(r['overrides'])}]" for r in summary["conditions"]),
            f"- primary: {summary['primary']}", "",
            "## Each condition's own verdict", ""]
    for r in summary["conditions"]:
        for arm, c in (r.get("comparisons") or {}).items():
            out.append(f"- **{r['name']}** ({r['folder']}/report.md): {c['sentence']}")
        if "not_analysed" in r:
            out.append(f"- **{r['name']}**: not analysed: {r['not_analysed']}")
    return "\n".join(out) + "\n"


def screen(summary: dict) -> list[str]:
    """The verdict screen: the claim across conditions first, then each condition's verdict."""
    k = len(summary["conditions"])
    out = [f"{summary['experiment']}: verdict across {k} conditions (the declared primary claim)"]
    for arm, block in summary["across_conditions"].items():
        if "pooled" not in block:
            out.append(f"  {arm} vs {summary['baseline']}: not computed: {block.get('not_computed', '')}")
            continue
        h, re = block["heterogeneity"], block["pooled"]["random_effects"]
        out += [f"  {block['sentence']}",
                f"  random effects (REML, Hartung-Knapp): {_n(re['estimate'])} {_ci(re['ci'])}; tau {h['tau']:.3g} "
                f"[{h['tau_ci'][0]:.3g}, {h['tau_ci'][1]:.3g}]; I^2 {100 * h['i2']:.0f}%"]
    d = summary["declaration"]
    out.append(f"declared: the average across {k} conditions is the primary claim ("
               + "; ".join(f"{r['name']}: {' '.join(r['overrides'])}" for r in summary["conditions"])
               + f"); metric {summary['metric']} ({summary['unit'] or 'no unit'}, "
               f"{'higher' if summary['direction'] == 'max' else 'lower'} is better); margin "
               f"{margin_words(summary['margin'], summary['unit']).split(':')[0]}; alpha {summary['alpha']:g}; baseline "
               f"{summary['baseline']}; factor {summary['factor']} ("
               + ", ".join(f"{a}={v}" for a, v in summary["arms"].items()) + f"); {len(d['seeds'])} seeds")
    out.append("per condition (each its own paired verdict):")
    for r in summary["conditions"]:
        for arm, c in (r.get("comparisons") or {}).items():
            out.append(f"  {r['name']:<12} {arm} - {summary['baseline']} = {_n(c['mean_diff'])} {_ci(c['ci'])}, "
                       f"p = {c['pvalue']:.3g}: {c['verdict'].replace('_', ' ')}")
        if "not_analysed" in r:
            out.append(f"  {r['name']:<12} not analysed: {r['not_analysed']}")
    return out


def render_conditions(summary: dict) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console()
    for i, line in enumerate(screen(summary)):
        console.print(Text(line, style="bold" if i == 0 else None))


def write_figure(summary: dict, path) -> None:
    """One forest plot per arm, with the declared margin when it is a number."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from harness.analysis.render import figures

    arms = list(summary["across_conditions"])
    fig = Figure(figsize=(7 * len(arms), 2.2 + 0.55 * len(summary["conditions"])))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(arms), squeeze=False)
    margin = summary["margin"] if isinstance(summary["margin"], (int, float)) else None
    for ax, arm in zip(axes[0], arms):
        block = summary["across_conditions"][arm]
        rows = [(r["name"], c["mean_diff"], *c["ci"]) for r in summary["conditions"]
                if (c := (r.get("comparisons") or {}).get(arm)) is not None]
        figures.forest(ax, rows, block if "pooled" in block else None, margin=margin, unit=summary.get("unit") or "",
                       title=f"{arm} vs {summary['baseline']} across {len(rows)} conditions")
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_conditions(summary: dict, folder) -> None:
    """analysis.json, report.md and analysis.png at the root, replaced together or not at all."""
    from harness import results as results_io
    from harness.analysis.render.outputs import write_together

    folder = Path(folder)
    write_together(folder, {"analysis.json": lambda p: results_io.write_json(p, summary),
                            "report.md": lambda p: Path(p).write_text(markdown(summary)),
                            "analysis.png": lambda p: write_figure(summary, p)})

"""The race's analysis (analysis.json, report.md, race.png), replayed from the result files.

``analyze_race(folder)`` is what the race sweeper writes at the end and what ``python -m
harness.analyze RACE_FOLDER`` reproduces byte for byte: the declaration (declaration.json) says the
metric, direction, margin and alpha, race.json's design the looks (checked against the
declaration), and the decisions are race_plan.plan over the result files. Results of more than one
identity are refused, as by every analysis.

report.md: the winner, the set indistinguishable from the best, or the survivors at the seed
limit; each configuration's mean, its difference from the leader with the simultaneous interval,
seeds spent per configuration, and a table of every look and every drop. race.png: per look, each
running configuration's mean minus that look's leader with its simultaneous interval, and the
margin band; a dropped configuration's line ends at its drop.
"""

from __future__ import annotations

from pathlib import Path

from harness import HarnessError
from harness.experiment.adaptive.race_plan import FIGURE_NAME, RACE_NAME

SCHEMA = "harness.race_analysis/1"
ANALYSIS_NAME = "analysis.json"
REPORT_NAME = "report.md"


class RaceAnalysisError(HarnessError):
    """The folder's race cannot be analysed as declared (one paragraph: what and why)."""


def _f(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def look_drops(look: dict) -> list:
    """Each configuration a look dropped, in words: behind a survivor, or diverged since the last look."""
    return ([f"{z['config']} (behind {z['by']} by {z['behind']:.4g} > {z['width']:.4g})" for z in look["dropped"]]
            + [f"{z['config']} (diverged at seed {z['seed']}: {z['reason']})" for z in look.get("diverged") or []])


def _counted(block: dict) -> str:
    """Runs trained that no look counted (a batch runs whole), said beside the seeds spent."""
    counted = block.get("seeds_counted", block["seeds_spent"])
    if counted == block["seeds_spent"]:
        return ""
    return (f"; every run trained, of which {counted} counted in the looks (a batch runs whole: a configuration "
            f"dropped within it, or a seed that counted for none, still ran)")


def report(block: dict, figure: str = "") -> str:
    d = block["design"]
    unit = f" {d['unit']}" if d.get("unit") else ""
    better = "higher" if d["direction"] == "max" else "lower"
    lines = [
        f"## Race ({block['status']}): {d['metric']} ({better} is better) over {d['factor']}", "",
        f"**{block['verdict']}**", "",
        f"Kim & Nelson's fully sequential procedure (2001) on common seeds: margin (indifference zone) "
        f"±{d['margin']:g}{unit}, alpha {d['alpha']:g} (half for drops: h² = {d['h2']:.3f}; half for the "
        f"simultaneous intervals, each at error {block['interval_error']:.3g}); looks at "
        f"{', '.join(map(str, d['looks']))} seeds. A configuration is dropped when behind a survivor by more than "
        f"KN's width, or when its interval against that survivor lies below -{d['margin']:g}. Promise (docs/racing.md), "
        f"with probability >= {1 - d['alpha']:g}: if the best configuration is better than every other by at least "
        f"the margin it is kept, every drop on an interval was worse than the best by more than the margin, and a "
        f"set that stopped within the margin is within it.", "",
        f"Seeds spent: {block['seeds_spent']} of {block['seeds_all_to_max']} (every configuration to "
        f"{d['max_seeds']} seeds): {block['seeds_spent'] / block['seeds_all_to_max']:.2f}x"
        + _counted(block) + ".", "",
        f"| configuration | {d['factor']} | status | seeds | mean | minus leader | interval |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in block["configs"].items():
        status = c["status"] + (f" at look {c['dropped_at_look']} (by {c['dropped_by']})" if "dropped_by" in c else "")
        iv = c["interval"]
        lines.append(f"| {name} | {c['value']} | {status} | {c['n']} | {_f(c['mean'])} | {_f(c['difference'])} | "
                     + (f"[{_f(iv[0])}, {_f(iv[1])}]" if iv else "-") + " |")
    lines += ["", "| look | seeds | running | dropped |", "|---|---|---|---|"]
    for x in block["looks"]:
        drops = "; ".join(look_drops(x)) or "-"
        lines.append(f"| {x['look']} | {x['n']} | {', '.join(x['alive'])} | {drops} |")
    if block["failed"]:
        lines += ["", "Failed runs (their seeds count for no configuration): " + "; ".join(
            f"seed {f['seed']} {f['arm']}: {f['reason']}" for f in block["failed"])]
    if block.get("diverged"):
        lines += ["", "Dropped because they diverged where another configuration finished (stats.diverged=worst): "
                  + "; ".join(f"{d['config']} at seed {d['seed']}: {d['reason']}" for d in block["diverged"])]
    if block["stopped"]:
        lines += ["", f"Stopped unsettled: {block['stopped']}"]
    if figure:
        lines += ["", f"![each configuration minus the leader, per look]({figure})"]
    return "\n".join(lines) + "\n"


def figure(block: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = block["design"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, name in enumerate(block["configs"]):
        pts = [(x["n"] + 0.12 * j, *x["versus_leader"][name]) for x in block["looks"] if name in x["versus_leader"]]
        pts += [(x["n"] + 0.12 * j, 0.0, 0.0) for x in block["looks"] if x.get("leader") == name]
        if pts:
            pts.sort()
            n, est, half = zip(*pts)
            ax.errorbar(n, est, yerr=half, marker="o", capsize=3, label=name)
    ax.axhspan(-d["margin"], d["margin"], color="grey", alpha=0.2, label=f"margin ±{d['margin']:g}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("seeds (looks)")
    ax.set_ylabel(f"{d['metric']}: minus that look's leader")
    ax.set_title(f"Race: {block['verdict']}"[:90], fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def analyze_race(folder, *, write: bool = True, ledger=None) -> dict:
    """The declared race analysis of ``folder`` (analysis.json's dict); written with report.md and
    race.png, replaced together or not at all, unless ``write`` is false."""
    from harness.analysis.identity import comparability, run_identity
    from harness.analysis.render.outputs import write_together
    from harness.config.declaration import read
    from harness.config.metric_spec import DeclarationError
    from harness.experiment.adaptive import race_plan as rp
    from harness.results import load_tree, read_json, write_json

    folder = Path(folder)
    try:
        declaration = read(folder)
    except DeclarationError as e:
        raise RaceAnalysisError(str(e)) from None
    if declaration is None or not (folder / RACE_NAME).is_file():
        raise RaceAnalysisError(f"{folder} holds no race: a race folder has the declaration.json and race.json "
                                f"that the race sweeper (hydra/sweeper=harness_race) writes before its first run.")
    stored = read_json(folder / RACE_NAME).get("design") or {}
    try:  # the looks are race.json's; everything the declaration says must agree with it
        design = rp.design_of(declaration, {k: stored.get(k) for k in ("min_seeds", "seeds_per_look", "max_seeds",
                                                                      "max_failures")})
    except ValueError as e:
        raise RaceAnalysisError(f"{folder / RACE_NAME}: {e}") from None
    problem = rp.stored_design_problem({"design": stored}, design, folder / RACE_NAME)
    if problem:
        raise RaceAnalysisError(f"declaration.json and race.json disagree: {problem}")
    results = load_tree(folder).results
    configs = list(design.configs)
    try:
        ident = comparability.check(results, baseline=configs[0], others=configs[1:]) if results else {}
    except run_identity.IdentityError as e:
        raise RaceAnalysisError(str(e)) from None
    p = rp.plan(design, results, seeds=list(declaration.seeds))
    status = rp.final_status(p)
    analysis = {"schema": SCHEMA, "declaration": declaration.to_dict(), "experiment": declaration.experiment,
                "race": rp.record(design, p, status=status, runs=len(results)),
                "identity": ident}
    if write:
        write_together(folder, {ANALYSIS_NAME: lambda path: write_json(path, analysis),
                                REPORT_NAME: lambda path: path.write_text(report(analysis["race"], figure=FIGURE_NAME)),
                                FIGURE_NAME: lambda path: figure(analysis["race"], path)})
        from harness.ledger.record import record_declared  # a settled race's claims (ledger: the config's node)

        record_declared(analysis, folder, ledger)
    return analysis

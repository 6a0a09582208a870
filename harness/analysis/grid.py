"""A grid around an A/B: the same A/B at several settings (``optim.lr=0.01,0.05 'seed=range(0,3)'``).

Each grid point is one identity (comparability.py: the config outside the factor differs between points,
the code and environment do not). Each point is analysed on its own, exactly as a plain A/B
(analysis.analyze), and written into its own folder; the summary (grid.json, grid.md, grid.png at
the sweep's root) gives, per point and arm, the effect and its confidence interval, the paired t
p-value and that p-value Holm-adjusted across every (grid point, arm) comparison of the grid, and a
figure of the effect against the swept value. The per-point verdicts stay the plain A/B's: they are
not corrected for the grid; the Holm column is what to read when asking "where does B differ at all".

``analyze_grid_dir(root)`` is the plain ``analysis.analyze_dir(root)`` when root holds one identity.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from harness.analysis import across_conditions
from harness.analysis.identity import comparability, run_identity
from harness.analysis.render import figures
from harness.analysis.identity.certificate import certificate_for
from harness import results as results_io
from harness.config import declaration as declaration_io
from harness.config.metric_spec import DeclarationError
from harness.analysis.analyze import (
    ALTERNATIVES, CERTIFICATE_NAME, OUTPUT_NAMES, _load, alternative_name, analyze, analyze_dir, set_aside_stale_outputs, write_outputs)
from harness.analysis.gather import CHOICES
from harness.analysis.selection import AnalysisError

SCHEMA = "harness.grid/1"
GRID_JSON, GRID_MD, GRID_PNG = "grid.json", "grid.md", "grid.png"


def analyze_grid_dir(root, *, write: bool = True, **kw) -> dict:
    """The grid summary of root when it holds several settings of one A/B, else its plain analysis.

    Every point is analysed as root's declaration says (declaration.json, else the results'); choices
    that depart from it (analysis.analyze's) make an alternative, written to alternatives/<choices>/
    (the summary in root's, each point's in the point's folder), never over the declared files."""
    root = Path(root)
    ledger = kw.pop("ledger", None)  # the config's ledger node, when a sweep wrote it (ledger/record.py)
    with results_io.gc_paused():
        folder = root if root.is_dir() else root.parent
        if kw.get("declaration") is None:
            try:
                kw["declaration"] = declaration_io.read(folder)
            except DeclarationError as e:
                raise AnalysisError(str(e)) from None
        loaded, unreadable = _load(root, folder)
        groups = comparability.group(loaded.results)
        if len(groups) == 1:
            return analyze_dir(root, write=write, **kw)
        alternative = alternative_name({k: v for k, v in kw.items() if k in CHOICES})
        try:
            summary = _analyze_groups(folder, groups, unreadable, write, kw, alternative)
        except AnalysisError as e:
            moved = (set_aside_stale_outputs(folder, loaded.results, names=(GRID_JSON, GRID_MD, GRID_PNG))
                     if write and not any(kw.get(k) is not None for k in CHOICES) else None)
            if moved:
                raise AnalysisError(f"{e} The earlier grid summary was moved to "
                                    f"{moved.relative_to(folder).as_posix()}/ so that it does not look current.") from None
            raise
    if write:
        target = folder / ALTERNATIVES / alternative if summary["departures"] else folder
        if summary["departures"]:
            summary["written_to"] = target.relative_to(folder).as_posix()
        results_io.write_json(target / GRID_JSON, summary)
        write_markdown(summary, target / GRID_MD)
        write_figure(summary, target / GRID_PNG)
        from harness.ledger.record import record_declared  # each point's claims, once

        record_declared(summary, folder, ledger)
    return summary


def _analyze_groups(folder: Path, groups, unreadable, write: bool, kw: dict, alternative: str) -> dict:
    heads = [run_identity.identity(g[0]) for g in groups]
    other = [p for p in run_identity.PARTS if p != "base_hash"
             and all(p in h for h in heads) and len({run_identity._hashable(h[p]) for h in heads}) > 1]
    if other:
        raise AnalysisError(
            "These results are not a grid over settings: besides the config they differ in "
            + ", ".join(comparability._LABELS[p] for p in other) + ". "
            + comparability.describe(groups, other, {}, [], baseline="")
        )
    experiments = {(g[0].get("experiment"), run_identity.factor_of(g[0])) for g in groups}
    if len(experiments) > 1:
        raise AnalysisError(f"These results hold {len(experiments)} different experiments ({sorted(experiments, key=str)}); "
                            "a grid varies the settings around ONE A/B. Analyse each experiment's folder on its own.")
    swept = comparability.config_differences(groups)
    settings = [{key: values[i] for key, values in swept.items()} for i in range(len(groups))]
    order = sorted(range(len(groups)), key=lambda i: [_sort_key(settings[i][k]) for k in swept])
    certificate = None
    if (folder / CERTIFICATE_NAME).is_file():
        try:
            certificate = results_io.read_json(folder / CERTIFICATE_NAME)
        except (OSError, ValueError):
            certificate = None
    extra = dict(kw.pop("extra", None) or {})
    points, not_analysed = [], []
    paths = [[r["_path"] for r in g] for g in groups]
    for i in order:
        g, setting = groups[i], settings[i]
        point_extra = {**extra, "grid_point": setting}
        cert = _certificate_of(folder, paths[i], certificate, g)
        if cert is not None:
            point_extra["certificate"] = cert
        try:
            analysis = analyze(g, unreadable=[u for u in unreadable if _inside(u[0], paths[i])], extra=point_extra, **kw)
        except AnalysisError as e:
            not_analysed.append({"setting": setting, "reason": str(e)})
            continue
        where = _own_folder(paths[i], [p for j, ps in enumerate(paths) if j != i for p in ps])
        if write and where is not None:
            write_outputs(analysis, folder / where / (f"{ALTERNATIVES}/{alternative}" if analysis["departures"] else ""))
        points.append({"setting": setting, "folder": where, "analysis": analysis})
    if not points:
        raise AnalysisError("No grid point could be analysed: " + "; ".join(
            f"{_label(p['setting'])}: {p['reason']}" for p in not_analysed))
    declared = kw.get("declaration")
    if write and not points[0]["analysis"]["departures"] and not (declared and declared.conditions):
        # an analysis.json at the root would describe none of the points (but ab.conditions' root
        # files describe them all: analysis/conditions.py)
        set_aside_stale_outputs(folder, [], names=OUTPUT_NAMES)
    return _summary(points, not_analysed, list(swept), unreadable)


def _summary(points, not_analysed, swept, unreadable) -> dict:
    first = points[0]["analysis"]
    rows = []
    for point in points:
        a = point["analysis"]
        comparisons = {}
        for arm, c in a["comparisons"].items():
            comparisons[arm] = {
                "n_pairs": c["n_pairs"], "mean_diff": c["mean_diff"], "ci": c["t"]["ci"],
                "confidence_level": c["t"]["confidence_level"], "pvalue": c["t"]["pvalue"],
                "pvalue_holm_grid": None, "verdict": c["verdict"]["code"],
            }
        rows.append({"setting": point["setting"], "folder": point["folder"], "n_results": sum(
            arm["n"] for arm in a["arms"].values()), "comparisons": comparisons,
            "certificate": (a.get("certificate") or {}).get("line")})
    from harness.stats import holm

    family = [(row, arm) for row in rows for arm in row["comparisons"]]
    # a comparison without a p-value keeps None and is not counted in the family Holm adjusts over
    tested = [(row, arm) for row, arm in family if _is_p(row["comparisons"][arm]["pvalue"])]
    adjusted = holm([row["comparisons"][arm]["pvalue"] for row, arm in tested]) if tested else []
    for (row, arm), p in zip(tested, adjusted):
        row["comparisons"][arm]["pvalue_holm_grid"] = float(p)
    return {
        "schema": SCHEMA,
        "across_points": _across_points(points, swept, first),
        "declaration": first["declaration"],
        "departures": first["departures"],
        "experiment": first["experiment"],
        "factor": first["factor"],
        "metric": first["metric"],
        "unit": first["unit"],
        "baseline": first["baseline"],
        "alpha": first["alpha"],
        "swept": swept,
        "points": rows,
        "multiple_comparisons": {
            "method": "holm", "comparisons": len(family),
            "note": "pvalue_holm_grid: the paired t p-value Holm-adjusted across every (grid point, arm) "
                    "comparison of the grid; each point's own analysis.json keeps its plain A/B verdict",
        },
        "not_analysed": not_analysed,
        "unreadable": [{"path": str(p), "reason": str(r)} for p, r in unreadable],
    }


def _numeric_key(points, swept):
    """The swept key when exactly one is swept and every point's value of it is a number, else None."""
    if len(swept) != 1:
        return None
    key = swept[0]
    ok = all(isinstance(p["setting"].get(key), (int, float)) and not isinstance(p["setting"].get(key), bool) for p in points)
    return key if ok else None


def _across_points(points, swept, first) -> dict:
    """Per arm: does the effect depend on the grid value (Q, tau, slope), and the pooled estimate."""
    key = _numeric_key(points, swept)
    out = {"numeric_key": key, "arms": {}}
    arms = sorted({arm for p in points for arm in p["analysis"]["comparisons"]})
    for arm in arms:
        conditions = []
        for p in points:
            c = p["analysis"]["comparisons"].get(arm)
            if c is None or len(c["pairs"]) < 2:
                continue
            conditions.append({"label": _label(p["setting"]), "value": p["setting"].get(key) if key else None,
                               "a": [row[1] for row in c["pairs"]], "b": [row[2] for row in c["pairs"]]})
        block = across_conditions.across(conditions, direction=first.get("direction"), alpha=first["alpha"],
                                         numeric=key is not None, unit=first.get("unit") or "")
        if block is not None:
            block["sentence"] = across_conditions.sentence(block, arm=arm, baseline=first["baseline"],
                                                           unit=first.get("unit") or "", kind="grid points")
            out["arms"][arm] = block
    return out


def _is_p(p) -> bool:
    return p is not None and not math.isnan(p)


def _certificate_of(folder, paths, certificate, group):
    """The certificate in the point's own folder, else the sweep's; 'not certified' if another's."""
    own = _own_dir(paths)
    if own:
        candidate = folder / own / CERTIFICATE_NAME
        if candidate.is_file():
            try:
                return certificate_for(results_io.read_json(candidate), group)
            except (OSError, ValueError):
                pass
    return certificate_for(certificate, group) if certificate is not None else None


def _own_dir(paths) -> str:
    common = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    return common


def _own_folder(paths, others) -> str | None:
    """The deepest folder holding all of this point's files and none of the others'; None if none."""
    common = _own_dir(paths)
    while common:
        prefix = common + "/"
        if not any(p.startswith(prefix) for p in others) and ".." not in common.split("/"):
            # a folder named by a run (runs/seed=S/...) is not the point's own
            return common
        common = os.path.dirname(common)
    return None


def _inside(path, paths) -> bool:
    common = _own_dir(paths)
    return bool(common) and str(path).startswith(common + "/")


def _sort_key(value):
    if isinstance(value, bool) or value is None:
        return (1, str(value))
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value))


def _short(setting: dict, width: int = 40) -> str:
    """A figure's label for a setting: its values only, cut to width (a data= sweep sets six keys)."""
    text = _label(setting) if len(setting) == 1 else ", ".join(str(v) for v in setting.values())
    return text if len(text) <= width else text[:width - 1] + "…"


def _label(setting: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "(no setting differs)"


# -- output ---------------------------------------------------------------------------------------


def _lines(summary: dict) -> list[str]:
    unit = f" {summary['unit']}" if summary.get("unit") else ""
    head = (f"Grid around {summary['experiment']} (factor {summary['factor']}, metric {summary['metric']}): "
            f"{len(summary['points'])} settings of {', '.join(summary['swept'])}")
    rows = ["| setting | arm | pairs | effect (arm - baseline) | 95% CI | p | p, Holm over the grid | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for point in summary["points"]:
        for arm, c in point["comparisons"].items():
            lo, hi = c["ci"]
            rows.append(f"| {_label(point['setting'])} | {arm} vs {summary['baseline']} | {c['n_pairs']} | "
                        f"{_num(c['mean_diff'])}{unit} | [{_num(lo)}, {_num(hi)}] | {_p(c['pvalue'])} | "
                        f"{_p(c['pvalue_holm_grid'])} | {c['verdict']} |")
    notes = [summary["multiple_comparisons"]["note"] + "."]
    for point in summary["points"]:
        if point.get("folder"):
            notes.append(f"{_label(point['setting'])}: full analysis in {point['folder']}/")
        if point.get("certificate"):
            notes.append(f"{_label(point['setting'])}: {point['certificate']}")
    for p in summary["not_analysed"]:
        notes.append(f"NOT ANALYSED {_label(p['setting'])}: {p['reason']}")
    across = summary.get("across_points") or {"arms": {}}
    depends = ["", "Does the effect depend on the grid value?", ""] if across["arms"] else []
    for arm, block in across["arms"].items():
        depends += across_conditions.lines(block, arm=arm, baseline=summary["baseline"], unit=summary.get("unit") or "",
                                           key=across.get("numeric_key"))
    return [head, "", *rows, "", *notes, *depends]


def _num(x) -> str:
    if x is None:
        return "n/a"
    return "0" if abs(x) < 1e-9 else f"{x:+.3g}"  # a difference of equal values, up to float rounding


def _p(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def render_grid(summary: dict) -> None:
    print("\n".join(_lines(summary)))


def write_markdown(summary: dict, path) -> None:
    lines = _lines(summary)
    text = f"# {lines[0]}\n\n" + "\n".join(lines[2:]) + "\n"
    results_io.atomic_write(path, lambda f: f.write(text.encode()))


def write_figure(summary: dict, path) -> None:
    """The effect and its interval against the swept value, one line per arm."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = summary["points"]
    key = summary["swept"][0] if len(summary["swept"]) == 1 else None
    numeric = key is not None and all(isinstance(p["setting"][key], (int, float)) and not isinstance(p["setting"][key], bool)
                                      for p in points)
    xs = [p["setting"][key] for p in points] if numeric else list(range(len(points)))
    arms = sorted({arm for p in points for arm in p["comparisons"]})
    across = (summary.get("across_points") or {}).get("arms", {})
    fig, axes = plt.subplots(1, 1 + len(across), figsize=(6 + 4.5 * len(across), 3.6 + 0.2 * len(points)), dpi=100,
                             squeeze=False)
    ax = axes[0, 0]
    for forest_ax, (arm, block) in zip(axes[0, 1:], across.items()):  # one forest plot per arm
        figures.forest(forest_ax, [(_short(p["setting"]), p["comparisons"][arm]["mean_diff"], *p["comparisons"][arm]["ci"])
                                   for p in points if arm in p["comparisons"]], block,
                       title=f"{arm} vs {summary['baseline']}", unit=summary.get("unit") or "")
    for arm in arms:
        sel = [(x, p["comparisons"][arm]) for x, p in zip(xs, points) if arm in p["comparisons"]]
        y = [c["mean_diff"] for _, c in sel]
        err = [[c["mean_diff"] - c["ci"][0] for _, c in sel], [c["ci"][1] - c["mean_diff"] for _, c in sel]]
        ax.errorbar([x for x, _ in sel], y, yerr=err, marker="o", capsize=4, label=f"{arm} - {summary['baseline']}")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    _across_on_figure(ax, summary, xs, numeric)
    if numeric and min(xs) > 0 and max(xs) / min(xs) >= 10:
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(xs, [_short(p["setting"]) for p in points], rotation=20, ha="right", fontsize=7)
    ax.set_xlabel(key if numeric else "setting")
    unit = f" ({summary['unit']})" if summary.get("unit") else ""
    ax.set_ylabel(f"effect on {summary['metric']}{unit}")
    ax.set_title(f"{summary['experiment']}: effect of {summary['factor']} per grid point (t 95% CI)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    results_io.atomic_write(path, lambda f: f.write(buf.getvalue()))


def _across_on_figure(ax, summary, xs, numeric) -> None:
    """The pooled estimate (dotted) and, for a numeric key, the fitted slope (dashed), per arm."""
    import numpy as np

    for arm, block in (summary.get("across_points") or {}).get("arms", {}).items():
        if "pooled" not in block:
            continue
        h = block["heterogeneity"]
        ax.axhline(block["pooled"]["estimate"], linestyle=":", linewidth=1,
                   label=f"{arm}: average over these points {block['pooled']['estimate']:+.3g} (common effect p = {h['pvalue']:.2g}, tau {h['tau']:.2g})")
        slope = block.get("slope") or {}
        if numeric and "per_unit" in slope:
            grid = np.linspace(min(xs), max(xs), 50)
            ax.plot(grid, slope["intercept"] + slope["per_unit"] * grid, linestyle="--", linewidth=1,
                    label=f"{arm}: slope {slope['per_unit']:+.3g}/unit, p = {slope['pvalue']:.2g}")


__all__ = ["SCHEMA", "analyze_grid_dir", "render_grid", "write_figure", "write_markdown"]

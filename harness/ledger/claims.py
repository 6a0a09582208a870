"""An analysis's claims as ledger rows, for every kind of declared analysis.

One row per claim, whatever wrote the analysis:
    a plain A/B (harness.analysis): each arm against the baseline, its decision p and verdict;
    a grid (harness.grid): each grid point's own A/B claims (read from the point's analysis.json,
        the one the grid wrote), the point's setting in the claim and its folder as the row's folder;
    ab.conditions (harness.conditions): the declared primary claim, the average effect of each arm
        across the conditions (its t over the conditions' effects), once per arm; each condition's
        own verdict is a secondary reading and is not counted;
    a race (harness.race_analysis), once it settled: each configuration against the best one, kept
        in the set of the best or dropped, with the simultaneous interval (a race decides by
        intervals: no p-value, so the offline BH/BY view leaves these rows out).
A claim is identified by (folder, declaration, claim): re-analysing adds no row.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

# What identifies a declaration in the ledger: what it says, less what the ledger itself assigns
# (alpha_t and where it came from) and an alternative's departures (an alternative is flagged instead).
_NOT_IDENTITY = ("departures", "fdr", "alpha")


def declaration_hash(declaration) -> str:
    d = {k: v for k, v in declaration.to_dict().items() if k not in _NOT_IDENTITY}
    if not declaration.fdr:  # without stats.fdr, alpha is the declared one: part of what was said
        d["alpha"] = declaration.alpha
    else:
        d["fdr"] = {"method": declaration.fdr["method"], "level": declaration.fdr["level"]}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _folder(folder) -> str:
    return str(Path(folder).resolve())


def claim_rows(analysis: dict, folder, declaration) -> list[dict]:
    """The rows of ``analysis`` (analysis.json's or grid.json's content) written into ``folder``."""
    schema = str(analysis.get("schema", ""))
    if schema.startswith("harness.grid"):
        return _grid_rows(analysis, folder, declaration)
    if schema.startswith("harness.conditions"):
        return _conditions_rows(analysis, folder, declaration)
    if schema.startswith("harness.race"):
        return _race_rows(analysis, folder, declaration)
    return _ab_rows(analysis, folder, declaration)


def _row(analysis, folder, declaration, **values) -> dict:
    departures = list(analysis.get("departures") or [])
    groups = (analysis.get("identity") or {}).get("groups") or []
    code = ",".join(sorted({str((g.get("identity") or {}).get("code_version")) for g in groups})) or None
    return {"folder": _folder(folder), "experiment": str(analysis.get("experiment")),
            "declaration": declaration_hash(declaration), "code": code, "metric": analysis.get("metric"),
            "alpha": analysis.get("alpha"), "alternative": int(bool(departures)), "departures": "; ".join(departures),
            "test": None if departures else (declaration.fdr or {}).get("test"),
            **values, "claim": values["claim"] + (f" [{'; '.join(departures)}]" if departures else "")}


def _ab_rows(analysis: dict, folder, declaration, where: str = "") -> list[dict]:
    """One row per comparison with the baseline (a plain A/B, a sequential decision, a grid point).

    A comparison that stats.diverged=worst decided by its signed-rank test has that test's p (x the
    comparisons, as every decision p here), the direction that test found as its verdict (better or
    worse: what the screen says) and no effect or interval: the finished pairs' size can point the
    other way, and a diverged run has none. An arm decided on its divergences alone (too few finished
    pairs for a size, under not_compared) is such a claim too."""
    ranked = (analysis.get("diverged") or {}).get("tests") or {}
    k = (analysis.get("multiple_comparisons") or {}).get("comparisons") or 1
    claims = list((analysis.get("comparisons") or {}).items())
    claims += [(n["arm"], n) for n in analysis.get("not_compared") or [] if n["arm"] in ranked and n.get("verdict")]
    rows = []
    for arm, c in claims:
        zero = (c.get("intervals") or {}).get("zero") or {}
        p_raw = (c.get("t") or {}).get("pvalue")
        p_decision = ((c.get("decision") or {}).get("pvalues") or {}).get("zero")
        verdict, how = (c.get("verdict") or {}).get("code", "?"), ""
        effect, ci = c.get("mean_diff"), (zero.get("low"), zero.get("high"), zero.get("level"))
        if arm in ranked:
            p_raw, p_decision = ranked[arm]["pvalue"], min(1.0, ranked[arm]["pvalue"] * k)
            if verdict == "differs":  # the statistic's sign: + when the arm's signed ranks favour it
                verdict = "better" if ranked[arm]["statistic"] > 0 else "worse"
            effect, ci, how = None, (None, None, None), " (diverged runs counted as worst: signed ranks, no size)"
        rows.append(_row(
            analysis, folder, declaration, baseline=c.get("baseline"), arm=arm,
            claim=f"{arm} vs {c.get('baseline')} on {analysis.get('metric')}{where}{how}",
            effect=effect, ci_low=ci[0], ci_high=ci[1], ci_level=ci[2],
            p_raw=p_raw, p_decision=p_decision, verdict=verdict))
    return rows


def _grid_rows(summary: dict, root, declaration) -> list[dict]:
    from harness.results import read_json

    rows = []
    for point in summary.get("points") or []:
        if point.get("folder") is None:  # results spread over folders: no analysis of its own was written
            continue
        folder = Path(root) / point["folder"]
        written = folder / (summary.get("written_to") or "") / "analysis.json"
        if written.is_file():
            setting = ", ".join(f"{k}={v}" for k, v in point["setting"].items())
            rows += _ab_rows(read_json(written), folder, declaration, where=f" at {setting}")
    return rows


def _conditions_rows(summary: dict, root, declaration) -> list[dict]:
    rows = []
    for arm, block in (summary.get("across_conditions") or {}).items():
        pooled = block.get("pooled")
        if not pooled:  # fewer than two conditions analysed, or no noise: no claim was made
            continue
        low, high = pooled["ci"]
        verdict = "differs" if low > 0 or high < 0 else "not_shown"
        if verdict == "differs" and summary.get("direction") in ("max", "min"):
            verdict = "better" if (pooled["estimate"] > 0) == (summary["direction"] == "max") else "worse"
        rows.append(_row(
            summary, root, declaration, baseline=summary.get("baseline"), arm=arm,
            claim=f"{arm} vs {summary.get('baseline')} on {summary.get('metric')}, on average across "
                  f"{block.get('conditions')} conditions",
            effect=pooled["estimate"], ci_low=low, ci_high=high, ci_level=pooled.get("confidence_level"),
            p_raw=pooled.get("pvalue"), p_decision=pooled.get("pvalue"), verdict=verdict))
    return rows


def _race_rows(analysis: dict, root, declaration) -> list[dict]:
    race = analysis.get("race") or {}
    if not race.get("outcome"):  # a race not settled (or stopped) has claimed nothing yet
        return []
    design, leader = race.get("design") or {}, race.get("leader")
    kept = set(race.get("set") or [])
    view = {**analysis, "metric": design.get("metric"), "alpha": design.get("alpha")}
    rows = []
    for name, c in (race.get("configs") or {}).items():
        if name == leader:
            continue
        iv = c.get("interval") or [None, None]
        rows.append(_row(
            view, root, declaration, baseline=leader, arm=name,
            claim=f"{name} vs the best, {leader}, on {design.get('metric')} (race over {design.get('factor')})",
            effect=c.get("difference"), ci_low=iv[0], ci_high=iv[1], ci_level=1 - race.get("interval_error", 0),
            p_raw=None, p_decision=None, verdict="kept" if name in kept else "dropped"))
    return rows

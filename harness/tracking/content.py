"""What goes into wandb: exact losses from their bits, the comparison table, the analysis summary.

Pure functions over result and analysis dicts (harness/tracking/tracker.py logs them); no wandb import.
"""

from __future__ import annotations

import struct


def decode_loss_bits(bits: list[str]) -> list[float]:
    """The per-step losses from their float32 bit patterns (8 hex digits): exact, no rounding."""
    return [struct.unpack("<f", struct.pack("<I", int(h, 16)))[0] for h in bits]


# The comparison table's columns and where each value is in a comparison of analysis.json
# (harness/analysis/analyze.py); alternatives after the first keep older or hand-made analyses readable.
_COLUMNS = {
    "arm": ("arm",),
    "baseline": ("baseline",),
    "n": ("n_pairs", "n"),
    "mean_baseline": ("mean_baseline",),
    "mean_arm": ("mean_arm",),
    "mean_diff": ("mean_diff", "mean_difference"),
    "ci_low": ("t.ci.0", "ci_low"),  # the paired t interval
    "ci_high": ("t.ci.1", "ci_high"),
    "bootstrap_ci_low": ("bootstrap.ci.0",),
    "bootstrap_ci_high": ("bootstrap.ci.1",),
    "p_t": ("t.pvalue", "p_value"),
    "p_t_decision": ("decision.pvalues.zero",),  # raised to the exact floor, times the comparisons
    "p_wilcoxon": ("wilcoxon.pvalue",),
    "p_permutation": ("permutation.pvalue",),
    "p_minimum_effect": ("minimum_effect.pvalue",),
    "p_tost": ("tost.pvalue",),
    "d_z": ("d_z",),
    "verdict": ("verdict.code", "verdict"),
    "verdict_sentence": ("verdict.sentence",),
}
# key numbers that also go into the analysis run's summary, per comparison
_SUMMARY_COLUMNS = ("n", "mean_diff", "ci_low", "ci_high", "p_t", "p_t_decision", "verdict", "verdict_sentence")


def _get(obj, path: str):
    """obj at a dotted path of dict keys and list indices; None where it is missing."""
    for part in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, (list, tuple)) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def comparisons_of(analysis: dict) -> list[dict]:
    """The comparisons, in order: analysis.json keys them by arm; a list is accepted too."""
    comparisons = analysis.get("comparisons") or []
    if isinstance(comparisons, dict):
        comparisons = [dict(c, arm=c.get("arm", arm)) for arm, c in comparisons.items() if isinstance(c, dict)]
    return [c for c in comparisons if isinstance(c, dict)]


def comparison_table(comparisons: list[dict]) -> tuple[list[str], list[list]]:
    """Columns and rows of the comparison table; a column no comparison has is left out."""
    picks = {}
    for column, paths in _COLUMNS.items():
        path = next((p for p in paths if any(_is_cell(_get(c, p)) for c in comparisons)), None)
        if path is not None:
            picks[column] = path
    rows = [[_cell(_get(c, path)) for path in picks.values()] for c in comparisons]
    return list(picks), rows


def sequential_history(analysis: dict) -> list[dict]:
    """The looks of a sequential run as history rows, in order: sequential/seeds (the n of the
    look) and sequential/<arm>/{estimate,lower,upper,critical,decision}."""
    seq = analysis.get("sequential")
    rows: dict[int, dict] = {}
    for arm, a in ((seq or {}).get("arms") or {}).items() if isinstance(seq, dict) else ():
        for x in a.get("looks") or []:
            row = rows.setdefault(int(x["n"]), {"sequential/seeds": int(x["n"])})
            lo, hi = x["interval"]
            row.update({f"sequential/{arm}/estimate": x["estimate"], f"sequential/{arm}/lower": lo,
                        f"sequential/{arm}/upper": hi, f"sequential/{arm}/critical": x["critical"],
                        f"sequential/{arm}/decision": x["decision"]})
    return [rows[n] for n in sorted(rows)]


def analysis_summary(analysis: dict) -> dict:
    """The verdict(s) and key numbers; per comparison under '<arm>_vs_<baseline>/<column>'."""
    columns, rows = comparison_table(comparisons_of(analysis))
    summary = {k: analysis[k] for k in ("experiment", "factor", "metric", "unit", "direction", "baseline", "alpha")
               if _is_cell(analysis.get(k))}
    margin = _get(analysis, "margin.value") if isinstance(analysis.get("margin"), dict) else analysis.get("margin")
    if _is_cell(margin):
        summary["margin"] = margin
        if _is_cell(_get(analysis, "margin.source")):
            summary["margin_source"] = _get(analysis, "margin.source")  # given (declared) or auto (estimated)
    if analysis.get("departures"):  # an alternative analysis says so wherever it is shown
        summary["departures"] = "; ".join(analysis["departures"])
    verdicts = []
    for row in rows:
        cells = dict(zip(columns, row))
        label = f"{cells.get('arm', '?')}_vs_{cells.get('baseline', '?')}"
        summary.update({f"{label}/{c}": cells[c] for c in _SUMMARY_COLUMNS if cells.get(c) is not None})
        if cells.get("verdict") is not None:
            verdicts.append((cells.get("arm"), cells["verdict"], cells.get("verdict_sentence")))
    if len(verdicts) == 1:  # the common A/B case: the verdict at the top of the summary
        summary["verdict"] = verdicts[0][1]
        if verdicts[0][2]:
            summary["verdict_sentence"] = verdicts[0][2]
    elif verdicts:
        summary["verdict"] = "; ".join(f"{arm}: {code}" for arm, code, _ in verdicts)
    seq = analysis.get("sequential")
    if isinstance(seq, dict) and isinstance(seq.get("arms"), dict):  # the sequential decision is the verdict
        summary["fixed_n_reading"] = summary.pop("verdict", None)
        summary.pop("verdict_sentence", None)
        decisions = {arm: a.get("decision") for arm, a in seq["arms"].items()}
        summary["verdict"] = "; ".join(f"{arm}: {d}" for arm, d in decisions.items()) if len(decisions) > 1 \
            else next(iter(decisions.values()), None)
        if len(decisions) == 1:
            summary["verdict_sentence"] = next(iter(seq["arms"].values())).get("sentence")
        summary = {k: v for k, v in summary.items() if v is not None}
    if isinstance(analysis.get("excluded"), list):
        summary["excluded_runs"] = len(analysis["excluded"])
    cert = analysis.get("certificate")
    if isinstance(cert, dict):
        summary.update({f"certificate/{k}": v for k, v in cert.items() if _is_cell(v)})
    return summary


# -- small helpers -------------------------------------------------------------------------------


def _is_cell(v) -> bool:
    return isinstance(v, (str, int, float, bool))


def _cell(v):
    return v if _is_cell(v) else None


def _is_plain(v) -> bool:
    """Small JSON-like values only: the analysis run's config, not its arrays of per-seed values."""
    if _is_cell(v) or v is None:
        return True
    if isinstance(v, dict):
        return len(v) <= 50 and all(_is_plain(x) for x in v.values())
    if isinstance(v, list):
        return len(v) <= 50 and all(_is_cell(x) for x in v)
    return False


RACE_COLUMNS = ["config", "value", "status", "dropped_at_look", "dropped_at_seeds", "dropped_by", "leader",
                "minus_leader", "interval_low", "interval_high", "seeds", "mean"]


def race_table(analysis: dict) -> tuple[list, list]:
    """A race's analysis (harness/experiment/adaptive/race_report.py) as one row per configuration: when it was
    dropped and by whom, with its difference from that look's leader and the simultaneous interval;
    for a configuration still running at the end, against the final leader."""
    race = analysis.get("race") or {}
    drops = {d["config"]: (x, d) for x in race.get("looks") or [] for d in x.get("dropped") or []}
    rows = []
    for name, c in (race.get("configs") or {}).items():
        if name in drops:
            look, d = drops[name]
            est, half = look["versus_leader"].get(name, [None, None])
            at, by, leader = (look["look"], look["n"], d["by"]), d["by"], look.get("leader")
            low, high = (est - half, est + half) if est is not None else (None, None)
        else:
            at, by, leader, est = (None, None, None), None, race.get("leader"), c.get("difference")
            low, high = c.get("interval") or (None, None)
        rows.append([name, str(c.get("value")), c.get("status"), at[0], at[1], by, leader, est, low, high,
                     c.get("n"), c.get("mean")])
    return list(RACE_COLUMNS), rows


def race_summary(analysis: dict) -> dict:
    race = analysis.get("race") or {}
    return {f"race/{k}": race.get(k) for k in ("status", "outcome", "verdict", "winner", "leader", "seeds_spent",
                                                "seeds_all_to_max")} | {"race/set": ", ".join(race.get("set") or [])}


def conditions_table(summary: dict) -> tuple[list[str], list[list]]:
    """An experiment with ab.conditions (analysis/conditions.py): one row per (arm, condition), then
    the average and the random-effects estimate of each arm."""
    columns = ["arm", "condition", "overrides", "n", "effect", "ci_low", "ci_high", "p", "verdict"]
    rows = []
    for arm, block in (summary.get("across_conditions") or {}).items():
        for r in summary.get("conditions") or []:
            c = (r.get("comparisons") or {}).get(arm)
            if c is not None:
                rows.append([arm, r["name"], " ".join(r["overrides"]), c["n_pairs"], c["mean_diff"], *c["ci"],
                             c["pvalue"], c["verdict"]])
        p = block.get("pooled")
        if p:
            rows.append([arm, "average (t over conditions)", "", block["conditions"], p["estimate"], *p["ci"], p["pvalue"], ""])
            re = p["random_effects"]
            rows.append([arm, "random effects (REML, HK)", "", block["conditions"], re["estimate"], *re["ci"], re["pvalue"], ""])
    return columns, [[_cell(v) for v in row] for row in rows]


def conditions_summary(summary: dict) -> dict:
    """The claim across conditions in the run's summary: per arm the sentence and its numbers."""
    out = {"n_conditions": len(summary.get("conditions") or [])}  # "conditions" is the table
    for arm, block in (summary.get("across_conditions") or {}).items():
        p, h = block.get("pooled"), block.get("heterogeneity")
        if not p:
            out[f"across/{arm}/not_computed"] = block.get("not_computed", "")
            continue
        out.update({f"across/{arm}/{k}": v for k, v in {
            "sentence": block["sentence"], "estimate": p["estimate"], "ci_low": p["ci"][0], "ci_high": p["ci"][1],
            "pvalue": p["pvalue"], "random_effects": p["random_effects"]["estimate"], "tau": h["tau"],
            "tau_ci_low": h["tau_ci"][0], "tau_ci_high": h["tau_ci"][1], "i2": h["i2"],
            "heterogeneity_pvalue": h["pvalue"], "prediction_low": p["prediction_interval"][0],
            "prediction_high": p["prediction_interval"][1], "better_on": block["better_on"]["better"],
            "worse_on": block["better_on"]["worse"]}.items()})
    return out

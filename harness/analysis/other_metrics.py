"""The other metrics with a declared direction, each compared arm against the baseline (paired t,
Holm over every (metric, arm) comparison): reported beside the primary metric, never decided by a margin.

Pure functions of result dicts; the statistics come from harness.stats.
"""

from __future__ import annotations

import numpy as np

from harness import stats
from harness.analysis.curves import _finite_number, all_finite_numbers


def other_metrics(usable, compared, baseline, metric, declared, alpha) -> dict:
    """Each other metric with a declared direction, each arm against the baseline (paired t).

    Holm's adjustment runs over every (metric, arm) comparison here: they are reported, not
    decided by a margin, so the step-down procedure's extra power costs no disagreement.
    """
    runs = {key: run["result"] for key, run in usable.items()}
    present = sorted(
        name for name in declared
        if name != metric and any(_finite_number((r.get("metrics") or {}).get(name)) for r in runs.values())
    )
    rows = []
    for name in present:
        for arm, seeds in compared.items():
            a = [(runs[(s, baseline)].get("metrics") or {}).get(name) for s in seeds]
            b = [(runs[(s, arm)].get("metrics") or {}).get(name) for s in seeds]
            if not (all_finite_numbers(a) and all_finite_numbers(b)):  # the usual case keeps every pair
                pairs = [(x, y) for x, y in zip(a, b) if _finite_number(x) and _finite_number(y)]
                a, b = [x for x, _ in pairs], [y for _, y in pairs]
            if len(a) < stats.MIN_PAIRS:
                continue
            a, b = np.array(a, dtype=float), np.array(b, dtype=float)
            rows.append((name, arm, stats.paired_t(a, b, confidence_level=1 - alpha)))
    adjusted = stats.holm([t.pvalue for _, _, t in rows]) if rows else []
    by_arm: dict[str, dict] = {}
    for (name, arm, t), p_holm in zip(rows, adjusted):
        low, high = t.confidence_interval()
        higher = declared[name] == "max"
        if p_holm < alpha and t.estimate != 0:
            word = "better" if (t.estimate > 0) == higher else "worse"
        else:
            word = "no clear difference"
        by_arm.setdefault(arm, {})[name] = {
            "direction": declared[name], "n_pairs": int(t.df) + 1, "mean_diff": t.estimate,
            "ci": [low, high], "confidence_level": t.confidence_level, "pvalue": t.pvalue,
            "pvalue_holm": float(p_holm), "reading": word,
        }
    return {"metrics": present, "by_arm": by_arm}

"""The paired trend over a numeric factor: when every arm's factor value is a distinct number and
there are 3 or more arms, the per-seed slope of the metric on the factor value (harness.stats.meta.trend),
or why there is none."""

from __future__ import annotations

import numpy as np

from harness.analysis.curves import _finite_number, all_finite_numbers


def _doses(usable, arms) -> list:
    """Each arm's factor value when it is one finite number in all its runs, else None. Arms that set
    a whole subtree ({lr: 0.05}) have mappings here: compared, never hashed."""
    found = {}
    for (seed, arm), run in usable.items():
        found.setdefault(arm, []).append(run["result"].get("factor_value"))
    values = []
    for arm in arms:
        vs = found.get(arm, [])
        # all_finite_numbers: _finite_number of each, at C speed; count: each == the first (or is it)
        one = (bool(vs) and (all_finite_numbers(vs) or all(_finite_number(v) for v in vs))
               and vs.count(vs[0]) == len(vs))
        values.append(vs[0] if one else None)
    return values


def _seeds_of_every_arm(usable, arms) -> list:
    seeds = set.intersection(*[{s for (s, a) in usable if a == arm} for arm in arms]) if arms else set()
    return sorted(seeds, key=lambda s: (isinstance(s, str), s))


def dose_trend_why(usable, arms) -> str | None:
    """Why there is no dose trend (analysis.json's ``dose_trend_why``), or None when there is one."""
    values = _doses(usable, arms)
    if not all(v is not None for v in values):
        odd = ", ".join(a for a, v in zip(arms, values) if v is None)
        return f"the arms' factor values are not numbers (arm {odd}): there is no dose to regress on"
    if len(arms) < 3:
        return f"{len(arms)} arms: a trend needs 3 or more arms whose factor values are numbers"
    if len(set(values)) < len(values):
        return "two arms have the same factor value: the doses are not distinct"
    if len(_seeds_of_every_arm(usable, arms)) < 2:
        return "fewer than 2 seeds ran every arm"
    return None


def dose_trend(usable, arms, alpha) -> dict | None:
    """The paired trend test when every arm's factor value is a distinct number and there are >= 3:
    per-seed slope of the metric on the factor value, t across the seeds every arm ran,
    and whether the response departs from a line (harness.stats.meta.trend). None otherwise."""
    from harness.stats.meta import trend

    if dose_trend_why(usable, arms) is not None:
        return None
    values = _doses(usable, arms)
    seeds = _seeds_of_every_arm(usable, arms)
    table = np.array([[usable[(s, arm)]["value"] for arm in arms] for s in seeds], dtype=float)
    r = trend.dose_trend(table, values, confidence_level=1 - alpha)
    low, high = r.confidence_interval()
    return {
        "arms": list(arms), "doses": [float(v) for v in values], "seeds": len(seeds),
        "slope_per_unit": r.slope, "ci": [low, high], "confidence_level": r.confidence_level,
        "standard_error": r.standard_error, "statistic": r.statistic, "pvalue": r.pvalue, "df": r.df,
        "trend": bool(r.pvalue < alpha),
        "linearity": {"statistic": r.linearity_statistic, "df": list(r.linearity_df), "pvalue": r.linearity_pvalue,
                      "departs": None if r.linearity_pvalue is None else bool(r.linearity_pvalue < alpha),
                      "curvature": r.curvature},
        "intercept": float(np.mean(table.mean(axis=1) - r.slope * np.mean(values))),
        "method": r.method,
    }

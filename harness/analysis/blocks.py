"""The blocks of analysis.json: one arm's summary, the noise floor, one comparison, made JSON-ready.

Pure functions of the statistics' result objects (harness.stats) and the runs that count; which
runs count, and whether they are paired, is decided in analyze.py before these are built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from harness import stats
from harness.analysis.curves import all_finite_numbers
from harness.analysis.selection import _seed_sorted
from harness.stats.sign_flip import sign_flip_method


# -- output blocks ------------------------------------------------------------------------------


def _arm_summary(arm, runs, factor_value) -> dict:
    seeds = _seed_sorted(runs)
    v = np.array([runs[s]["value"] for s in seeds])
    return {
        "factor_value": factor_value,
        "n": len(v),
        "mean": float(v.mean()) if len(v) else None,
        "std": stats.seed_std(v) if len(v) >= 2 else None,  # on the differences' rounding: 0 when constant
        "min": float(v.min()) if len(v) else None,
        "max": float(v.max()) if len(v) else None,
        "ci": list(stats.mean_interval(v)) if len(v) >= 2 else None,  # t interval of the arm's mean
        "values": [float(x) for x in v],
        "seeds": seeds,
    }


def _noise_floor_block(values, margin, n_test, metric) -> dict:
    pooled_from = [v for v in values.values() if len(v) >= 2]
    floor = None
    if n_test is not None:
        floor = stats.test_set_floor(float(np.mean(np.concatenate(list(values.values())))), n_test)
    return {
        "seed_std": {arm: stats.seed_std(v) if len(v) >= 2 else None for arm, v in values.items()},
        # none when no arm has 2 finished runs (an arm decided on its diverged runs alone)
        "pooled_seed_std": stats.pooled_seed_std(pooled_from) if pooled_from else None,
        "test_set_floor": floor,
        "n_test": n_test,
        "about": (
            "seed_std: each arm's std across seeds (ddof=1); pooled_seed_std: "
            "sqrt(sum((n_i-1) s_i^2) / sum(n_i-1)) over the arms"
            + (f" (the margin: {margin.source})" if margin.source == "auto" else "")
            + ("; test_set_floor: binomial sqrt(p(1-p)/n_test) in points, how much "
               f"{metric} moves from the finite test set alone" if floor is not None else "")
        ),
    }


def _comparison_block(c: stats.PairedComparison, seeds, by_arm, baseline, arm, other_metrics) -> dict:
    t_low, t_high = c.t.confidence_interval()
    finals = [
        ((by_arm[baseline][s]["result"].get("fingerprints") or {}).get("final"),
         (by_arm[arm][s]["result"].get("fingerprints") or {}).get("final"))
        for s in seeds
    ]
    if all(fa is not None and fb is not None for fa, fb in finals):
        weights_identical = all(fa == fb for fa, fb in finals)
    else:
        weights_identical = None
    paired = set(seeds)
    missing = [s for s in _seed_sorted(by_arm[baseline]) if s not in paired]
    return {
        "arm": arm,
        "baseline": baseline,
        "n_pairs": c.n,
        "seeds": list(seeds),
        "missing_seeds": missing,
        "mean_baseline": c.mean_a,
        "mean_arm": c.mean_b,
        "mean_diff": c.mean_diff,
        "identical": c.identical,
        "exact": c.exact,
        "n_moved": c.n_moved,
        "final_weights_identical": weights_identical,
        "noise": c.noise.to_dict(),
        "t": {
            "statistic": c.t.statistic, "pvalue": c.t.pvalue, "df": c.t.df,
            "confidence_level": c.t.confidence_level, "ci": [t_low, t_high], "note": c.t.note,
        },
        "bootstrap": {
            "ci": [c.bootstrap.low, c.bootstrap.high], "confidence_level": c.bootstrap.confidence_level,
            "method": c.bootstrap.method, "n_resamples": c.bootstrap.n_resamples,
            "seed": c.bootstrap.seed, "note": c.bootstrap.note,
        },
        "wilcoxon": c.wilcoxon.to_dict(),
        "permutation": c.permutation.to_dict(),
        "welch": {
            "statistic": c.welch.statistic, "pvalue": c.welch.pvalue, "df": c.welch.df,
            "ci": list(c.welch.confidence_interval()), "note": c.welch.note,
        },
        "d_z": c.d_z,
        "minimum_effect": c.minimum_effect.to_dict(),
        "tost": c.tost.to_dict(),
        "decision": {
            "pvalues": c.p_decision,
            "sign_flip_floors": c.floors,
            "sign_flip_p": c.sign_flip_p,
            "sign_flip_method": sign_flip_method(c.n),  # exact, upper bound (grid) or normal limit
            "n_comparisons": c.n_comparisons,
            "about": "what the verdict compares with alpha: max(raw p, the exact sign-flip test's p of the "
                     "same test on the same differences) x comparisons, and for claims about an estimated margin / "
                     "its share of alpha",
        },
        "intervals": {name: iv.to_dict() for name, iv in c.intervals.items()},
        "verdict": c.verdict.to_dict(),
        "test_set": _test_set_block(c),
        "seeds_needed": c.seeds_needed.to_dict(),
        "other_metrics": other_metrics,
        "pairs": [[s, by_arm[baseline][s]["value"], by_arm[arm][s]["value"]] for s in seeds],
    }


def _test_set_block(c: stats.PairedComparison) -> dict | None:
    if c.test_set is None:
        return None
    low, high = c.test_set.confidence_interval(c.intervals["zero"].level)
    return dict(c.test_set.to_dict(), distribution_ci=[low, high], level=c.intervals["zero"].level)

def _plain(obj):
    """JSON-ready: numpy scalars to Python numbers, tuples to lists, NaN and infinities to None."""
    if isinstance(obj, Mapping):  # also OmegaConf's DictConfig in ``extra``
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list) and all_finite_numbers(obj):
        return list(obj)  # the usual list of Python numbers (curves, pairs); bools and numpy scalars go below
    if isinstance(obj, (Sequence, np.ndarray)) and not isinstance(obj, (str, bytes)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj

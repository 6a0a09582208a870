"""The claims across conditions that hold their error rate when each condition's variance is
estimated from a few seeds.

random_effects.py's random-effects model (REML, Hartung-Knapp) treats each condition's squared standard
error as known. With 3-10 seeds per condition it is an estimate on 2-9 df, and scripts/bench_stats.py
measures what that costs: the HK test of "no average effect" rejects up to ~11% at alpha 5% (3 seeds,
5-10 conditions, tau = 0, unequal noise), and Cochran's Q rejects a constant effect up to ~57%.
So the harness decides with tests that carry the variances' uncertainty, and reports the
meta-analytic numbers beside them:

- the average effect: a one-sample t test of the K per-condition effects (each condition is one
  observation; exact when the conditions' effects are normal with a common spread, whatever tau);
- the slope against a numeric setting: ordinary least squares of the K effects on the setting, t on
  K - 2 df (the same idea);
- a common effect (heterogeneity): the Alexander-Govern test (Alexander & Govern 1994; scipy) of
  equal means of the per-seed paired differences across conditions, which allows each condition its
  own seed-to-seed variance and uses its degrees of freedom.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._core import one_sample_t


def average_rows(effects, confidence_level: float = 0.95) -> dict:
    """t test and interval of the mean of the K effects, per row (rows = meta-analyses)."""
    from scipy import stats as sps

    y = np.atleast_2d(np.asarray(effects, dtype=float))
    k = y.shape[1]
    if k < 2:
        raise ValueError(f"an average over conditions needs at least 2 conditions, got {k}.")
    mean = y.mean(axis=1)
    se = y.std(axis=1, ddof=1) / np.sqrt(k)
    statistic, pvalue = one_sample_t(y)
    crit = float(sps.t.ppf(0.5 + confidence_level / 2, k - 1))
    # a new condition run the same way: its effect differs from the mean by sd * sqrt(1 + 1/K), t on K-1 df
    # (exact for its measured effect; for its true effect, which lacks the seed noise, conservative)
    spread = y.std(axis=1, ddof=1) * np.sqrt(1 + 1 / k)
    return {"mean": mean, "se": se, "df": k - 1, "t": np.atleast_1d(statistic), "pvalue": np.atleast_1d(pvalue),
            "low": mean - crit * se, "high": mean + crit * se,
            "prediction": (mean - crit * spread, mean + crit * spread)}


def slope_rows(effects, values, confidence_level: float = 0.95) -> dict:
    """Least-squares slope of the K effects on a numeric setting, t on K - 2 df, per row."""
    from scipy import stats as sps

    y = np.atleast_2d(np.asarray(effects, dtype=float))
    x = np.asarray(values, dtype=float)
    k = y.shape[1]
    if x.shape != (k,) or len(np.unique(x)) < 3:
        raise ValueError(f"a slope across conditions needs one value per condition and at least 3 distinct values; "
                         f"got {list(x)}.")
    xc = x - x.mean()
    slope = (y - y.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)
    intercept = y.mean(axis=1) - slope * x.mean()
    resid = y - intercept[:, None] - slope[:, None] * x
    se = np.sqrt((resid**2).sum(axis=1) / (k - 2) / (xc @ xc))
    live = se > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(live, slope / np.where(live, se, 1.0), np.where(slope == 0, 0.0, np.copysign(np.inf, slope)))
    pvalue = np.where(live, 2 * sps.t.sf(np.abs(t), k - 2), np.where(slope == 0, 1.0, 0.0))
    half = float(sps.t.ppf(0.5 + confidence_level / 2, k - 2)) * se
    return {"slope": slope, "intercept": intercept, "se": se, "df": k - 2, "t": t, "pvalue": pvalue,
            "low": slope - half, "high": slope + half}


def _spread(n: int, variance: float) -> np.ndarray:
    """n values with mean 0 and sample variance ``variance`` (-c, +c, then zeros)."""
    e = np.zeros(n)
    e[:2] = [-1.0, 1.0]
    return e * np.sqrt(variance * (n - 1) / 2)


# Where the Alexander-Govern test's false-positive rate is shown to be at most alpha
# (scripts/bench_stats.py, section 7, at alpha 0.05, K = 2 to 10 conditions): from 10 seeds a condition,
# or from 5 with at most 3 conditions. With 5 seeds and 10 conditions it rejects a common effect in
# 5.9% of experiments (20,000: SE 0.17%), with 5 and 5 in 5.4%, with 3 seeds up to 7.3%.
COMMON_EFFECT_SEEDS = ((10, 10), (5, 3))  # (seeds a condition at least, conditions at most)


def common_effect_decided(seeds: int, conditions: int) -> bool:
    """Whether the common-effect test decides at this size (else its p-value is information only)."""
    return any(seeds >= n and conditions <= k for n, k in COMMON_EFFECT_SEEDS)


def common_effect_pvalue(differences) -> float:
    """Alexander-Govern p-value of 'every condition has the same mean paired difference'.

    ``differences``: one array per condition (its per-seed b - a), or one 3-D array
    (experiments, conditions, seeds) for the bench, which gets one p per experiment."""
    from scipy import stats as sps

    if isinstance(differences, np.ndarray) and differences.ndim == 3:
        return sps.alexandergovern(*[differences[:, k, :] for k in range(differences.shape[1])], axis=1).pvalue
    groups = [np.asarray(d, dtype=float) for d in differences]
    if len(groups) < 2 or any(len(g) < 2 for g in groups):
        raise ValueError("the test of a common effect needs at least 2 conditions with at least 2 seeds each.")
    if all(np.ptp(g) == 0 for g in groups):  # no seed-to-seed variation anywhere: the effects are exact
        return 1.0 if len({float(g[0]) for g in groups}) == 1 else 0.0
    if any(np.ptp(g) == 0 for g in groups):
        # a condition whose differences do not vary has no variance to weigh by: give it the smallest other one
        floor = min(float(g.var(ddof=1)) for g in groups if np.ptp(g) > 0)
        groups = [g if np.ptp(g) > 0 else g + _spread(len(g), floor) for g in groups]
    with warnings.catch_warnings():  # scipy warns on near-identical groups; the p-value is still right (1)
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(sps.alexandergovern(*groups).pvalue)


__all__ = ["COMMON_EFFECT_SEEDS", "average_rows", "common_effect_decided", "common_effect_pvalue", "slope_rows"]

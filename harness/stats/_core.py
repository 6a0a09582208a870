"""The bottom layer of harness.stats: constants, the paired input check, rounded differences,
the vectorised one-sample t test. Everything else in the package imports from here, never upward."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import NamedTuple

import numpy as np

MIN_PAIRS = 3  # with 2 pairs the sd of the differences has 1 degree of freedom: too fragile to use
POWER = 0.8  # the power "seeds needed" aims for
# Differences are rounded to this many significant digits of the inputs' magnitude: accuracies
# are multiples of 100/n_test, and b - a carries ~1e-14 of rounding noise that would otherwise
# make equal differences look unequal (breaking ties and hiding the sd = 0 case).
SIGNIFICANT_DIGITS = 12
# Above this many pairs the resampling tests use the normal limit of their null distribution:
# at that size it is exact to the digits we print, and enumerating or sampling sign flips of
# thousands of pairs would take seconds per comparison (scripts/bench_analyze.py).
LARGE_N = 1000
# An interval end this close to 0, relative to the interval's size, is 0 up to the arithmetic that
# found it (the exact test's bound is bisected to within 1e-9 of the differences' scale): said as 0.
ZERO_END = 1e-6


class ConfidenceInterval(NamedTuple):
    low: float
    high: float


# -- inputs -------------------------------------------------------------------------------------


def _pairs(a, b) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(
            f"a and b must be 1-D arrays of equal length (one value per seed, paired by position); "
            f"got shapes {a.shape} and {b.shape}."
        )
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite: drop runs with a NaN or infinite metric before comparing.")
    if len(a) < MIN_PAIRS:
        raise ValueError(
            f"need at least {MIN_PAIRS} complete pairs to estimate seed noise, got {len(a)}."
        )
    return a, b


def _decimals(a: np.ndarray, b: np.ndarray) -> int | None:
    scale = float(max(np.abs(a).max(), np.abs(b).max()))
    return None if scale == 0.0 else SIGNIFICANT_DIGITS - math.ceil(math.log10(scale))


def differences(a, b) -> np.ndarray:
    """``b - a`` per pair, with float rounding noise removed (see SIGNIFICANT_DIGITS)."""
    a, b = _pairs(a, b)
    decimals = _decimals(a, b)
    d = b - a
    if decimals is None:
        return d
    return np.round(d, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def rounded_differences(d, scale: float) -> np.ndarray:
    """Differences ``d`` rounded as differences() rounds them, given the inputs' magnitude ``scale``
    (the largest |value| compared); ±inf stay (a diverged run's pair)."""
    d = np.asarray(d, dtype=float)
    if not scale or not math.isfinite(scale):
        return d
    return np.round(d, SIGNIFICANT_DIGITS - math.ceil(math.log10(abs(scale)))) + 0.0


def seed_std(x, decimals: int | None | str = "auto") -> float:
    """Std (ddof=1) of one arm's values across seeds, on the values rounded as the differences are.

    Deviations from the first seed's value are rounded to ``decimals`` (default: SIGNIFICANT_DIGITS
    of the values' own magnitude; pass ``_decimals(a, b)`` to share the differences' rounding), so
    an arm whose every seed gave the same value has a std of exactly 0: np.std of seven equal
    floats is 1e-14 whenever their mean rounds, and an auto margin of 1e-14 is not 0.
    """
    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        raise ValueError("a seed std needs at least 2 values.")
    if isinstance(decimals, str):
        decimals = _decimals(x, x)
    if decimals is None:  # every value is 0
        return 0.0
    deviations = np.round(x - x[0], decimals) + 0.0
    if np.ptp(deviations) == 0:
        return 0.0
    return float(deviations.std(ddof=1))


def exact_std(values, axis=None):
    """Std (ddof=1) along ``axis``, exactly 0 where every value is the same.

    np.std of equal floats is 1e-15 whenever their mean rounds (62.2222... five times gives 7.9e-15),
    and a printed "std 7.9e-15" or a ratio "1.2e-15x" reads as a measured spread. NaN stays NaN.
    """
    x = np.asarray(values, dtype=float)
    with np.errstate(all="ignore"):
        std = np.asarray(x.std(axis=axis, ddof=1))
        std[np.asarray(np.ptp(x, axis=axis)) == 0] = 0.0
    return float(std) if std.ndim == 0 else std


def difference_units(a, b) -> np.ndarray:
    """The rounded differences as integers (units of 10^-decimals): sums of them are exact.

    Sign-flip tests compare sums over sign patterns; in floats two patterns that tie exactly can
    differ by 1e-14 and be counted on different sides of the observed sum. In int64 they tie:
    |d| <= 2 * scale gives at most 2e12 units per pair, so sums over LARGE_N pairs stay < 2^53.
    """
    a, b = _pairs(a, b)
    decimals = _decimals(a, b)
    if decimals is None:
        return np.zeros(len(a), dtype=np.int64)
    return np.round((b - a) * 10.0**decimals).astype(np.int64)


class Result:
    """Mixin for the result dataclasses: ``to_dict()`` gives plain Python (JSON-ready) values."""

    def to_dict(self) -> dict:
        return _plain({f.name: getattr(self, f.name) for f in fields(self)})


def _plain(obj):
    if hasattr(obj, "to_dict") and not isinstance(obj, type):
        return obj.to_dict()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple, e.g. ConfidenceInterval
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _is_constant(x: np.ndarray) -> bool:
    return bool(np.ptp(x) == 0)


def _scalar(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


def _exact_pvalue(diff, alternative: str):
    """p-value when there is no noise: the data sit exactly at, above or below the null value."""
    diff = np.asarray(diff, dtype=float)
    if alternative == "two-sided":
        return np.where(diff == 0, 1.0, 0.0)
    if alternative == "greater":
        return np.where(diff > 0, 0.0, 1.0)
    return np.where(diff < 0, 0.0, 1.0)


def _exact_statistic(diff):
    diff = np.asarray(diff, dtype=float)
    return np.where(diff == 0, 0.0, np.copysign(np.inf, diff))


def one_sample_t(d, popmean=0.0, alternative: str = "two-sided"):
    """(statistic, pvalue) of ``ttest_1samp`` along the last axis, also for rows that do not vary.

    ``d`` is 1-D (one experiment) or 2-D (rows = experiments); ``popmean`` a scalar or one value
    per row. Rows with zero spread are decided exactly instead of giving NaN and a warning.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    d = np.asarray(d, dtype=float)
    rows = np.atleast_2d(d)
    mu = np.broadcast_to(np.asarray(popmean, dtype=float), rows.shape[:1])
    statistic = np.empty(len(rows))
    pvalue = np.empty(len(rows))
    flat = np.ptp(rows, axis=1) == 0
    live = ~flat
    if live.any():
        res = sps.ttest_1samp(rows[live], mu[live][:, None], axis=1, alternative=alternative)
        statistic[live] = res.statistic
        pvalue[live] = res.pvalue
    if flat.any():
        gap = rows[flat, 0] - mu[flat]
        statistic[flat] = _exact_statistic(gap)
        pvalue[flat] = _exact_pvalue(gap, alternative)
    if d.ndim == 1:
        return float(statistic[0]), float(pvalue[0])
    return statistic, pvalue


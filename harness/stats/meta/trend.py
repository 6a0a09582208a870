"""Dose trends: a numeric factor at three or more values, every value run on the same seeds.

The paired trend test works within each seed, as the A/B does: per seed, the least-squares slope of
the metric on the factor value; then a one-sample t test of those slopes across seeds (the
"summary-measure" approach to repeated measures, Matthews et al. 1990, BMJ). The seed's own level
cancels inside its slope, as it cancels in a paired difference, and the slopes are independent
across seeds, so the t test needs no model of the correlation between doses. The estimate is the
change in the metric per unit of the factor, with its t interval.

Whether the response departs from a line: per seed, the components of the response on the
orthonormal polynomial contrasts of degree 2 and up (over the doses as run); with 3 doses that is
one curvature contrast tested by a t test across seeds, with more a Hotelling T^2 test of all of
them together (exact F on (q, n - q) df under normal seed-to-seed variation; needs n > q seeds).

Functions take ``values`` shaped (seeds, doses), or (experiments, seeds, doses) for the bench.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._core import ConfidenceInterval, Result, one_sample_t


def _check(values, doses):
    y = np.asarray(values, dtype=float)
    x = np.asarray(doses, dtype=float)
    if y.ndim not in (2, 3) or x.ndim != 1 or y.shape[-1] != len(x):
        raise ValueError(f"values must be (seeds, doses) or (experiments, seeds, doses) with one column per dose "
                         f"({len(np.atleast_1d(x))} doses); got shape {y.shape}.")
    if len(np.unique(x)) < 3:
        raise ValueError(f"a dose trend needs at least 3 distinct numeric factor values; got {sorted(set(x.tolist()))}.")
    if y.shape[-2] < 2 or not np.isfinite(y).all() or not np.isfinite(x).all():
        raise ValueError("a dose trend needs finite values for at least 2 seeds at every dose.")
    return y, x


def per_seed_slopes(values, doses) -> np.ndarray:
    """The least-squares slope of the metric on the dose, one per seed (last axis: doses)."""
    y, x = _check(values, doses)
    xc = x - x.mean()
    return (y - y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)


def _higher_contrasts(x: np.ndarray) -> np.ndarray:
    """Orthonormal polynomial contrasts of degree 2 .. m-1 over the doses (m x (m-2))."""
    scaled = (x - x.mean()) / (np.ptp(x) or 1.0)
    q, _ = np.linalg.qr(np.vander(scaled, len(x), increasing=True))
    return q[:, 2:]


def linearity_rows(values, doses):
    """(statistic F, df1, df2, pvalue) per experiment of 'the mean response is a line in the dose'."""
    from scipy import stats as sps

    y, x = _check(values, doses)
    rows = y if y.ndim == 3 else y[None]
    z = rows @ _higher_contrasts(x)  # (experiments, seeds, q)
    n, q = z.shape[1], z.shape[2]
    if n <= q:
        nan = np.full(len(rows), np.nan)
        return nan, q, n - q, nan
    mean = z.mean(axis=1)
    centred = z - mean[:, None, :]
    cov = np.einsum("esi,esj->eij", centred, centred) / (n - 1)
    scale = np.maximum(np.abs(cov).max(axis=(1, 2)), 1e-300)
    exact = np.abs(cov).max(axis=(1, 2)) <= 1e-24 * np.maximum(np.abs(mean).max(axis=1) ** 2, 1e-300)
    cov = cov + np.eye(q) * scale[:, None, None] * 1e-12  # seeds that agree exactly: no singular matrix
    t2 = n * np.einsum("ei,ei->e", mean, np.linalg.solve(cov, mean[..., None])[..., 0])
    f = t2 * (n - q) / (q * (n - 1))
    p = np.where(exact, np.where(np.abs(mean).max(axis=1) == 0, 1.0, 0.0), sps.f.sf(f, q, n - q))
    return f, q, n - q, p


@dataclass(frozen=True)
class TrendResult(Result):
    """A paired dose trend: per-seed slopes, t across seeds; and the test of departure from a line."""

    slope: float  # mean per-seed slope: change in the metric per unit of the factor
    standard_error: float
    statistic: float
    pvalue: float
    df: int
    seeds: int
    doses: tuple
    confidence_level: float
    linearity_statistic: float | None  # F (t^2 with 3 doses); None when there are too few seeds
    linearity_df: tuple
    linearity_pvalue: float | None
    curvature: float | None  # with 3 doses: mean per-seed second difference per unit^2 (the quadratic term x 2)
    method: str = ("per-seed least-squares slope, one-sample t across seeds; departure from a line: per-seed "
                   "polynomial contrasts of degree >= 2, Hotelling T^2 (t with 3 doses)")

    def confidence_interval(self) -> ConfidenceInterval:
        from scipy import stats as sps

        half = float(sps.t.ppf(0.5 + self.confidence_level / 2, self.df)) * self.standard_error
        return ConfidenceInterval(self.slope - half, self.slope + half)


def dose_trend(values, doses, *, confidence_level: float = 0.95) -> TrendResult:
    """The paired trend test of ``values`` (seeds x doses, one column per factor value)."""
    y, x = _check(values, doses)
    if y.ndim != 2:
        raise ValueError("dose_trend takes one experiment (seeds x doses); use per_seed_slopes for many.")
    order = np.argsort(x)
    y, x = y[:, order], x[order]
    slopes = per_seed_slopes(y, x)
    n = len(slopes)
    statistic, pvalue = one_sample_t(slopes)
    f, df1, df2, p_lin = linearity_rows(y, x)
    curvature = None
    if len(x) == 3:  # the second divided difference, per seed, then averaged: 2 x the quadratic coefficient
        d1 = (y[:, 1] - y[:, 0]) / (x[1] - x[0])
        d2 = (y[:, 2] - y[:, 1]) / (x[2] - x[1])
        curvature = float(np.mean(2 * (d2 - d1) / (x[2] - x[0])))
    return TrendResult(
        slope=float(slopes.mean()), standard_error=float(slopes.std(ddof=1) / math.sqrt(n)),
        statistic=float(statistic), pvalue=float(pvalue), df=n - 1, seeds=n, doses=tuple(float(v) for v in x),
        confidence_level=confidence_level,
        linearity_statistic=None if not np.isfinite(f[0]) else float(f[0]), linearity_df=(int(df1), int(df2)),
        linearity_pvalue=None if not np.isfinite(p_lin[0]) else float(p_lin[0]), curvature=curvature,
    )


__all__ = ["TrendResult", "dose_trend", "linearity_rows", "per_seed_slopes"]

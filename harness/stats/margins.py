"""The margin (the smallest difference that matters) and the tests about it: minimum-effect
test (beyond the margin), TOST (within it), and Holm's adjustment across comparisons."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._core import _scalar, one_sample_t


def pooled_seed_std(groups: Sequence) -> float:
    """Pooled seed-to-seed std over arms: sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1))."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    if not groups:
        raise ValueError("the pooled seed std needs an arm with at least 2 seeds.")
    dof = sum(len(g) - 1 for g in groups)
    return float(math.sqrt(sum((len(g) - 1) * g.var(ddof=1) for g in groups) / dof))


@dataclass(frozen=True)
class Margin:
    value: float  # the smallest difference that matters, in the metric's units
    source: str  # "auto" or "given"
    description: str


def resolve_margin(margin, groups: Sequence = (), *, unit: str = "") -> Margin:
    """A number (the user's margin) or "auto": the pooled per-arm seed std of ``groups``."""
    if isinstance(margin, str) and margin == "auto":
        value = pooled_seed_std(groups)
        k = sum(1 for g in groups if len(g) >= 2)
        why = (
            "every seed gave the same value, so any real difference counts"
            if value == 0
            else "a difference smaller than what changing the seed does to one run is taken not to matter"
        )
        return Margin(
            value, "auto",
            f"auto: the pooled per-arm seed standard deviation, sqrt(sum((n_i-1) s_i^2) / sum(n_i-1)) "
            f"over {k} arms = {value:.3g}{unit}; {why}",
        )
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)):
        raise ValueError(f'margin must be "auto" or a number >= 0 in the metric\'s units, got {margin!r}.')
    value = float(margin)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}.")
    return Margin(value, "given", f"given: {value:g}{unit}")



@dataclass(frozen=True)
class MinimumEffectResult:
    """H0: |effect| <= margin. Two one-sided t tests against +margin and -margin, doubled.

    ``pvalue < alpha`` exactly when the two-sided (1 - alpha) t interval lies outside +-margin;
    with margin 0 it is the ordinary two-sided t test. Fields are arrays for 2-D input.
    """

    pvalue: float
    p_above: float  # H1: effect > +margin
    p_below: float  # H1: effect < -margin
    margin: float


def minimum_effect_test(d, margin: float) -> MinimumEffectResult:
    _, p_above = one_sample_t(d, margin, "greater")
    _, p_below = one_sample_t(d, -np.asarray(margin), "less")
    pvalue = np.minimum(1.0, 2 * np.minimum(p_above, p_below))
    return MinimumEffectResult(_scalar(pvalue), p_above, p_below, _scalar(margin))


@dataclass(frozen=True)
class TOSTResult:
    """H0: |effect| >= margin (two one-sided tests, TOST). Rejecting it shows equivalence.

    ``pvalue < alpha`` exactly when the (1 - 2 alpha) t interval lies inside +-margin.
    Fields are arrays for 2-D input.
    """

    pvalue: float
    p_lower: float  # H1: effect > -margin
    p_upper: float  # H1: effect < +margin
    margin: float


def tost(d, margin: float) -> TOSTResult:
    _, p_lower = one_sample_t(d, -np.asarray(margin), "greater")
    _, p_upper = one_sample_t(d, margin, "less")
    return TOSTResult(_scalar(np.maximum(p_lower, p_upper)), p_lower, p_upper, _scalar(margin))



def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjustment: controls the family-wise error rate, any dependence."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1 or not ((p >= 0) & (p <= 1)).all():
        raise ValueError("holm needs a 1-D array of p-values in [0, 1].")
    m = len(p)
    order = np.argsort(p, kind="stable")
    # the i-th smallest p-value is multiplied by (m - i); adjusted values never decrease
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


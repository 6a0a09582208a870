"""The margin (the smallest difference that matters) and the tests about it: minimum-effect
test (beyond the margin), TOST (within it), and Holm's adjustment (for secondary metrics)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._core import Result, _decimals, _scalar, one_sample_t, seed_std


def pooled_seed_std(groups: Sequence) -> float:
    """Pooled seed-to-seed std over arms: sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1)).

    Each s_i is taken on the values rounded as the differences are (``seed_std``, the rounding of
    the arms' common magnitude), so arms that are each constant across seeds pool to exactly 0.
    """
    groups = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    if not groups:
        raise ValueError("the pooled seed std needs an arm with at least 2 seeds.")
    every = np.concatenate(groups)
    decimals = _decimals(every, every)
    dof = sum(len(g) - 1 for g in groups)
    return float(math.sqrt(sum((len(g) - 1) * seed_std(g, decimals) ** 2 for g in groups) / dof))


@dataclass(frozen=True)
class Margin(Result):
    """The smallest difference that matters. Declared (``given``) or estimated (``auto``).

    An auto margin is the pooled per-arm seed std sigma, estimated from the same runs the tests
    use. Its own uncertainty enters every claim about it: "beyond the margin" is tested against
    ``high`` and "within the margin" against ``low``, the ends of a chi-square interval for sigma
    at one-sided level ``bound_alpha`` each, and the test itself runs at alpha - bound_alpha. By
    Bonferroni's inequality a claim's error rate at the boundary is then at most alpha whatever
    the data did to the estimate (docs/statistics.md). For a given margin low = high = value.
    """

    value: float  # the point value, in the metric's units
    source: str  # "auto" (estimated from the data), "given" (a number) or "none" (no margin: tests against 0)
    description: str
    low: float = math.nan  # the margin "equivalent" is tested against
    high: float = math.nan  # the margin "beyond" is tested against
    df: int | None = None  # degrees of freedom of the chi-square interval (auto)
    bound_alpha: float = 0.0  # one-sided error share of each bound (auto); 0 for a given margin
    declared: str = ""  # a given margin: when it was declared (before the data, after it, for an alternative)

    @property
    def estimated(self) -> bool:
        return self.source == "auto"

    def to_dict(self) -> dict:
        d = super().to_dict()
        if d["declared"] in ("", "declared before the data"):  # the usual case: analysis.json as it always was
            del d["declared"]
        return d

    @property
    def none(self) -> bool:
        """No margin: "beyond" is the test against 0 and equivalence cannot be claimed."""
        return self.source == "none"


def margin_bound_factors(df, bound_alpha: float):
    """(low, high) multipliers of an estimated std: its chi-square bounds, one-sided bound_alpha each.

    sigma_hat^2 * df / sigma^2 is chi-square with df degrees of freedom for normal data, so
    P(sigma > sigma_hat * high) = P(sigma < sigma_hat * low) = bound_alpha. Works on arrays of df.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    df = np.asarray(df, dtype=float)
    low = np.sqrt(df / sps.chi2.ppf(1 - bound_alpha, df))
    high = np.sqrt(df / sps.chi2.ppf(bound_alpha, df))
    return _scalar(low), _scalar(high)


def resolve_margin(margin, groups: Sequence = (), *, unit: str = "", alpha: float = 0.05,
                   resolution: float | None = None, declared: str = "declared before the data") -> Margin:
    """A number (the user's margin; ``declared`` says when it was declared), "auto" (the pooled seed
    std) or None (no margin: its tests run at 0, so only better, worse or no detectable difference).

    ``resolution``: the metric's smallest step (100/n_test points for accuracy); an auto margin
    below it is flagged, since one changed test prediction already exceeds it.
    """
    if isinstance(margin, str) and margin == "auto":
        value = pooled_seed_std(groups)
        used = [g for g in groups if len(g) >= 2]
        # Arms of one seed share that seed's level, so their variances are not independent: at a
        # correlation near 1 the arms carry the information of one arm. The chi-square interval
        # therefore uses the df of one arm (the most seeds any arm has, minus one), not their sum.
        df = max(len(g) for g in used) - 1
        bound_alpha = alpha / 2
        f_low, f_high = margin_bound_factors(df, bound_alpha)
        low, high = value * f_low, value * f_high
        why = (
            "every seed gave the same value, so any real difference counts"
            if value == 0
            else "a difference smaller than what changing the seed does to one run is taken not to matter"
        )
        text = (
            f"auto, ESTIMATED FROM THE DATA: the pooled per-arm seed standard deviation "
            f"sqrt(sum((n_i-1) s_i^2) / sum(n_i-1)) over {len(used)} arms = {value:.3g}{unit}; {why}. "
            f"Its {1 - bound_alpha:.1%} chi-square bounds ({df} df) are {low:.3g} to {high:.3g}{unit}: "
            f"'beyond' is tested against {high:.3g}, 'equivalent' against {low:.3g}, each test at "
            f"alpha {alpha - bound_alpha:g}, so each claim errs at most alpha {alpha:g} (Bonferroni). "
            f"Declare a margin (the smallest effect of interest) for claims that do not rest on the data"
        )
        if resolution is not None and 0 < value < resolution:
            text += (f". NOTE: the margin is smaller than one test example ({resolution:.3g}{unit}): "
                     f"a single changed prediction exceeds it")
        return Margin(value, "auto", text, low=low, high=high, df=df, bound_alpha=bound_alpha)
    if margin is None:
        return Margin(0.0, "none", "none: no margin was declared for this metric, so the verdict is better or worse "
                                   "by the test against 0, or no detectable difference; equivalence is not claimed",
                      low=0.0, high=0.0)
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)):
        raise ValueError(f'margin must be "auto" or a number >= 0 in the metric\'s units, got {margin!r}.')
    value = float(margin)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}.")
    return Margin(value, "given", f"given: {value:g}{unit}, {declared}", low=value, high=value, declared=declared)


@dataclass(frozen=True)
class MinimumEffectResult(Result):
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
class TOSTResult(Result):
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


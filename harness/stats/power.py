"""Power of the paired t test and the number of seeds a question needs."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ._core import MIN_PAIRS, POWER, Result, _scalar


@functools.lru_cache(maxsize=256)
def _laguerre(df: float):
    """Nodes x and weights w with E[g(V)] = sum w g(2x) for V chi-square with df (sum w = 1)."""
    from scipy import special
    x, w = special.roots_genlaguerre(96, df / 2 - 1)
    return x, w / w.sum()


def _t_tail(critical, df, noncentrality, upper: bool):
    """P(T > critical) (upper) or P(T < -critical) of a noncentral t, never NaN.

    scipy 1.17's ``nct`` returns NaN in the far tail (e.g. effect/sd above ~3.3 at small n), which
    read as "no power" made seeds_needed run on. Where it does, integrate instead: with
    T = (Z + delta) / S, S = sqrt(V / df) and V chi-square, P(T > c) = E[Phi(delta - c S)], taken
    by generalised Gauss-Laguerre quadrature over the chi-square density.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    critical, df, noncentrality = np.broadcast_arrays(
        np.asarray(critical, dtype=float), np.asarray(df, dtype=float), np.asarray(noncentrality, dtype=float))
    with np.errstate(all="ignore"):
        tail = sps.nct.sf(critical, df, noncentrality) if upper else sps.nct.cdf(-critical, df, noncentrality)
    tail = np.array(tail, dtype=float, ndmin=1)
    bad = ~np.isfinite(tail).reshape(-1)
    if bad.any():
        flat = tail.reshape(-1)
        c, k, delta = (x.reshape(-1)[bad] for x in (critical, df, noncentrality))
        values = np.empty(len(c))
        for dof in np.unique(k):
            at = k == dof
            x, w = _laguerre(float(dof))
            s = np.sqrt(2 * x / dof)[None, :]  # S = sqrt(V / df) at the nodes, V = 2x
            z = (delta[at, None] - c[at, None] * s) if upper else (-c[at, None] * s - delta[at, None])
            values[at] = sps.norm.cdf(z) @ w
        flat[bad] = values
        tail = flat
    return np.clip(tail.reshape(np.shape(critical)), 0.0, 1.0)


def paired_t_power(n, effect, sd, alpha: float = 0.05, *, null: float = 0.0, alternative: str = "two-sided"):
    """Power of the paired t test of mean difference = ``null`` at level alpha (noncentral t).

    n pairs whose differences are normal with mean ``effect`` and standard deviation ``sd``.
    Works elementwise on arrays of n; finite everywhere (see _t_tail).
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    n = np.asarray(n, dtype=float)
    df = n - 1
    noncentrality = (np.asarray(effect, dtype=float) - null) / sd * np.sqrt(n)
    if alternative == "two-sided":
        critical = sps.t.ppf(1 - alpha / 2, df)
        power = _t_tail(critical, df, noncentrality, True) + _t_tail(critical, df, noncentrality, False)
    elif alternative == "greater":
        power = _t_tail(sps.t.ppf(1 - alpha, df), df, noncentrality, True)
    else:
        power = _t_tail(sps.t.ppf(1 - alpha, df), df, noncentrality, False)
    return _scalar(np.minimum(power, 1.0))


def fewest_seeds(alpha: float, two_sided: bool = True) -> int:
    """The fewest pairs with which the exact sign-flip test can reach p < alpha (at least MIN_PAIRS).

    The verdict never claims more than that test can (its p is at least 2/2^n two-sided, 1/2^n
    one-sided), so no count of seeds below this can settle anything: 6 at alpha 0.05 two-sided.
    """
    n = MIN_PAIRS
    while (2.0 if two_sided else 1.0) / 2.0**n >= alpha:
        n += 1
    return n


def _smallest_n(power_at, gap: float, sd: float, one_sided_alpha: float, power: float, max_seeds: int,
                min_n: int = MIN_PAIRS):
    """Smallest n >= min_n with power_at(n) >= power, or None beyond max_seeds."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    if gap <= 0 or sd <= 0 or not math.isfinite(gap) or not math.isfinite(sd):
        return None
    # The normal approximation is a lower bound for the t test's answer: start just below it.
    guess = ((sps.norm.ppf(1 - one_sided_alpha) + sps.norm.ppf(power)) * sd / gap) ** 2
    if guess > max_seeds:
        return None
    start = max(2, int(guess) - 1)
    while start <= max_seeds:
        ns = np.arange(start, start + 64)
        hit = np.flatnonzero(np.asarray(power_at(ns)) >= power)
        if hit.size:
            return max(min_n, int(ns[hit[0]]))
        start += 64
    return None


def seeds_needed(effect: float, sd: float, *, alpha: float = 0.05, power: float = POWER,
                 max_seeds: int = 1_000_000) -> int | None:
    """Seeds for the two-sided t test against 0 to reach ``power`` when the true difference is
    ``effect``; never fewer than the sign-flip floor allows a claim with (``fewest_seeds``).

    None when no number of seeds applies (effect 0; sd 0, an exact difference) or when more than
    ``max_seeds`` would be needed.
    """
    effect = abs(float(effect))
    return _smallest_n(lambda n: paired_t_power(n, effect, sd, alpha), effect, sd, alpha / 2, power, max_seeds,
                       fewest_seeds(alpha))


def seeds_to_settle_margin(effect: float, sd: float, margin: float, *, alpha: float = 0.05,
                           power: float = POWER, max_seeds: int = 1_000_000) -> int | None:
    """Seeds for the margin question to be answered if the true difference is ``effect``.

    |effect| > margin: power of the minimum-effect test (one-sided at alpha/2 against the near
    bound, as its p-value is doubled). |effect| < margin: a lower bound on the power of TOST,
    P(both one-sided tests reject) >= P(near) + P(far) - 1, so the count errs on the high side.
    """
    effect = abs(float(effect))
    if effect > margin:
        def power_at(n):
            return paired_t_power(n, effect, sd, alpha / 2, null=margin, alternative="greater")
        return _smallest_n(power_at, effect - margin, sd, alpha / 2, power, max_seeds, fewest_seeds(alpha))

    def power_at(n):
        near = paired_t_power(n, effect, sd, alpha, null=margin, alternative="less")
        far = paired_t_power(n, effect, sd, alpha, null=-margin, alternative="greater")
        return near + far - 1
    return _smallest_n(power_at, margin - effect, sd, alpha, power, max_seeds, fewest_seeds(alpha, False))


@dataclass(frozen=True)
class SeedsNeeded(Result):
    """Seeds for 80% power, if the differences are normal with the measured sd (see assumptions).

    Each count comes with a range: the same count at the two ends of a chi-square interval for
    the sd of the differences (n - 1 df). From 3 seeds that range is wide, and says so.
    """

    at_margin: int | None  # t test against 0 detects a true difference as large as the margin
    at_observed: int | None  # ... as large as the one observed
    to_settle_margin: int | None  # minimum-effect test or TOST decides, at the observed difference
    power: float
    alpha: float
    assumptions: str
    # (count if the sd is at the low end, count if at the high end); None = more than a million
    at_margin_range: tuple = (None, None)
    at_observed_range: tuple = (None, None)
    to_settle_margin_range: tuple = (None, None)
    sd_range: tuple = (None, None)
    sd_range_level: float = 0.95


def sd_interval(sd: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Chi-square interval for a normal standard deviation estimated with n - 1 df."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    df = n - 1
    tail = (1 - level) / 2
    return (sd * math.sqrt(df / sps.chi2.ppf(1 - tail, df)), sd * math.sqrt(df / sps.chi2.ppf(tail, df)))


def seeds_needed_for(mean_diff: float, std_diff: float, margin: float, *, alpha: float = 0.05,
                     power: float = POWER, n: int | None = None, margin_low: float | None = None,
                     margin_high: float | None = None) -> SeedsNeeded:
    """Seeds needed at the measured sd, and (given n, the pairs it was measured on) a range.

    ``margin_low``/``margin_high``: the margins the equivalence and beyond claims are tested
    against (they differ when the margin is estimated); the count to settle uses the one the
    observed difference would be tested against.
    """
    low_m = margin if margin_low is None else margin_low
    high_m = margin if margin_high is None else margin_high

    def counts(sd):
        settle_margin = high_m if abs(mean_diff) > high_m else low_m
        return (seeds_needed(margin, sd, alpha=alpha, power=power),
                seeds_needed(mean_diff, sd, alpha=alpha, power=power),
                seeds_to_settle_margin(mean_diff, sd, settle_margin, alpha=alpha, power=power))

    point = counts(std_diff)
    ranges = [(None, None)] * 3
    sd_range = (None, None)
    if n is not None and n >= 2 and std_diff > 0:
        sd_range = sd_interval(std_diff, n)
        at_low, at_high = counts(sd_range[0]), counts(sd_range[1])
        ranges = [(at_low[i], at_high[i]) for i in range(3)]
    return SeedsNeeded(
        at_margin=point[0], at_observed=point[1], to_settle_margin=point[2],
        power=power, alpha=alpha,
        assumptions=(
            f"normal paired differences with sd {std_diff:.3g} as measured"
            + (f" (95% interval {sd_range[0]:.3g} to {sd_range[1]:.3g} from {n} pairs, which gives the "
               f"ranges)" if sd_range[0] is not None else "")
            + f", true difference as stated; paired t tests at alpha {alpha:g}; power {power:.0%} from "
            f"the noncentral t distribution"
        ),
        at_margin_range=ranges[0], at_observed_range=ranges[1], to_settle_margin_range=ranges[2],
        sd_range=sd_range,
    )

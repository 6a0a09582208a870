"""Power of the paired t test and the number of seeds a question needs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._core import MIN_PAIRS, POWER, _scalar


def _t_tail(critical, df, noncentrality, upper: bool):
    """P(T > critical) (upper) or P(T < -critical) of a noncentral t, never NaN.

    scipy 1.17's ``nct`` returns NaN in the far tail (e.g. effect/sd above ~3.3 at small n), which
    read as "no power" made seeds_needed run on. Where it does, integrate instead: with
    T = (Z + delta) / S, S = sqrt(V / df) and V chi-square, P(T > c) = E[Phi(delta - c S)], taken
    over 400 equal-probability nodes of V (Gauss-Legendre in the chi-square's quantile).
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    critical, df, noncentrality = np.broadcast_arrays(
        np.asarray(critical, dtype=float), np.asarray(df, dtype=float), np.asarray(noncentrality, dtype=float))
    with np.errstate(all="ignore"):
        tail = sps.nct.sf(critical, df, noncentrality) if upper else sps.nct.cdf(-critical, df, noncentrality)
    tail = np.array(tail, dtype=float, ndmin=1)
    bad = ~np.isfinite(tail).reshape(-1)
    if bad.any():
        c, k, delta = (x.reshape(-1)[bad] for x in (critical, df, noncentrality))
        nodes, weights = np.polynomial.legendre.leggauss(400)
        u = (nodes + 1) / 2  # quantile levels in (0, 1)
        s = np.sqrt(sps.chi2.ppf(u[None, :], k[:, None]) / k[:, None])
        z = (delta[:, None] - c[:, None] * s) if upper else (-c[:, None] * s - delta[:, None])
        tail.reshape(-1)[bad] = sps.norm.cdf(z) @ (weights / 2)
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


def _smallest_n(power_at, gap: float, sd: float, one_sided_alpha: float, power: float, max_seeds: int):
    """Smallest n >= MIN_PAIRS with power_at(n) >= power, or None beyond max_seeds."""
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
            return max(MIN_PAIRS, int(ns[hit[0]]))
        start += 64
    return None


def seeds_needed(effect: float, sd: float, *, alpha: float = 0.05, power: float = POWER,
                 max_seeds: int = 1_000_000) -> int | None:
    """Seeds (pairs, at least MIN_PAIRS) for the two-sided t test against 0 to reach ``power``
    when the true difference is ``effect``.

    None when no number of seeds applies (effect 0; sd 0, an exact difference) or when more than
    ``max_seeds`` would be needed.
    """
    effect = abs(float(effect))
    return _smallest_n(lambda n: paired_t_power(n, effect, sd, alpha), effect, sd, alpha / 2, power, max_seeds)


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
        return _smallest_n(power_at, effect - margin, sd, alpha / 2, power, max_seeds)

    def power_at(n):
        near = paired_t_power(n, effect, sd, alpha, null=margin, alternative="less")
        far = paired_t_power(n, effect, sd, alpha, null=-margin, alternative="greater")
        return near + far - 1
    return _smallest_n(power_at, margin - effect, sd, alpha, power, max_seeds)


@dataclass(frozen=True)
class SeedsNeeded:
    """Seeds for 80% power, if the differences are normal with the measured sd (see assumptions)."""

    at_margin: int | None  # t test against 0 detects a true difference as large as the margin
    at_observed: int | None  # ... as large as the one observed
    to_settle_margin: int | None  # minimum-effect test or TOST decides, at the observed difference
    power: float
    alpha: float
    assumptions: str


def seeds_needed_for(mean_diff: float, std_diff: float, margin: float, *, alpha: float = 0.05,
                     power: float = POWER) -> SeedsNeeded:
    return SeedsNeeded(
        at_margin=seeds_needed(margin, std_diff, alpha=alpha, power=power),
        at_observed=seeds_needed(mean_diff, std_diff, alpha=alpha, power=power),
        to_settle_margin=seeds_to_settle_margin(mean_diff, std_diff, margin, alpha=alpha, power=power),
        power=power, alpha=alpha,
        assumptions=(
            f"normal paired differences with sd {std_diff:.3g} as measured, true difference as "
            f"stated; paired t tests at alpha {alpha:g}; power {power:.0%} from the noncentral t "
            f"distribution"
        ),
    )

"""Power of the paired t test and the number of seeds a question needs."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._core import MIN_PAIRS, POWER, Result
from .exact_share import _EXACT_BELOW, exact_share
from .margin import NodePower, _bound_factors, _margin_power
from ..margins import Margin
from .t_test import paired_t_power


def fewest_seeds(alpha: float, two_sided: bool = True) -> int:
    """The fewest pairs with which the exact sign-flip test can reach p < alpha (at least MIN_PAIRS).

    The verdict never claims more than that test can (its p is at least 2/2^n two-sided, 1/2^n
    one-sided), so no count of seeds below this can settle anything: 6 at alpha 0.05 two-sided.
    """
    n = MIN_PAIRS
    while (2.0 if two_sided else 1.0) / 2.0**n >= alpha:
        n += 1
    return n


def decision_levels(alpha: float, n_comparisons: int = 1, margin_share: float = 1.0) -> dict:
    """The level each claim of the verdict is decided at (harness.stats.decision_pvalues, decide).

    zero: the two-sided t test against 0 at alpha / k (Bonferroni over k comparisons with the
    baseline); beyond: the minimum-effect test, whose doubled p is compared with alpha * share / k
    (one-sided at half that against the margin); equivalent: each of TOST's one-sided tests at
    alpha * share / k. ``margin_share``: the part of alpha a margin claim's test gets, 1 for a
    declared margin, (alpha - alpha/2) / alpha = 0.5 for an estimated one (the rest pays for the
    margin's bound).
    """
    k = n_comparisons
    return {"zero": alpha / k, "beyond": alpha * margin_share / k, "equivalent": alpha * margin_share / k}


def claim_floors(alpha: float, n_comparisons: int = 1, margin_share: float = 1.0) -> dict:
    """The fewest seeds each claim can rest on at the level it is decided at: the exact sign-flip
    test's floor, 2 * 2**-n (two-sided: against 0, and beyond the margin) or 2**-n (one-sided:
    each test of TOST), must be below that level. At alpha 0.05: against 0 6 seeds, beyond an
    estimated margin 7, with 2 or 3 arms against the baseline 7 (beyond an estimated margin 8)."""
    levels = decision_levels(alpha, n_comparisons, margin_share)
    return {"zero": fewest_seeds(levels["zero"]), "beyond": fewest_seeds(levels["beyond"]),
            "equivalent": fewest_seeds(levels["equivalent"], two_sided=False)}


# Below this many pairs (_EXACT_BELOW, 20) the exact sign-flip test every claim must also pass
# (decision_pvalues) costs the t test power: measured at 80% t power, 0.61 at 6 pairs, 0.75 at 7, 0.79
# at 10, within 0.005 from 15 on (normal differences). Counts below it are checked by simulating both
# tests (exact_share.py: shipped as a table for the levels alpha 0.05 gives, simulated otherwise).
_exact_share = exact_share


def _share(n, gap_over_sd: float, level: float) -> float:
    """_exact_share at the gap rounded down to a multiple of 0.05 sd (the share grows with the gap:
    rounding down errs towards more seeds, and neighbouring questions share one simulation)."""
    return _exact_share(int(n), math.floor(float(gap_over_sd) * 20) / 20, float(f"{level:.6g}"))


def _smallest_n(power_at, gap: float, sd: float, one_sided_alpha: float, power: float, max_seeds: int,
                min_n: int = MIN_PAIRS, exact_power_at=None):
    """Smallest n >= min_n with power_at(n) >= power, or None beyond max_seeds.

    ``exact_power_at(n)``: the power once the exact sign-flip test must also reject; where the t
    test's count is below _EXACT_BELOW, n then grows until that power is reached too."""
    n = _smallest_t_n(power_at, gap, sd, one_sided_alpha, power, max_seeds, min_n)
    if n is None or exact_power_at is None:
        return n
    while n < min(_EXACT_BELOW, max_seeds) and exact_power_at(n) < power:
        n += 1
    return n


_FIRST = 8  # counts of the block of 64 computed first


@functools.lru_cache(maxsize=64)
def _normal_quantile(q: float):
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    return sps.norm.ppf(q)


def _takes_rows(power_at) -> bool:
    code = getattr(power_at, "__code__", None)
    if code is not None:  # a plain function: its own argument names, without inspect's ~0.1 ms
        return "rows" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    import inspect
    return "rows" in inspect.signature(power_at).parameters


def _smallest_t_n(power_at, gap: float, sd: float, one_sided_alpha: float, power: float, max_seeds: int,
                  min_n: int = MIN_PAIRS):
    """Smallest n >= min_n with power_at(n) >= power, or None beyond max_seeds."""
    if gap <= 0 or sd <= 0 or not math.isfinite(gap) or not math.isfinite(sd):
        return None
    # The normal approximation is a lower bound for the t test's answer: start just below it.
    guess = ((_normal_quantile(1 - one_sided_alpha) + _normal_quantile(power)) * sd / gap) ** 2
    if guess > max_seeds:
        return None
    start = max(2, int(guess) - 1)
    if start > max_seeds:  # (max_seeds below 2)
        return None
    ns = np.arange(start, start + 64)
    first_reaching = getattr(power_at, "first_reaching", None)
    if first_reaching is not None:  # the same count, without every node of every count (NodePower)
        hit = first_reaching(ns, power, range(_FIRST))
        hit = first_reaching(ns, power, range(_FIRST, len(ns))) if hit is None else hit
        hit = np.array([] if hit is None else [hit], dtype=int)
    else:
        # The first few counts usually hold the answer: they are computed first, as the whole block
        # computes them (``rows``), and the block only when none of them reaches the power.
        hit = np.flatnonzero(np.asarray(power_at(ns, rows=_FIRST)) >= power) if _takes_rows(power_at) else ()
        if not len(hit):
            hit = np.flatnonzero(np.asarray(power_at(ns)) >= power)
    if hit.size:  # the usual case: within 64 seeds of the normal approximation
        return max(min_n, int(ns[hit[0]]))
    # Far above it (a difference near the margin): the power rises with n, so the first count that
    # reaches it is bracketed by doubling, then bisected, over the counts the blocks of 64 from
    # ``start`` would have scanned (up to the last block starting at or below max_seeds).
    def reached(n: int) -> bool:
        if first_reaching is not None:
            return first_reaching(np.array([n]), power) is not None
        return bool(np.asarray(power_at(np.array([n])))[0] >= power)
    low, last = start + 63, start + 64 * ((max_seeds - start) // 64) + 63  # power(low) < power
    if last <= low or not reached(last):
        return None
    step, high = 64, min(low + 64, last)
    while not reached(high):
        low, step = high, 2 * step
        high = min(low + step, last)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reached(mid) else (mid, high)
    return max(min_n, high)


def seeds_needed(effect: float, sd: float, *, alpha: float = 0.05, power: float = POWER,
                 max_seeds: int = 1_000_000) -> int | None:
    """Seeds for the two-sided t test against 0 to reach ``power`` when the true difference is
    ``effect``; never fewer than the sign-flip floor allows a claim with (``fewest_seeds``).

    None when no number of seeds applies (effect 0; sd 0, an exact difference) or when more than
    ``max_seeds`` would be needed.
    """
    effect = abs(float(effect))

    def exact(n):  # the side of the effect: the other's share of the power is negligible
        return float(paired_t_power(n, effect, sd, alpha)) * _share(n, effect / sd, alpha / 2) if sd > 0 else 0.0
    def power_at(n, rows=None):
        return paired_t_power(n if rows is None else n[:rows], effect, sd, alpha)
    return _smallest_n(power_at, effect, sd, alpha / 2, power, max_seeds,
                       fewest_seeds(alpha), exact)


def seeds_to_settle_margin(effect: float, sd: float, margin: float, *, alpha: float = 0.05,
                           power: float = POWER, max_seeds: int = 1_000_000, bound_alpha: float = 0.0) -> int | None:
    """Seeds for the margin question to be answered if the true difference is ``effect``.

    ``alpha``: the level the margin claims are decided at (``decision_levels``: alpha * share / k).
    |effect| > margin: power of the minimum-effect test (one-sided at alpha/2 against the margin,
    as its p-value is doubled). |effect| < margin: a lower bound on the power of TOST,
    P(both one-sided tests reject) >= P(near) + P(far) - 1, so the count errs on the high side.
    Never fewer seeds than the exact sign-flip floor at that level (``fewest_seeds``).
    ``bound_alpha`` > 0: the margin is estimated (``margin`` its value), and with n seeds 'beyond' is
    tested against the upper end of its chi-square bound (n - 1 df, one-sided bound_alpha) and
    'within' against the lower end: the power at each n uses those ends and averages over the
    estimate's own variation (``_margin_power``). None: effect on the margin, or more than max_seeds.
    """
    effect = abs(float(effect))
    if effect > margin:
        def beyond(n, m):
            return paired_t_power(n, effect, sd, alpha / 2, null=m, alternative="greater")

        def power_at(n, rows=None):
            return _margin_power(beyond, margin, bound_alpha, n, 1, rows)
        if bound_alpha > 0:  # 24 nodes a count: the search rules counts out by bounds where it can
            power_at = NodePower(beyond, beyond, margin, bound_alpha, 1)

        def exact_beyond(n):  # the exact test against the margin the claim is tested at, with n seeds
            m = margin * (float(_bound_factors(n - 1, bound_alpha)[1]) if bound_alpha > 0 else 1.0)
            return float(power_at(n)) * _share(n, (effect - m) / sd, alpha / 2)
        return _smallest_n(power_at, effect - margin, sd, alpha / 2, power, max_seeds, fewest_seeds(alpha),
                           exact_beyond if sd > 0 else None)

    def within(n, m):
        near = paired_t_power(n, effect, sd, alpha, null=m, alternative="less")
        far = paired_t_power(n, effect, sd, alpha, null=-np.asarray(m), alternative="greater")
        return np.maximum(np.asarray(near) + far - 1, 0.0)

    def near_only(n, m):  # at least within(n, m): near + far - 1 <= near
        return paired_t_power(n, effect, sd, alpha, null=m, alternative="less")

    def power_at(n, rows=None):
        return _margin_power(within, margin, bound_alpha, n, 0, rows)
    if bound_alpha > 0:  # (as for beyond)
        power_at = NodePower(within, near_only, margin, bound_alpha, 0)

    def exact_within(n):  # each of TOST's one-sided tests must also pass its exact test
        m = margin * (float(_bound_factors(n - 1, bound_alpha)[0]) if bound_alpha > 0 else 1.0)
        near = float(paired_t_power(n, effect, sd, alpha, null=m, alternative="less"))
        far = float(paired_t_power(n, effect, sd, alpha, null=-m, alternative="greater"))
        by_t = near + far - 1
        if by_t <= 0:
            return 0.0
        both = near * _share(n, (m - effect) / sd, alpha) + far * _share(n, (effect + m) / sd, alpha) - 1
        return float(power_at(n)) * max(both, 0.0) / by_t
    return _smallest_n(power_at, margin - effect, sd, alpha, power, max_seeds, fewest_seeds(alpha, False),
                       exact_within if sd > 0 else None)


@dataclass(frozen=True)
class SeedsNeeded(Result):
    """Seeds for 80% power, if the differences are normal with the measured sd (see assumptions).

    Each count is for the claim's test at the level the verdict decides it at (``levels``: alpha / k
    over k comparisons, a margin claim's share of alpha when the margin is estimated), and never
    below the exact sign-flip floor at that level (``floors``). Each comes with a range: the same
    count at the two ends of a chi-square interval for the sd of the differences (n - 1 df). From
    3 seeds that range is wide, and says so.
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
    n_comparisons: int = 1
    levels: dict | None = None  # zero / beyond / equivalent: the level each count is computed at
    floors: dict | None = None  # zero / beyond / equivalent: the fewest seeds at that level


def sd_interval(sd: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Chi-square interval for a normal standard deviation estimated with n - 1 df."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    df = n - 1
    tail = (1 - level) / 2
    return (sd * math.sqrt(df / sps.chi2.ppf(1 - tail, df)), sd * math.sqrt(df / sps.chi2.ppf(tail, df)))


def seeds_needed_for(mean_diff: float, std_diff: float, margin, *, alpha: float = 0.05,
                     power: float = POWER, n: int | None = None, margin_low: float | None = None,
                     margin_high: float | None = None, n_comparisons: int = 1) -> SeedsNeeded:
    """Seeds needed at the measured sd, and (given n, the pairs it was measured on) a range.

    Every count is computed at the level its claim is decided at (``decision_levels``): alpha /
    ``n_comparisons`` (Bonferroni over the comparisons with the baseline), and for the margin
    claims of an estimated margin the test's share of alpha, (alpha - margin.bound_alpha) / alpha;
    never below the exact sign-flip floor at that level (``claim_floors``).

    ``margin``: a resolved Margin (what the verdict passes: an estimated one is planned with its
    bounds at the planned number of seeds) or a number (declared). ``margin_low``/``margin_high``
    (numbers only, kept for old callers): fixed margins the equivalence and beyond claims are tested
    against, at the full alpha share.
    """
    k = int(n_comparisons)
    if isinstance(margin, Margin):
        value, bound_alpha = margin.value, margin.bound_alpha
        share = (alpha - bound_alpha) / alpha
        low_m = high_m = value
    else:
        value, bound_alpha, share = float(margin), 0.0, 1.0
        low_m = value if margin_low is None else margin_low
        high_m = value if margin_high is None else margin_high
    levels = decision_levels(alpha, k, share)
    floors = claim_floors(alpha, k, share)

    def counts(sd):
        if abs(mean_diff) > high_m:
            settle = seeds_to_settle_margin(mean_diff, sd, high_m, alpha=levels["beyond"], power=power,
                                            bound_alpha=bound_alpha)
        elif abs(mean_diff) < low_m:
            settle = seeds_to_settle_margin(mean_diff, sd, low_m, alpha=levels["equivalent"], power=power,
                                            bound_alpha=bound_alpha)
        else:
            settle = None  # on the margin (or between fixed bounds): no number of seeds settles it
        return (seeds_needed(value, sd, alpha=levels["zero"], power=power),
                seeds_needed(mean_diff, sd, alpha=levels["zero"], power=power),
                settle)

    point = counts(std_diff)
    ranges = [(None, None)] * 3
    sd_range = (None, None)
    if n is not None and n >= 2 and std_diff > 0:
        sd_range = sd_interval(std_diff, n)
        at_low, at_high = counts(sd_range[0]), counts(sd_range[1])
        ranges = [(at_low[i], at_high[i]) for i in range(3)]
    adjusted = f" = alpha / {k}" if k > 1 else ""
    margin_level = (f"; the margin claims at {levels['beyond']:.3g}" + (
        f" = (alpha - {bound_alpha:g}){f' / {k}' if k > 1 else ''}: the rest of alpha pays for the estimated "
        f"margin's bound, taken at the planned number of seeds around the margin's value {value:.3g} and "
        f"averaged over the estimate's own variation" if bound_alpha > 0 else "")
        if levels["beyond"] != levels["zero"] else "")
    return SeedsNeeded(
        at_margin=point[0], at_observed=point[1], to_settle_margin=point[2],
        power=power, alpha=alpha,
        assumptions=(
            f"normal paired differences with sd {std_diff:.3g} as measured"
            + (f" (95% interval {sd_range[0]:.3g} to {sd_range[1]:.3g} from {n} pairs, which gives the "
               f"ranges)" if sd_range[0] is not None else "")
            + f", true difference as stated; each claim's paired t test at the level the verdict decides it "
            f"at: against 0 two-sided at {levels['zero']:.3g}{adjusted}{margin_level}; never fewer seeds than "
            f"the exact sign-flip test needs at that level ({floors['zero']} against 0, {floors['beyond']} beyond "
            f"the margin, {floors['equivalent']} within it); power {power:.0%} from the noncentral t distribution, "
            f"and below {_EXACT_BELOW} seeds with the exact sign-flip test every claim must also pass (simulated: "
            f"it costs the t test power there)"
        ),
        at_margin_range=ranges[0], at_observed_range=ranges[1], to_settle_margin_range=ranges[2],
        sd_range=sd_range, n_comparisons=k, levels=levels, floors=floors,
    )

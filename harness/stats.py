"""Paired statistics for A/B experiments: pure functions over numpy arrays, scipy underneath.

Every comparison takes the per-seed values of a baseline arm ``a`` and another arm ``b``, paired
by position (one position = one seed), and studies the differences ``d = b - a``. Results are
small frozen dataclasses in the style of scipy's result objects (``.statistic``, ``.pvalue``,
``.confidence_interval()``). Nothing here prints, plots, touches files, or imports Hydra or wandb.

What a verdict means (``decide``), with m the margin (the smallest difference that matters):

    identical            every difference is exactly 0: the factor did not change the numerics
    better / worse       the minimum-effect test rejects |effect| <= m (two-sided CI outside +-m)
    smaller_than_margin  the t test rejects effect = 0 AND TOST rejects |effect| >= m:
                         a real difference, but inside +-m
    equivalent           TOST rejects |effect| >= m (and the test against 0 does not)
    differs              the t test rejects effect = 0, but neither test about m decides
    undecided            nothing rejects; never read as "no effect"

Degenerate data is answered, never NaN'd: identical arms give p = 1 and no warnings; constant
nonzero differences (sd 0) are an exact, deterministic shift (p = 0, a zero-width interval).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Mapping, NamedTuple, Sequence

import numpy as np
from scipy import stats as sps

MIN_PAIRS = 3  # with 2 pairs the sd of the differences has 1 degree of freedom: too fragile to use
POWER = 0.8  # the power "seeds needed" aims for
# Differences are rounded to this many significant digits of the inputs' magnitude: accuracies
# are multiples of 100/n_test, and b - a carries ~1e-14 of rounding noise that would otherwise
# make equal differences look unequal (breaking ties and hiding the sd = 0 case).
SIGNIFICANT_DIGITS = 12

VERDICTS = ("identical", "better", "worse", "smaller_than_margin", "equivalent", "differs", "undecided")
DIFFERS = ("better", "worse", "smaller_than_margin", "differs")  # the t test against 0 rejected


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


def differences(a, b) -> np.ndarray:
    """``b - a`` per pair, with float rounding noise removed (see SIGNIFICANT_DIGITS)."""
    a, b = _pairs(a, b)
    scale = float(max(np.abs(a).max(), np.abs(b).max()))
    d = b - a
    if scale == 0.0:
        return d
    decimals = SIGNIFICANT_DIGITS - math.ceil(math.log10(scale))
    return np.round(d, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def _is_constant(x: np.ndarray) -> bool:
    return bool(np.ptp(x) == 0)


# -- t tests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TTestResult:
    """A t test of a mean difference (paired, one-sample or Welch)."""

    statistic: float  # +-inf when the differences do not vary and their mean is not the null value
    pvalue: float
    df: float
    estimate: float  # the mean difference b - a
    standard_error: float
    confidence_level: float
    alternative: str = "two-sided"
    note: str = ""

    def confidence_interval(self, confidence_level: float | None = None) -> ConfidenceInterval:
        level = self.confidence_level if confidence_level is None else confidence_level
        if self.standard_error == 0:
            return ConfidenceInterval(self.estimate, self.estimate)
        if self.alternative == "two-sided":
            low, high = sps.t.interval(level, self.df, loc=self.estimate, scale=self.standard_error)
        elif self.alternative == "greater":
            low, high = self.estimate - sps.t.ppf(level, self.df) * self.standard_error, math.inf
        else:
            low, high = -math.inf, self.estimate + sps.t.ppf(level, self.df) * self.standard_error
        return ConfidenceInterval(float(low), float(high))


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


def paired_t(a, b, *, confidence_level: float = 0.95) -> TTestResult:
    """Paired t test of mean(b - a) = 0 (``scipy.stats.ttest_rel``) with its confidence interval."""
    a, b = _pairs(a, b)
    d = differences(a, b)
    n = len(d)
    mean = float(np.mean(b - a))
    if _is_constant(d):
        shift = float(d[0])  # rounding noise removed: decides between 0 and an exact shift
        note = (
            "every difference is exactly 0" if shift == 0
            else "every seed moved by the same amount: the difference is exact (sd 0)"
        )
        return TTestResult(
            statistic=float(_exact_statistic(shift)), pvalue=float(_exact_pvalue(shift, "two-sided")),
            df=float(n - 1), estimate=mean, standard_error=0.0,
            confidence_level=confidence_level, note=note,
        )
    res = sps.ttest_rel(b, a)
    return TTestResult(
        statistic=float(res.statistic), pvalue=float(res.pvalue), df=float(res.df),
        estimate=mean, standard_error=float(sps.sem(b - a)),
        confidence_level=confidence_level,
    )


def welch_t(a, b, *, confidence_level: float = 0.95) -> TTestResult:
    """Unpaired Welch t test (``ttest_ind(equal_var=False)``): what ignoring the pairing would say."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if min(len(a), len(b)) < 2:
        raise ValueError("Welch's test needs at least 2 values per arm.")
    diff = float(b.mean() - a.mean())
    var_a, var_b = float(a.var(ddof=1)), float(b.var(ddof=1))
    se = math.sqrt(var_a / len(a) + var_b / len(b))  # Welch's standard error of the difference
    if se == 0:
        return TTestResult(
            statistic=float(_exact_statistic(diff)), pvalue=float(_exact_pvalue(diff, "two-sided")),
            df=float(len(a) + len(b) - 2), estimate=diff, standard_error=0.0,
            confidence_level=confidence_level, note="neither arm varies across seeds",
        )
    with warnings.catch_warnings():
        # scipy flags an arm that gives the same value for every seed as "nearly identical data";
        # one constant arm is exact data, and Welch's formula is fine as long as se > 0.
        warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
        res = sps.ttest_ind(b, a, equal_var=False)
    return TTestResult(
        statistic=float(res.statistic), pvalue=float(res.pvalue), df=float(res.df),
        estimate=diff, standard_error=se, confidence_level=confidence_level,
    )


# -- rank and resampling tests ------------------------------------------------------------------


@dataclass(frozen=True)
class WilcoxonResult:
    statistic: float | None  # min(T+, T-) for the two-sided test; None when not run
    pvalue: float
    method: str  # how the p-value was computed, in words
    zero_method: str
    n_zeros: int
    ties: bool


# Above this many pairs the resampling tests use the normal limit of their null distribution:
# at that size it is exact to the digits we print, and enumerating or sampling sign flips of
# thousands of pairs would take seconds per comparison (scripts/bench_analyze.py).
LARGE_N = 1000


def wilcoxon_signed_rank(a, b, *, n_resamples: int = 9999, seed: int = 0) -> WilcoxonResult:
    """Wilcoxon signed-rank test of the differences.

    No zeros and no ties (n <= 50): ``scipy.stats.wilcoxon``'s exact null distribution. With zeros
    or ties the exact tables no longer apply, so zeros are ranked and then dropped (Pratt) and the
    p-value comes from sign flips of the ranks (``permutation_test``): all 2^n of them when that is
    at most ``n_resamples``, else a seeded random sample of ``n_resamples``.
    """
    d = differences(a, b)
    n = len(d)
    nonzero = d[d != 0]
    n_zeros = n - len(nonzero)
    ties = len(np.unique(np.abs(nonzero))) < len(nonzero)
    if n_zeros == n:
        return WilcoxonResult(None, 1.0, "not run: every difference is 0", "-", n_zeros, False)
    if n > LARGE_N:
        res = sps.wilcoxon(d, zero_method="pratt", method="asymptotic", correction=False)
        return WilcoxonResult(
            float(res.statistic), float(res.pvalue), f"normal approximation (n > {LARGE_N}), tie-corrected",
            "pratt", n_zeros, ties,
        )
    if n_zeros == 0 and not ties:
        method = "exact" if n <= 50 else "asymptotic"
        res = sps.wilcoxon(d, zero_method="wilcox", method=method)
        return WilcoxonResult(float(res.statistic), float(res.pvalue), method, "wilcox", 0, False)
    # Pratt: rank |d| with the zeros, then give the zeros no rank. Under H0 each sign is a coin
    # flip, so the null distribution of T+ (the ranks of the positive differences) comes from
    # flipping signs. Same p-value as wilcoxon(method=PermutationMethod()), but vectorised: scipy's
    # own loop takes seconds for 2^10 patterns.
    ranks = sps.rankdata(np.abs(d))
    ranks[d == 0] = 0.0

    def positive_rank_sum(x, axis=-1):
        return np.sum(ranks * (x > 0), axis=axis)

    res = sps.permutation_test(
        (d,), positive_rank_sum, permutation_type="samples", vectorized=True,
        n_resamples=n_resamples, rng=np.random.default_rng(seed),
    )
    t_plus = float(res.statistic)
    statistic = min(t_plus, float(ranks.sum()) - t_plus)
    why = " and ".join(w for w, present in (("zeros", n_zeros), ("ties", ties)) if present)
    if 2**n <= n_resamples:
        method = f"sign flips of the ranks, exact over all {2**n} ({why})"
    else:
        method = f"sign flips of the ranks, {n_resamples} random (seed {seed}) ({why})"
    return WilcoxonResult(statistic, float(res.pvalue), method, "pratt", n_zeros, ties)


def _mean_difference(x, y, axis=-1):
    return np.mean(y - x, axis=axis)


@dataclass(frozen=True)
class PermutationResult:
    statistic: float  # the observed mean difference
    pvalue: float
    exact: bool  # all 2^n sign flips were enumerated
    n_resamples: int  # sign patterns evaluated (0: normal limit of the sign-flip distribution)
    seed: int | None  # the seed of the random sign flips; None when exact
    method: str = ""


def sign_flip_permutation(a, b, *, n_resamples: int = 9999, seed: int = 0) -> PermutationResult:
    """Paired permutation test of the mean difference (``permutation_test``, type 'samples').

    Swapping a and b within a pair flips the sign of its difference; under H0 (the factor does
    nothing) every sign pattern is equally likely. Exact when 2^n <= n_resamples.
    """
    a, b = _pairs(a, b)
    n = len(a)
    if n > LARGE_N:
        # Under H0 sum(s_i d_i) with random signs s_i has mean 0 and variance sum(d_i^2).
        d = b - a
        scale = float(np.sqrt(np.sum(d**2)))
        z = float(np.sum(d)) / scale if scale > 0 else 0.0
        return PermutationResult(
            statistic=float(np.mean(d)), pvalue=float(min(1.0, 2 * sps.norm.sf(abs(z)))), exact=False,
            n_resamples=0, seed=None, method=f"normal limit of the sign-flip distribution (n > {LARGE_N})",
        )
    exact = 2**n <= n_resamples
    res = sps.permutation_test(
        (a, b), _mean_difference, permutation_type="samples", vectorized=True,
        n_resamples=n_resamples, rng=np.random.default_rng(seed),
    )
    return PermutationResult(
        statistic=float(res.statistic), pvalue=float(res.pvalue), exact=exact,
        n_resamples=2**n if exact else n_resamples, seed=None if exact else seed,
        method=f"exact over all {2**n} sign patterns" if exact else f"{n_resamples} random sign patterns (seed {seed})",
    )


@dataclass(frozen=True)
class BootstrapResult:
    low: float
    high: float
    confidence_level: float
    method: str  # "BCa", "percentile" (BCa was degenerate) or "none" (nothing to resample)
    n_resamples: int
    seed: int
    note: str = ""

    def confidence_interval(self) -> ConfidenceInterval:
        return ConfidenceInterval(self.low, self.high)


def bootstrap_ci(a, b, *, confidence_level: float = 0.95, n_resamples: int = 9999, seed: int = 0) -> BootstrapResult:
    """BCa bootstrap interval of the mean difference, resampling whole pairs (``paired=True``)."""
    a, b = _pairs(a, b)
    d = differences(a, b)
    if _is_constant(d):
        mean = float(np.mean(b - a))
        return BootstrapResult(
            mean, mean, confidence_level, "none", 0, seed,
            note="every difference is the same: each resample has the same mean",
        )
    note = ""
    if len(d) > LARGE_N:
        # BCa's jackknife is n x n; at this size its correction is negligible and the interval
        # agrees with the t interval, so a percentile interval of fewer resamples is enough.
        resamples = min(n_resamples, 999)
        res = sps.bootstrap((b - a,), np.mean, vectorized=True, method="percentile",
                            confidence_level=confidence_level, n_resamples=resamples,
                            rng=np.random.default_rng(seed))
        low, high = res.confidence_interval
        return BootstrapResult(float(low), float(high), confidence_level, "percentile", resamples, seed,
                               note=f"n > {LARGE_N}: percentile interval of {resamples} resamples of the differences")
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", sps.DegenerateDataWarning)
            res = sps.bootstrap(
                (a, b), _mean_difference, paired=True, vectorized=True, method=method,
                confidence_level=confidence_level, n_resamples=n_resamples,
                rng=np.random.default_rng(seed),
            )
        degenerate = [w for w in caught if issubclass(w.category, sps.DegenerateDataWarning)]
        for w in caught:  # anything else is not ours to swallow
            if w not in degenerate:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        low, high = res.confidence_interval
        if not degenerate and np.isfinite(low) and np.isfinite(high):
            return BootstrapResult(float(low), float(high), confidence_level, method, n_resamples, seed, note)
        reason = str(degenerate[0].message).split(".")[0] if degenerate else "non-finite bounds"
        note = f"BCa was degenerate ({reason}); percentile interval instead"
    raise ValueError(f"the bootstrap interval could not be computed: {note}")


def effect_size_dz(a, b) -> float | None:
    """Cohen's d_z = mean(d) / sd(d); None when the differences do not vary (it is undefined)."""
    d = differences(a, b)
    if _is_constant(d):
        return None
    return float(d.mean() / d.std(ddof=1))


# -- noise floor and margin ---------------------------------------------------------------------


def test_set_floor(accuracy: float, n_test: int) -> float:
    """Binomial standard error of an accuracy measured on n_test examples, in points.

    sqrt(p(1-p)/n_test): how much accuracy would move if only the test sample were redrawn.
    """
    p = float(accuracy) / 100.0
    if not 0.0 <= p <= 1.0 or n_test < 1:
        raise ValueError(f"accuracy must be in [0, 100] points and n_test >= 1; got {accuracy}, {n_test}.")
    return float(100.0 * sps.binom.std(n_test, p) / n_test)


test_set_floor.__test__ = False  # its name starts with "test": keep pytest from collecting it


@dataclass(frozen=True)
class NoiseFloor:
    n: int
    std_a: float  # seed-to-seed std of each arm (ddof=1)
    std_b: float
    std_diff: float  # std of the paired differences
    correlation: float | None  # Pearson r between arms across seeds; None when an arm is constant
    unpaired_std_diff: float  # sqrt(std_a^2 + std_b^2): std of a difference of two unpaired runs
    variance_ratio: float | None  # std_diff^2 / (std_a^2 + std_b^2): what pairing left; None if 0/0
    test_set_floor: float | None  # binomial floor in points, for accuracy with n_test given


def noise_floor(a, b, *, n_test: int | None = None) -> NoiseFloor:
    """How noisy one seed is, and how much of that noise pairing by seed removed."""
    a, b = _pairs(a, b)
    d = differences(a, b)
    std_a, std_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    std_diff = 0.0 if _is_constant(d) else float(d.std(ddof=1))
    unpaired_var = std_a**2 + std_b**2
    correlation = None
    if std_a > 0 and std_b > 0:
        correlation = float(sps.pearsonr(a, b).statistic)
    floor = None
    if n_test:
        floor = test_set_floor(float(np.mean(np.concatenate([a, b]))), n_test)
    return NoiseFloor(
        n=len(a), std_a=std_a, std_b=std_b, std_diff=std_diff, correlation=correlation,
        unpaired_std_diff=math.sqrt(unpaired_var),
        variance_ratio=std_diff**2 / unpaired_var if unpaired_var > 0 else None,
        test_set_floor=floor,
    )


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


# -- tests about the margin ---------------------------------------------------------------------


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


def _scalar(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


# -- power --------------------------------------------------------------------------------------


def paired_t_power(n, effect, sd, alpha: float = 0.05, *, null: float = 0.0, alternative: str = "two-sided"):
    """Power of the paired t test of mean difference = ``null`` at level alpha (noncentral t).

    n pairs whose differences are normal with mean ``effect`` and standard deviation ``sd``.
    Works elementwise on arrays of n.
    """
    n = np.asarray(n, dtype=float)
    df = n - 1
    noncentrality = (np.asarray(effect, dtype=float) - null) / sd * np.sqrt(n)
    if alternative == "two-sided":
        critical = sps.t.ppf(1 - alpha / 2, df)
        power = sps.nct.sf(critical, df, noncentrality) + sps.nct.cdf(-critical, df, noncentrality)
    elif alternative == "greater":
        power = sps.nct.sf(sps.t.ppf(1 - alpha, df), df, noncentrality)
    else:
        power = sps.nct.cdf(-sps.t.ppf(1 - alpha, df), df, noncentrality)
    return _scalar(power)


def _smallest_n(power_at, gap: float, sd: float, one_sided_alpha: float, power: float, max_seeds: int):
    """Smallest n >= MIN_PAIRS with power_at(n) >= power, or None beyond max_seeds."""
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


# -- multiple comparisons -----------------------------------------------------------------------


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


# -- the verdict --------------------------------------------------------------------------------


def decide(p_zero, p_beyond, p_equivalent, mean_diff, alpha: float = 0.05, *, identical=False,
           higher_is_better: bool = True):
    """The verdict code(s) from the three p-values; works elementwise on arrays.

    p_zero: t test of effect = 0; p_beyond: minimum-effect test; p_equivalent: TOST.
    """
    p_zero, p_beyond, p_equivalent, mean_diff, identical = np.broadcast_arrays(
        p_zero, p_beyond, p_equivalent, mean_diff, identical
    )
    improved = mean_diff > 0 if higher_is_better else mean_diff < 0
    beyond = p_beyond < alpha
    real = p_zero < alpha
    equivalent = p_equivalent < alpha
    codes = np.select(
        [identical.astype(bool), beyond & improved, beyond & ~improved, real & equivalent, equivalent, real],
        ["identical", "better", "worse", "smaller_than_margin", "equivalent", "differs"],
        default="undecided",
    )
    return str(codes) if codes.ndim == 0 else codes


@dataclass(frozen=True)
class Verdict:
    code: str
    sentence: str


@dataclass(frozen=True)
class PairedComparison:
    """Everything about one arm against the baseline; d = arm - baseline."""

    arm: str
    baseline: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    identical: bool  # every difference exactly 0
    exact: bool  # the differences do not vary (sd 0)
    noise: NoiseFloor
    t: TTestResult
    wilcoxon: WilcoxonResult
    permutation: PermutationResult
    bootstrap: BootstrapResult
    welch: TTestResult
    d_z: float | None
    margin: Margin
    minimum_effect: MinimumEffectResult
    tost: TOSTResult
    seeds_needed: SeedsNeeded
    alpha: float
    n_comparisons: int = 1
    p_zero_holm: float | None = None  # Holm-adjusted over the comparisons (= raw for one)
    p_minimum_effect_holm: float | None = None
    p_tost_holm: float | None = None
    verdict: Verdict | None = None


def _compare_unadjusted(a, b, *, arm: str, baseline: str, margin: Margin, alpha: float,
                        n_resamples: int, seed: int, n_test: int | None) -> PairedComparison:
    a, b = _pairs(a, b)
    d = differences(a, b)
    level = 1 - alpha
    noise = noise_floor(a, b, n_test=n_test)
    mean_diff = float(np.mean(b - a))  # as the t test reports it; d is only rounded for ties and sd 0
    return PairedComparison(
        arm=arm, baseline=baseline, n=len(d),
        mean_a=float(a.mean()), mean_b=float(b.mean()), mean_diff=mean_diff,
        identical=bool(np.array_equal(a, b)), exact=_is_constant(d), noise=noise,
        t=paired_t(a, b, confidence_level=level),
        wilcoxon=wilcoxon_signed_rank(a, b, n_resamples=n_resamples, seed=seed),
        permutation=sign_flip_permutation(a, b, n_resamples=n_resamples, seed=seed),
        bootstrap=bootstrap_ci(a, b, confidence_level=level, n_resamples=n_resamples, seed=seed),
        welch=welch_t(a, b, confidence_level=level),
        d_z=effect_size_dz(a, b), margin=margin,
        minimum_effect=minimum_effect_test(d, margin.value),
        tost=tost(d, margin.value),
        seeds_needed=seeds_needed_for(mean_diff, noise.std_diff, margin.value, alpha=alpha),
        alpha=alpha,
    )


def compare_to_baseline(pairs: Mapping[str, tuple], *, margin, baseline: str = "A", alpha: float = 0.05,
                        n_resamples: int = 9999, seed: int = 0, n_test: int | None = None,
                        unit: str = "", higher_is_better: bool = True) -> dict[str, PairedComparison]:
    """Each arm against the baseline; verdicts use Holm-adjusted p-values across the arms.

    ``pairs`` maps arm -> (baseline values, arm values), paired by position. ``margin`` is a
    number or a resolved Margin (one margin for the whole family of comparisons).
    """
    if not pairs:
        raise ValueError("compare_to_baseline needs at least one arm to compare.")
    if isinstance(margin, str):
        raise ValueError(
            'compare_to_baseline needs the margin as a number or a Margin; for "auto" call '
            'resolve_margin("auto", [values of each arm]) first (compare() does this for two arms).'
        )
    if not isinstance(margin, Margin):
        margin = resolve_margin(margin, unit=unit)
    raw = {
        arm: _compare_unadjusted(a, b, arm=arm, baseline=baseline, margin=margin, alpha=alpha,
                                 n_resamples=n_resamples, seed=seed, n_test=n_test)
        for arm, (a, b) in pairs.items()
    }
    k = len(raw)
    adjusted = {
        "p_zero_holm": holm([c.t.pvalue for c in raw.values()]),
        "p_minimum_effect_holm": holm([c.minimum_effect.pvalue for c in raw.values()]),
        "p_tost_holm": holm([c.tost.pvalue for c in raw.values()]),
    }
    out = {}
    for i, (arm, c) in enumerate(raw.items()):
        c = replace(c, n_comparisons=k, **{key: float(p[i]) for key, p in adjusted.items()})
        code = decide(c.p_zero_holm, c.p_minimum_effect_holm, c.p_tost_holm, c.mean_diff, alpha,
                      identical=c.identical, higher_is_better=higher_is_better)
        sentence = verdict_sentence(c, code, unit=unit, higher_is_better=higher_is_better)
        out[arm] = replace(c, verdict=Verdict(code, sentence))
    return out


def compare(a, b, *, margin="auto", alpha: float = 0.05, n_resamples: int = 9999, seed: int = 0,
            n_test: int | None = None, arm: str = "B", baseline: str = "A", unit: str = "",
            higher_is_better: bool = True) -> PairedComparison:
    """One arm against one baseline; ``margin="auto"`` pools the seed std of a and b."""
    a, b = _pairs(a, b)
    margin = margin if isinstance(margin, Margin) else resolve_margin(margin, [a, b], unit=unit)
    return compare_to_baseline(
        {arm: (a, b)}, margin=margin, baseline=baseline, alpha=alpha, n_resamples=n_resamples,
        seed=seed, n_test=n_test, unit=unit, higher_is_better=higher_is_better,
    )[arm]


# -- words --------------------------------------------------------------------------------------


def _p(p: float) -> str:
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}"


def _num(x: float) -> str:
    return f"{x:+.3g}"


def _seeds(n: int | None) -> str:
    return "more than a million" if n is None else str(n)


def verdict_sentence(c: PairedComparison, code: str, *, unit: str = "", higher_is_better: bool = True) -> str:
    """The verdict in plain words, with the numbers that support it."""
    arm, base, u, m = c.arm, c.baseline, unit, c.margin.value
    improved = c.mean_diff > 0 if higher_is_better else c.mean_diff < 0
    word = "better" if improved else "worse"
    low, high = c.t.confidence_interval()
    level = f"{c.t.confidence_level:.0%}"
    effect = f"{arm} - {base} = {_num(c.mean_diff)}{u} ({level} CI {_num(low)} to {_num(high)}"
    p0, pb, pe = _p(c.p_zero_holm), _p(c.p_minimum_effect_holm), _p(c.p_tost_holm)

    if code == "identical":
        return (
            f"identical results: the factor did not change the numerics ({arm} and {base} gave "
            f"exactly the same value in all {c.n} seeds)."
        )
    if code in ("better", "worse"):
        s = f"{arm} is {word} than {base} beyond the margin: {effect}), more than ±{m:.3g}{u} (minimum-effect test {pb})."
    elif code == "smaller_than_margin":
        s = (
            f"a real difference smaller than the margin: {arm} is {word} than {base}, {effect}; "
            f"t test against 0 {p0}), but inside ±{m:.3g}{u} (equivalence by TOST {pe})."
        )
    elif code == "equivalent":
        s = (
            f"equivalent within ±{m:.3g}{u}: {effect}; TOST {pe}); a difference this small "
            f"does not matter by the chosen margin."
        )
    elif code == "differs":
        need = c.seeds_needed
        if abs(c.mean_diff) == m:
            settle = "more seeds cannot settle it: the observed difference sits on the margin"
        else:
            settle = (
                f"if the true difference is {_num(c.mean_diff)}{u}, about "
                f"{_seeds(need.to_settle_margin)} seeds would settle that with {need.power:.0%} power"
            )
        s = (
            f"{arm} is {word} than {base}, {effect}; t test against 0 {p0}), but whether by more "
            f"than the margin ±{m:.3g}{u} is undecided; {settle}."
        )
    else:
        need = c.seeds_needed
        at_margin = (
            f"about {_seeds(need.at_margin)} seeds would give {need.power:.0%} power to detect a "
            f"true difference as large as the margin ({m:.3g}{u})"
            if m > 0 else "with a margin of 0 equivalence cannot be shown"
        )
        at_observed = (
            f"{_seeds(need.at_observed)} to detect one as large as the observed {_num(c.mean_diff)}{u}"
            if c.mean_diff != 0 else "an observed difference of exactly 0 gives no effect size to plan for"
        )
        s = (
            f"undecided: {effect}; t test against 0 {p0}); the data show neither a difference "
            f"nor equivalence within ±{m:.3g}{u}, and a non-significant test is not evidence "
            f"of no effect; {at_margin}, {at_observed}."
        )
    if c.exact:
        s += (
            f" The difference is exact: every seed moved by {_num(c.mean_diff)}{u} (sd of the "
            f"differences 0), so there is no seed noise to test against."
        )
    if c.n_comparisons > 1:
        s += f" (p-values Holm-adjusted over {c.n_comparisons} comparisons.)"
    return s

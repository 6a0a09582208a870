"""Paired tests of the mean difference d = b - a: t, Welch (what ignoring the pairing says),
Wilcoxon signed-rank, sign-flip permutation, bootstrap interval, effect size."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ._core import (
    LARGE_N, ConfidenceInterval, Result, _decimals, _exact_pvalue, _exact_statistic, _is_constant, _pairs,
    difference_units, differences, seed_std,
)

@dataclass(frozen=True)
class TTestResult(Result):
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
        from scipy import stats as sps  # lazily: the analysis CLI starts faster
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



def paired_t(a, b, *, confidence_level: float = 0.95) -> TTestResult:
    """Paired t test of mean(b - a) = 0 (``scipy.stats.ttest_rel``) with its confidence interval."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
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


def mean_interval(x, confidence_level: float = 0.95) -> ConfidenceInterval:
    """t interval of one arm's mean over seeds (for the dose-response figure); exact when sd is 0."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    x = np.asarray(x, dtype=float)
    mean = float(x.mean())
    se = seed_std(x) / math.sqrt(len(x))  # exactly 0 when every seed gave the same value
    if se == 0:
        return ConfidenceInterval(mean, mean)
    half = float(sps.t.ppf(0.5 + confidence_level / 2, len(x) - 1)) * se
    return ConfidenceInterval(mean - half, mean + half)


def welch_t(a, b, *, confidence_level: float = 0.95) -> TTestResult:
    """Unpaired Welch t test (``ttest_ind(equal_var=False)``): what ignoring the pairing would say."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if min(len(a), len(b)) < 2:
        raise ValueError("Welch's test needs at least 2 values per arm.")
    diff = float(b.mean() - a.mean())
    decimals = _decimals(a, b)
    var_a, var_b = seed_std(a, decimals) ** 2, seed_std(b, decimals) ** 2  # 0 for an arm constant across seeds
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
class WilcoxonResult(Result):
    statistic: float | None  # min(T+, T-) for the two-sided test; None when not run
    pvalue: float
    method: str  # how the p-value was computed, in words
    zero_method: str
    n_zeros: int
    ties: bool


# Above this many pairs the resampling tests use the normal limit of their null distribution:
# at that size it is exact to the digits we print, and enumerating or sampling sign flips of


def wilcoxon_signed_rank(a, b, *, n_resamples: int = 9999, seed: int = 0) -> WilcoxonResult:
    """Wilcoxon signed-rank test of the differences.

    No zeros and no ties (n <= 50): ``scipy.stats.wilcoxon``'s exact null distribution. With zeros
    or ties the exact tables no longer apply, so zeros are ranked and then dropped (Pratt) and the
    p-value comes from sign flips of the ranks (``permutation_test``): all 2^n of them when that is
    at most ``n_resamples``, else a seeded random sample of ``n_resamples``.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
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


@dataclass(frozen=True)
class PermutationResult(Result):
    statistic: float  # the observed mean difference
    pvalue: float
    exact: bool  # all 2^n sign flips were enumerated
    n_resamples: int  # sign patterns evaluated (0: normal limit of the sign-flip distribution)
    seed: int | None  # the seed of the random sign flips; None when exact
    method: str = ""


def sign_flip_permutation(a, b, *, n_resamples: int = 9999, seed: int = 0) -> PermutationResult:
    """Paired permutation test of the mean difference: sign flips of the rounded differences.

    Swapping a and b within a pair flips the sign of its difference; under H0 (the factor does
    nothing) every sign pattern is equally likely. Exact when 2^n <= n_resamples.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
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
    # Integer units of the rounded differences (the ones Wilcoxon uses): tied sign patterns tie.
    # Rounding each difference to units moves it by at most half a unit, so sums over patterns
    # that tie exactly (2 steps + 1 step vs 3 steps of 100/n_test) can differ by up to n units:
    # sums within n units of the observed one count as ties. Real distinct sums differ by far more
    # (one test example is ~1e9 units of an accuracy in points).
    units = difference_units(a, b)
    observed = abs(int(units.sum())) - n
    exact = 2**n <= n_resamples
    if exact:
        # every sign pattern once: bit i of the pattern number says whether pair i is flipped
        patterns = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        null = np.abs((1 - 2 * patterns) @ units)
        pvalue = float(np.mean(null >= observed))
    else:
        rng = np.random.default_rng(seed)
        hits = 0
        for start in range(0, n_resamples, 1000):  # in blocks: n_resamples x n signs can be large
            signs = rng.choice(np.array([-1, 1]), size=(min(1000, n_resamples - start), n))
            hits += int(np.sum(np.abs(signs @ units) >= observed))
        # the observed pattern counts as one of the resamples, so p is never 0 (Phipson & Smyth 2010)
        pvalue = (hits + 1) / (n_resamples + 1)
    return PermutationResult(
        statistic=float(np.mean(b - a)), pvalue=pvalue, exact=exact,
        n_resamples=2**n if exact else n_resamples, seed=None if exact else seed,
        method=(f"exact over all {2**n} sign patterns of the rounded differences" if exact
                else f"{n_resamples} random sign patterns (seed {seed}) of the rounded differences"),
    )


@dataclass(frozen=True)
class BootstrapResult(Result):
    low: float | None  # None: not shown (fewer than BOOTSTRAP_MIN_PAIRS pairs in a comparison)
    high: float | None
    confidence_level: float
    method: str  # "studentized", "percentile" (n > LARGE_N) or "none" (nothing to resample, or not shown)
    n_resamples: int
    seed: int
    note: str = ""

    def confidence_interval(self) -> ConfidenceInterval:
        return ConfidenceInterval(self.low, self.high)


def studentized_bootstrap(d, *, confidence_level: float = 0.95, n_resamples: int = 9999, rng=None):
    """Bootstrap-t interval(s) of the mean of d along the last axis (rows = experiments).

    Each resample of the pairs gives t* = (mean* - mean) / se*; the interval is
    mean - q(1 - tail) se ... mean - q(tail) se (Efron & Tibshirani 1993, ch. 12). It pivots on the
    t statistic, so at n = 5..30 it keeps its level where BCa and percentile intervals fall short
    (the audit: BCa covered 88% at n = 10; scripts/bench_stats.py measures this one). A resample
    with se* = 0 gives t* = 0 when its mean equals the observed one, else +-inf.
    """
    rng = np.random.default_rng() if rng is None else rng
    d = np.asarray(d, dtype=float)
    rows = np.atleast_2d(d)
    m, n = rows.shape
    mean = rows.mean(axis=1)
    se = rows.std(axis=1, ddof=1) / math.sqrt(n)
    tail = (1 - confidence_level) / 2
    low, high = np.empty(m), np.empty(m)
    block = max(1, 2_000_000 // (n_resamples * n))  # bound the memory of one block of resamples
    for start in range(0, m, block):
        part = slice(start, min(m, start + block))
        sample = rows[part]
        idx = rng.integers(0, n, size=(sample.shape[0], n_resamples, n))
        resampled = np.take_along_axis(sample[:, None, :], idx, axis=2)
        mean_star = resampled.mean(axis=2)
        se_star = resampled.std(axis=2, ddof=1) / math.sqrt(n)
        gap = mean_star - mean[part, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = np.where(se_star > 0, gap / se_star, np.where(gap == 0, 0.0, np.copysign(np.inf, gap)))
        # no interpolation between order statistics: an infinite t* stays an infinite bound
        q_low, q_high = np.quantile(t_star, [tail, 1 - tail], axis=1, method="inverted_cdf")
        with np.errstate(invalid="ignore"):  # inf * 0 when se = 0: the rows' bounds are the mean
            low[part] = np.where(se[part] > 0, mean[part] - q_high * se[part], mean[part])
            high[part] = np.where(se[part] > 0, mean[part] - q_low * se[part], mean[part])
    if d.ndim == 1:
        return float(low[0]), float(high[0])
    return low, high


# The studentized bootstrap interval is shown from this many pairs. Its coverage depends on the shape of
# the differences, which fewer pairs cannot check: scripts/bench_stats.py (section 3) measures it on
# normal, skewed and heavy-tailed differences at 6 to 30 pairs. With n pairs there are C(2n-1, n)
# distinct resamples, 462 at 6 (fewer than the 9,999 drawn) against 92,378 at 10, so at a few pairs one
# outlying pair decides both tails: 6 differences all below -56 gave [-145, +25].
BOOTSTRAP_MIN_PAIRS = 10


def bootstrap_not_shown(n: int, confidence_level: float, seed: int) -> BootstrapResult:
    """The bootstrap block of a comparison of fewer than BOOTSTRAP_MIN_PAIRS pairs: no interval, and why."""
    return BootstrapResult(
        None, None, confidence_level, "none", 0, seed,
        note=(f"not shown with {n} pairs: the studentized bootstrap interval is shown from {BOOTSTRAP_MIN_PAIRS} "
              f"pairs, where scripts/bench_stats.py measures its coverage; with fewer, its ends depend on one or two "
              f"pairs and on a shape of the differences that {n} pairs cannot check. Read the t interval (and the "
              f"exact sign-flip test's) instead"))


def bootstrap_ci(a, b, *, confidence_level: float = 0.95, n_resamples: int = 9999, seed: int = 0) -> BootstrapResult:
    """Studentized (bootstrap-t) interval of the mean difference, resampling whole pairs."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    a, b = _pairs(a, b)
    d = differences(a, b)
    if _is_constant(d):
        mean = float(np.mean(b - a))
        return BootstrapResult(
            mean, mean, confidence_level, "none", 0, seed,
            note="every difference is the same: each resample has the same mean",
        )
    if len(d) > LARGE_N:
        # At this size the percentile interval agrees with the t interval; fewer resamples do.
        resamples = min(n_resamples, 999)
        res = sps.bootstrap((b - a,), np.mean, vectorized=True, method="percentile",
                            confidence_level=confidence_level, n_resamples=resamples,
                            rng=np.random.default_rng(seed))
        low, high = res.confidence_interval
        return BootstrapResult(float(low), float(high), confidence_level, "percentile", resamples, seed,
                               note=f"n > {LARGE_N}: percentile interval of {resamples} resamples of the differences")
    low, high = studentized_bootstrap(b - a, confidence_level=confidence_level, n_resamples=n_resamples,
                                      rng=np.random.default_rng(seed))
    note = "bootstrap-t: resampled pairs, each resample's mean standardised by its own se"
    if not (math.isfinite(low) and math.isfinite(high)):
        note = _undefined_bootstrap_note(d, confidence_level, low, high)
    return BootstrapResult(low, high, confidence_level, "studentized", n_resamples, seed, note=note)


def _undefined_bootstrap_note(d: np.ndarray, confidence_level: float, low: float, high: float) -> str:
    """Why a bootstrap-t interval has an infinite end, in words (analysis.json shows it as null).

    A resample that draws only equal differences (at n = 3: the same pair three times, 3 of the
    27 equally likely draws) has no spread of its own: se* = 0 and t* = +-inf. When such resamples
    are more likely than the tail a 95% interval cuts off (2.5% each side), that end is infinite.
    """
    n = len(d)
    _, counts = np.unique(d, return_counts=True)
    flat = float(np.sum((counts / n) ** n))  # the chance that a resample has every difference equal
    tail = (1 - confidence_level) / 2
    ends = "both ends" if not (math.isfinite(low) or math.isfinite(high)) else (
        "the lower end" if not math.isfinite(low) else "the upper end")
    return (
        f"not defined with {n} pairs: {ends} infinite. A resample of {n} pairs draws only equal differences "
        f"(one pair {n} times{', or pairs whose differences are equal' if len(counts) < n else ''}) with chance "
        f"{flat:.3g}; such a resample has no spread of its own (se* = 0), so its t* is +inf or -inf, and "
        f"these are more likely than the {tail:.3g} a {confidence_level:.0%} interval cuts off in "
        f"{'each tail' if ends == 'both ends' else 'a tail'}. With 4 or more "
        f"distinct differences the chance is at most {4.0 ** -3:.3g} and the interval is finite; "
        f"read the t interval instead"
    )


def effect_size_dz(a, b) -> float | None:
    """Cohen's d_z = mean(d) / sd(d); None when the differences do not vary (it is undefined)."""
    d = differences(a, b)
    if _is_constant(d):
        return None
    return float(d.mean() / d.std(ddof=1))


"""The verdict: every arm against the baseline, from the tests below it in the package.

A claim is made only when its own error rate is at most alpha (docs/statistics.md):

- the exact sign-flip test of the same claim on the same differences bounds every p-value from
  below: a verdict never claims more than that distribution-free test does (3 pairs: p >= 0.25,
  whatever the t test says; 6 of 7 seeds one test example up: p = 0.125, though t says 0.02);
- with k comparisons against the baseline each claim is tested at alpha / k (Bonferroni), and
  the interval shown with it is the t interval at that same level, so interval and decision agree;
- a claim about an estimated (auto) margin spends half of alpha on the margin's chi-square bound
  and half on the test, so its error rate at the boundary stays at most alpha.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np

from ._core import ConfidenceInterval, Result, _is_constant, _pairs, difference_units, differences
from .margins import Margin, MinimumEffectResult, TOSTResult, minimum_effect_test, resolve_margin, tost
from .noise import NoiseFloor, TestSetNoise, noise_floor, test_set_noise
from .paired import (
    BOOTSTRAP_MIN_PAIRS, BootstrapResult, PermutationResult, TTestResult, WilcoxonResult, bootstrap_ci,
    bootstrap_not_shown, effect_size_dz,
    paired_t, sign_flip_permutation, welch_t, wilcoxon_signed_rank,
)
from .decision_p import (
    _tail, decision_pvalues, exact_sign_flip_pvalues, sign_flip_floor,
)
from .power.seeds_needed import SeedsNeeded, seeds_needed_for
from .verdict_words import beyond_test_set_sentence, verdict_sentence

VERDICTS = ("identical", "better", "worse", "smaller_than_margin", "equivalent", "differs", "undecided")
DIFFERS = ("better", "worse", "smaller_than_margin", "differs")  # the test against 0 rejected


def decide(p_zero, p_beyond, p_equivalent, mean_diff, alpha: float = 0.05, *, identical=False,
           higher_is_better: bool = True):
    """The verdict code(s) from the three decision p-values; works elementwise on arrays.

    p_zero: effect = 0; p_beyond: the minimum-effect test; p_equivalent: TOST. Pass the decision
    p-values (``decision_pvalues``), which carry the floors and adjustments.
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
class DecisionInterval(Result):
    """The t interval a claim is decided by: at ``level``, against ``margin`` (None: against 0)."""

    low: float
    high: float
    level: float
    margin: float | None
    about: str

    def confidence_interval(self) -> ConfidenceInterval:
        return ConfidenceInterval(self.low, self.high)


@dataclass(frozen=True)
class Verdict(Result):
    code: str
    sentence: str
    beyond_test_set: str = ""  # would it hold on a new test set? (only with per-example records)


@dataclass(frozen=True)
class PairedComparison(Result):
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
    minimum_effect: MinimumEffectResult  # against margin.high (the margin for a given one)
    tost: TOSTResult  # against margin.low (the margin for a given one)
    seeds_needed: SeedsNeeded
    alpha: float
    n_moved: int  # pairs whose difference is not 0
    n_comparisons: int = 1
    p_decision: dict | None = None  # zero / beyond / equivalent: what the verdict compares with alpha
    floors: dict | None = None  # the sign-flip floors of those p-values (before adjustment)
    # zero / beyond / equivalent: the exact sign-flip p of each claim's test on the same differences
    # (before adjustment); each decision p-value is at least it
    sign_flip_p: dict | None = None
    intervals: dict | None = None  # zero / beyond / equivalent: DecisionInterval
    test_set: TestSetNoise | None = None  # the test set's own noise, when examples were recorded
    verdict: Verdict | None = None

    def confidence_interval(self) -> ConfidenceInterval:
        """The interval the verdict about 0 is decided by (at the adjusted level)."""
        return self.intervals["zero"].confidence_interval()


def _margin_share(margin: Margin, alpha: float) -> float:
    return (alpha - margin.bound_alpha) / alpha


def _exact_bound(d, null: float, level: float, sides: int, upper: bool) -> float:
    """The end, on the side of ``null``, of the exact sign-flip confidence set at ``level``: the
    means mu whose one-sided test (x ``sides`` for a doubled two-sided p) does not reject.

    The one-sided p of "mean = mu" is non-decreasing as mu moves towards the data (it counts the
    subset means on the far side of mu, Hartigan 1969), so the end is found by bisection between
    a mu beyond every difference (rejected: p = 2^-n) and ``null``, which the caller knows is not
    rejected. -inf (+inf for ``upper``) when the test can reject nothing at that level."""
    if upper:
        return -_exact_bound(-np.asarray(d), -null, level, sides, False)
    d = np.asarray(d, dtype=float)
    if sides * 2.0 ** -len(d) >= level:
        return -np.inf
    spread = max(float(np.ptp(d)), abs(null), 1e-300)
    rejected, accepted = float(d.min()) - spread, float(null)
    for _ in range(200):
        if accepted - rejected <= 1e-12 * spread:
            break
        mid = 0.5 * (rejected + accepted)
        if sides * float(_tail(d - mid)[0]) >= level:
            accepted = mid
        else:
            rejected = mid
    return accepted


def _intervals(t: TTestResult, margin: Margin, alpha: float, k: int, d=None, p: dict | None = None) -> dict:
    """The intervals each claim is decided by, at the level its adjusted test uses.

    Each is the t interval at that level. Where the exact sign-flip test does not reject what the t
    interval excludes (the decision p-value, ``p``, is the larger of the two), the end facing the
    null is moved to the exact test's own bound (``_exact_bound``; ``d``: the differences), so an
    interval that excludes the null always comes with a claim, and the reverse."""
    zero_level = 1 - alpha / k
    margin_alpha = alpha * _margin_share(margin, alpha) / k
    adjusted = f", adjusted for {k} comparisons" if k > 1 else ""
    estimated = " (margin estimated from the data: its upper bound)" if margin.estimated else ""
    estimated_low = " (margin estimated from the data: its lower bound)" if margin.estimated else ""
    widened = "; the end facing {} moved to the exact sign-flip test's bound, which does not exclude it"
    out = {}
    for name, level, m, about in (
        ("zero", zero_level, None, f"two-sided t interval{adjusted}: excludes 0 when the difference is real"),
        ("beyond", 1 - margin_alpha, margin.high,
         f"two-sided t interval{adjusted}: outside ±margin{estimated} when beyond it"),
        ("equivalent", 1 - 2 * margin_alpha, margin.low,
         f"TOST's (1 - 2 alpha) t interval{adjusted}: inside ±margin{estimated_low} when equivalent"),
    ):
        low, high = t.confidence_interval(level)
        if p is not None and d is not None and not p[name] < alpha:
            if name == "equivalent":
                test = (1 - level) / 2  # each of TOST's one-sided tests
                if -m < low and high < m:  # TOST by t says equivalent; the exact test did not
                    if float(_tail(d + m)[0]) >= test:
                        low = _exact_bound(d, -m, test, 1, False)
                    if float(_tail(-(d - m))[0]) >= test:
                        high = _exact_bound(d, m, test, 1, True)
                    about += widened.format("±margin")
            else:
                test = 1 - level  # the two-sided test: its one-sided p doubled
                null = 0.0 if m is None else m
                if low > null:
                    low = _exact_bound(d, null, test, 2, False)
                    about += widened.format("0" if m is None else "the margin")
                elif high < -null:
                    high = _exact_bound(d, -null, test, 2, True)
                    about += widened.format("0" if m is None else "the margin")
        out[name] = DecisionInterval(float(low), float(high), level, m, about)
    return out


def _compare_unadjusted(a, b, *, arm: str, baseline: str, margin: Margin, alpha: float,
                        n_resamples: int, seed: int, n_test: int | None, examples,
                        n_comparisons: int = 1) -> PairedComparison:
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
        bootstrap=(bootstrap_ci(a, b, confidence_level=level, n_resamples=n_resamples, seed=seed)
                   if len(d) >= BOOTSTRAP_MIN_PAIRS or _is_constant(d) else bootstrap_not_shown(len(d), level, seed)),
        welch=welch_t(a, b, confidence_level=level),
        d_z=effect_size_dz(a, b), margin=margin,
        minimum_effect=minimum_effect_test(d, margin.high),
        tost=tost(d, margin.low),
        # at the level the verdict decides each claim at: alpha / k, the margin's share of alpha
        seeds_needed=seeds_needed_for(mean_diff, noise.std_diff, margin, alpha=alpha, n=len(d),
                                      n_comparisons=n_comparisons),
        alpha=alpha, n_moved=int(np.sum(difference_units(a, b) != 0)),
        test_set=test_set_noise(*examples, confidence_level=level) if examples is not None else None,
    )


def compare_to_baseline(pairs: Mapping[str, tuple], *, margin, baseline: str = "A", alpha: float = 0.05,
                        n_resamples: int = 9999, seed: int = 0, n_test: int | None = None,
                        unit: str = "", higher_is_better: bool = True,
                        examples: Mapping[str, tuple] | None = None,
                        n_comparisons: int | None = None) -> dict[str, PairedComparison]:
    """Each arm against the baseline; with k arms each claim is tested at alpha / k (k is
    ``n_comparisons`` when the family holds claims decided elsewhere too, e.g. by diverged runs).

    ``pairs`` maps arm -> (baseline values, arm values), paired by position. ``margin`` is a
    number or a resolved Margin (one margin for the whole family of comparisons). ``examples``
    (optional) maps arm -> (baseline correctness, arm correctness), each a seeds x test-examples
    bool array in the same seed order: the test set's own noise is then estimated too.
    """
    if not pairs:
        raise ValueError("compare_to_baseline needs at least one arm to compare.")
    if isinstance(margin, str):
        raise ValueError(
            'compare_to_baseline needs the margin as a number or a Margin; for "auto" call '
            'resolve_margin("auto", [values of each arm]) first (compare() does this for two arms).'
        )
    if not isinstance(margin, Margin):
        margin = resolve_margin(margin, unit=unit, alpha=alpha)
    examples = examples or {}
    k = max(len(pairs), n_comparisons or 0)
    raw = {
        arm: _compare_unadjusted(a, b, arm=arm, baseline=baseline, margin=margin, alpha=alpha,
                                 n_resamples=n_resamples, seed=seed, n_test=n_test,
                                 examples=examples.get(arm), n_comparisons=k)
        for arm, (a, b) in pairs.items()
    }
    share = _margin_share(margin, alpha)
    out = {}
    for arm, c in raw.items():
        d = differences(*pairs[arm])
        exact = exact_sign_flip_pvalues(d, margin_beyond=margin.high, margin_equivalent=margin.low)
        p = decision_pvalues(d, margin_beyond=margin.high, margin_equivalent=margin.low, margin_share=share,
                             n_comparisons=k, n_moved=c.n_moved, sign_flip_p=exact,
                             t_p={"beyond": c.minimum_effect.pvalue, "equivalent": c.tost.pvalue})
        floors = {"zero": sign_flip_floor(c.n_moved), "beyond": sign_flip_floor(c.n),
                  "equivalent": sign_flip_floor(c.n, False)}
        c = replace(c, n_comparisons=k, p_decision=p, floors=floors, sign_flip_p=exact,
                    intervals=_intervals(c.t, margin, alpha, k, d=d, p=p))
        code = decide(p["zero"], p["beyond"], p["equivalent"], c.mean_diff, alpha,
                      identical=c.identical, higher_is_better=higher_is_better)
        sentence = verdict_sentence(c, code, unit=unit, higher_is_better=higher_is_better)
        c = replace(c, verdict=Verdict(code, sentence))
        beyond = beyond_test_set_sentence(c, unit=unit, higher_is_better=higher_is_better)
        out[arm] = replace(c, verdict=Verdict(code, sentence, beyond))
    return out


def compare(a, b, *, margin="auto", alpha: float = 0.05, n_resamples: int = 9999, seed: int = 0,
            n_test: int | None = None, arm: str = "B", baseline: str = "A", unit: str = "",
            higher_is_better: bool = True, examples: tuple | None = None) -> PairedComparison:
    """One arm against one baseline; ``margin="auto"`` pools the seed std of a and b."""
    a, b = _pairs(a, b)
    if not isinstance(margin, Margin):
        margin = resolve_margin(margin, [a, b], unit=unit, alpha=alpha,
                                resolution=100.0 / n_test if n_test else None)
    return compare_to_baseline(
        {arm: (a, b)}, margin=margin, baseline=baseline, alpha=alpha, n_resamples=n_resamples,
        seed=seed, n_test=n_test, unit=unit, higher_is_better=higher_is_better,
        examples={arm: examples} if examples is not None else None,
    )[arm]

"""The verdict: every arm against the baseline, from the tests below it in the package."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np

from ._core import _is_constant, _pairs, differences
from .margins import Margin, holm, minimum_effect_test, resolve_margin, tost
from .noise import NoiseFloor, noise_floor
from .paired import (
    BootstrapResult, PermutationResult, TTestResult, WilcoxonResult, bootstrap_ci, effect_size_dz,
    paired_t, sign_flip_permutation, welch_t, wilcoxon_signed_rank,
)
from .power import SeedsNeeded, seeds_needed_for

VERDICTS = ("identical", "better", "worse", "smaller_than_margin", "equivalent", "differs", "undecided")
DIFFERS = ("better", "worse", "smaller_than_margin", "differs")  # the t test against 0 rejected


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

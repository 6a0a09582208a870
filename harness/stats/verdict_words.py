"""The verdict in plain words, with the numbers that support it. Reads a PairedComparison (duck
typed, so this module imports nothing above the bottom of the package)."""

from __future__ import annotations

import math

from ._core import ZERO_END


def _p(p: float) -> str:
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}"


def _num(x: float) -> str:
    return f"{x:+.3g}"




def _ends(low: float, high: float) -> tuple[str, str]:
    """The two ends of an interval in words: an end at 0 up to rounding reads "0", not "+7.11e-09"."""
    scale = sum(abs(x) for x in (low, high) if x is not None and math.isfinite(x))
    return tuple("0" if x is not None and math.isfinite(x) and abs(x) <= ZERO_END * scale else _num(x)
                 for x in (low, high))


def _seeds(n: int | None) -> str:
    return "more than a million" if n is None else str(n)


def _level(level: float) -> str:
    text = f"{100 * level:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _interval(iv, u: str) -> str:
    low, high = _ends(iv.low, iv.high)
    text = f"{_level(iv.level)} CI {low} to {high}{u}"
    if any(x is not None and math.isinf(x) for x in (iv.low, iv.high)):  # said here, not only in report.md
        text += ("; an infinite end: with so few pairs the exact sign-flip test rejects no effect on that side "
                 "at this level, so nothing bounds it")
    return text


def _seed_range(n, rng) -> str:
    low, high = rng
    if low is None and high is None:
        return _seeds(n)
    return f"{_seeds(n)} (from {_seeds(low)} to {_seeds(high)} over the sd's 95% interval)"


def _pvalues(c, name: str, raw: float) -> str:
    """The raw p-value and the one the decision used, both labelled."""
    used = c.p_decision[name]
    if abs(used - raw) <= 1e-9 * max(1.0, raw):  # the same test; rounding of d aside
        return _p(raw)
    return f"raw {_p(raw)}, decision {_p(used)}"


def _floor_note(c) -> str:
    """Why no claim was made although the t test alone would have made one, if that is the case."""
    k = c.n_comparisons
    floor = c.floors["zero"]
    if k * floor < c.alpha:
        return ""
    return (
        f" With {c.n_moved} pair(s) that moved, the exact sign-flip test cannot reach a p-value below "
        f"{floor:.2g}" + (f" ({k * floor:.2g} over {k} comparisons)" if k > 1 else "")
        + f", so no claim at alpha {c.alpha:g} is possible whatever the t test says"
        + (" (its p = 0 only reflects that the differences do not vary)" if c.exact else "")
        + "; run more seeds."
    )


_CLAIMS = {"zero": "a difference from 0", "beyond": "a difference beyond the margin",
           "equivalent": "equivalence within the margin"}


def _exact_note(c) -> str:
    """Which claims the t test alone would have made but the exact sign-flip test on the same
    differences did not (their decision p-value is the exact test's), if any."""
    exact = getattr(c, "sign_flip_p", None)
    if not exact or c.n_comparisons * c.floors["zero"] >= c.alpha:  # the floor note says it already
        return ""
    share = (c.alpha - c.margin.bound_alpha) / c.alpha
    raw = {"zero": c.t.pvalue, "beyond": c.minimum_effect.pvalue, "equivalent": c.tost.pvalue}
    notes = []
    for name, p in raw.items():
        scale = c.n_comparisons / (1.0 if name == "zero" else share)
        by_t = min(1.0, scale * max(p, c.floors[name]))
        if by_t < c.alpha <= c.p_decision[name]:
            notes.append(f"{_CLAIMS[name]} (t-based decision {_p(by_t)}; exact sign-flip p = {exact[name]:.2g}"
                         + (f", decision {_p(c.p_decision[name])}"
                            if abs(c.p_decision[name] - exact[name]) > 1e-12 else "")
                         + ")")
    if not notes:
        return ""
    return (f" The t test alone would claim {'; and '.join(notes)}: the exact sign-flip test on the same "
            f"{c.n} differences does not reach alpha {c.alpha:g}, so no such claim; run more seeds.")


def verdict_sentence(c, code: str, *, unit: str = "", higher_is_better: bool = True) -> str:
    """The verdict in plain words, with the numbers and intervals that decided it."""
    arm, base, u = c.arm, c.baseline, unit
    m = c.margin
    improved = c.mean_diff > 0 if higher_is_better else c.mean_diff < 0
    word = "better" if improved else "worse"
    iv = c.intervals
    effect = f"{arm} - {base} = {_num(c.mean_diff)}{u}"
    beyond_m = f"±{m.high:.3g}{u}" + (" (upper bound of the estimated margin)" if m.estimated else "")
    within_m = f"±{m.low:.3g}{u}" + (" (lower bound of the estimated margin)" if m.estimated else "")

    if code == "identical":
        return (
            f"identical results: the factor did not change the numerics ({arm} and {base} gave "
            f"exactly the same value in all {c.n} seeds)."
        )
    if m.none and code in ("better", "worse", "differs", "undecided"):
        s = _without_margin(c, code, word, effect, u)
    elif code in ("better", "worse"):
        s = (f"{arm} is {word} than {base} beyond the margin: {effect} ({_interval(iv['beyond'], u)}), "
             f"more than {beyond_m} (minimum-effect test {_pvalues(c, 'beyond', c.minimum_effect.pvalue)}).")
    elif code == "smaller_than_margin":
        s = (
            f"a real difference smaller than the margin: {arm} is {word} than {base}, {effect} "
            f"({_interval(iv['zero'], u)}; {_pvalues(c, 'zero', c.t.pvalue)}), but inside {within_m} "
            f"(equivalence by TOST, {_interval(iv['equivalent'], u)}; {_pvalues(c, 'equivalent', c.tost.pvalue)})."
        )
    elif code == "equivalent":
        s = (
            f"equivalent within {within_m}: {effect} ({_interval(iv['equivalent'], u)}; TOST "
            f"{_pvalues(c, 'equivalent', c.tost.pvalue)}); a difference this small does not matter by the margin."
        )
    elif code == "differs":
        need = c.seeds_needed
        if need.to_settle_margin is None and abs(c.mean_diff) == m.value:
            settle = "more seeds cannot settle it: the observed difference sits on the margin"
        else:
            settle = (
                f"if the true difference is {_num(c.mean_diff)}{u}, about "
                f"{_seed_range(need.to_settle_margin, need.to_settle_margin_range)} seeds would settle "
                f"that with {need.power:.0%} power"
            )
        s = (
            f"{arm} is {word} than {base}, {effect} ({_interval(iv['zero'], u)}; t test against 0 "
            f"{_pvalues(c, 'zero', c.t.pvalue)}), but whether by more than the margin is undecided; {settle}."
        )
    else:
        need = c.seeds_needed
        if c.exact:  # sd 0: there is no noise to plan seeds for
            at_margin = "seeds needed cannot be planned from differences that do not vary"
            at_observed = "more seeds will show whether they ever do"
        elif m.value > 0:
            at_margin = (
                f"about {_seed_range(need.at_margin, need.at_margin_range)} seeds would give {need.power:.0%} "
                f"power to detect a true difference as large as the margin ({m.value:.3g}{u})"
            )
        else:
            at_margin = "with a margin of 0 equivalence cannot be shown"
        if not c.exact:
            at_observed = (
                f"{_seed_range(need.at_observed, need.at_observed_range)} to detect one as large as the "
                f"observed {_num(c.mean_diff)}{u}"
                if c.mean_diff != 0 else "an observed difference of exactly 0 gives no effect size to plan for"
            )
        s = (
            f"undecided: {effect} ({_interval(iv['zero'], u)}; t test against 0 {_pvalues(c, 'zero', c.t.pvalue)}); "
            f"the data show neither a difference nor equivalence within {within_m}, and a non-significant "
            f"test is not evidence of no effect; {at_margin}, {at_observed}."
        )
        s += _floor_note(c)
    s += _exact_note(c)
    if c.exact and not c.identical:
        s += (
            f" Every seed moved by the same {_num(c.mean_diff)}{u} (sd of the differences 0): the t test "
            f"has no seed noise to test against, so the decision rests on the exact sign-flip test "
            f"(p = {c.floors['zero']:.2g} at best with {c.n_moved} pairs)."
        )
    if m.estimated:
        s += (f" This verdict rests on a margin ESTIMATED FROM THE DATA ({m.value:.3g}{u}, the seed std; "
              f"bounds {m.low:.3g} to {m.high:.3g}{u}); declare a margin for a claim that does not.")
    if c.n_comparisons > 1:
        s += (f" (Each claim tested at alpha / {c.n_comparisons} = {c.alpha / c.n_comparisons:.3g}, "
              f"Bonferroni over {c.n_comparisons} comparisons; intervals at that level.)")
    return s


def _without_margin(c, code: str, word: str, effect: str, u: str) -> str:
    """The verdicts that need no margin: better or worse by the test against 0 (the minimum-effect
    test at 0), or no detectable difference; no equivalence claim."""
    arm, base, iv = c.arm, c.baseline, c.intervals
    none = "no margin was declared for this metric, so no claim of equivalence can be made"
    if code in ("better", "worse"):
        return (f"{arm} is {word} than {base}: {effect} ({_interval(iv['beyond'], u)}), a difference from 0 "
                f"(two-sided test against 0 {_pvalues(c, 'beyond', c.minimum_effect.pvalue)}); {none}.")
    if code == "differs":
        return (f"{arm} is {word} than {base} by the t test against 0, {effect} ({_interval(iv['zero'], u)}; "
                f"{_pvalues(c, 'zero', c.t.pvalue)}), but the two-sided test against 0 that decides better or worse "
                f"({_pvalues(c, 'beyond', c.minimum_effect.pvalue)}) does not confirm it; {none}.")
    need = c.seeds_needed
    if c.exact:
        plan = "seeds needed cannot be planned from differences that do not vary"
    elif c.mean_diff == 0:
        plan = "an observed difference of exactly 0 gives no effect size to plan for"
    else:
        plan = (f"about {_seed_range(need.at_observed, need.at_observed_range)} seeds would give {need.power:.0%} "
                f"power to detect a true difference as large as the observed {_num(c.mean_diff)}{u}")
    return (f"no detectable difference: {effect} ({_interval(iv['zero'], u)}; t test against 0 "
            f"{_pvalues(c, 'zero', c.t.pvalue)}); a non-significant test is not evidence of no effect, and {none}; "
            f"{plan}." + _floor_note(c))


def beyond_test_set_sentence(c, *, unit: str = "", higher_is_better: bool = True) -> str:
    """Would the effect hold on a new test set from the same distribution? From TestSetNoise."""
    ts = c.test_set
    if ts is None:
        return ""
    level = c.intervals["zero"].level
    low, high = ts.confidence_interval(level)
    u = unit
    numbers = (
        f"test-set SE {ts.se_test_set:.3g}{u} beside seed SE {ts.se_seeds:.3g}{u}; for the data distribution "
        f"(seeds x test examples) {_level(level)} CI {' to '.join(_ends(low, high))}{u}, df {ts.df:.3g}"
    )
    code = c.verdict.code if c.verdict is not None else ""
    if code in ("identical", "equivalent", "undecided"):
        return f"beyond this test set: no difference was claimed on it; {numbers}."
    positive = low > 0
    negative = high < 0
    if positive or negative:
        improved = positive if higher_is_better else negative
        holds = f"the {'gain' if improved else 'loss'} would hold on new test data from the same distribution"
        if code in ("better", "worse") and not (low > c.margin.high or high < -c.margin.high):
            holds += ", though not clearly beyond the margin"
        return f"beyond this test set: {holds} ({numbers})."
    return (f"beyond this test set: NOT shown, the difference may be specific to this test set: the "
            f"interval for the data distribution includes 0 ({numbers}).")

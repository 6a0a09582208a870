"""The fixed-N verdict and the exact sign-flip test (issue 24, defect B).

decision p-values were only raised to the sign-flip *floor* (the smallest p n pairs can reach);
the exact test itself never ran. With per-seed differences of +-1 test example under the null the
verdict claimed a difference in 0.030 / 0.124 / 0.071 / 0.020 / 0.038 of experiments at 6 / 7 / 8 /
10 / 12 seeds (alpha 0.05): 6 of 7 seeds at +1 pass the t test, but the exact two-sided p is 0.125.
Every claim's decision p-value is now at least the exact sign-flip p on the same differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import stats
from harness.stats.sign_flip import sign_flip_tail

ALPHA = 0.05
SIMS = 20_000
STEP = 100 / 450  # one test example of a 450-example test set, in points


def _limit(n=SIMS):
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / n)


def _codes(d, margin, **kw):
    p = stats.decision_pvalues(d, margin_beyond=margin, margin_equivalent=margin, **kw)
    return stats.decide(p["zero"], p["beyond"], p["equivalent"], d.mean(axis=-1), ALPHA)


@pytest.mark.parametrize("n", [6, 7, 8, 10, 12])
def test_one_example_differences_under_the_null_claim_at_most_alpha(n):
    d = np.random.default_rng(n).choice([-STEP, STEP], (SIMS, n))
    codes = _codes(d, 2 * STEP, alpha=ALPHA)  # a declared margin of two test examples
    assert np.isin(codes, stats.DIFFERS).mean() <= _limit()


def test_the_fast_path_for_simulations_gives_the_same_decisions():
    rng = np.random.default_rng(1)
    d = np.concatenate([rng.choice([-STEP, STEP], (300, 7)), rng.integers(-2, 4, (300, 7)) * STEP,
                        rng.normal(0.4, 1.0, (300, 7))])
    for margin, kw in ((STEP, {}), (0.5, {"n_comparisons": 3}), (0.3, {"margin_share": 0.5})):
        full = _codes(d, margin, **kw)
        fast = _codes(d, margin, alpha=ALPHA, **kw)
        assert (full == fast).all()


def test_six_of_seven_seeds_one_example_up_is_not_a_difference():
    a = np.round((95 + np.random.default_rng(2).normal(0, 0.6, 7)) * 4.5) / 4.5
    b = a + np.array([1, 1, 1, 1, 1, 1, -1]) * STEP
    c = stats.compare(a, b, margin=0.05, n_resamples=199)
    assert c.t.pvalue < 0.05  # the t test alone claims
    assert c.sign_flip_p["zero"] == pytest.approx(0.125)  # 2 * (1 + 7) / 128
    assert c.p_decision["zero"] == pytest.approx(0.125) and c.verdict.code == "undecided"
    assert "exact sign-flip test" in c.verdict.sentence and "0.12" in c.verdict.sentence
    # the interval that decides it reaches 0: interval and decision agree
    assert c.intervals["zero"].low <= 0 < c.intervals["zero"].high


def _exact(d, mb, me):
    tail = sign_flip_tail
    return {"zero": min(1.0, 2 * min(tail(d), tail(-d))),
            "beyond": min(1.0, 2 * min(tail(d - mb), tail(-(d + mb)))),
            "equivalent": max(tail(d + me), tail(-(d - me)))}


def test_every_decision_p_value_is_at_least_the_exact_sign_flip_p():
    rng = np.random.default_rng(3)
    seen = set()
    for trial in range(60):
        n = int(rng.integers(4, 13))
        a = np.round((95 + rng.normal(0, 0.6, n)) * 4.5) / 4.5
        b = a + rng.integers(-1, 3, n) * STEP if trial % 2 else a + rng.normal(0.3, 0.4, n)
        if np.array_equal(a, b):
            continue
        margin = "auto" if trial % 3 == 0 else 0.25
        c = stats.compare(a, b, margin=margin, n_resamples=199)
        exact = _exact(stats.differences(a, b), c.margin.high, c.margin.low)
        share = (ALPHA - c.margin.bound_alpha) / ALPHA
        for name, p in exact.items():
            assert c.sign_flip_p[name] == pytest.approx(p, abs=1e-12), name
            adjust = 1.0 if name == "zero" else 1 / share
            assert c.p_decision[name] >= min(1.0, adjust * p) - 1e-12, name
        seen.add(c.verdict.code)
    assert len(seen) >= 3


@pytest.mark.slow
def test_intervals_agree_with_decisions_when_the_exact_test_vetoes():
    rng = np.random.default_rng(4)
    vetoed = 0
    for trial in range(150):
        n = int(rng.integers(5, 11))
        a = np.round((95 + rng.normal(0, 0.6, n)) * 4.5) / 4.5
        b = a + rng.choice([-1, 1, 1, 2], n) * STEP
        if np.array_equal(a, b):
            continue
        for k, pairs in ((1, {"B": (a, b)}), (2, {"B": (a, b), "C": (a, a + rng.choice([-1, 1], n) * STEP)})):
            margin = 0.5 * STEP
            for c in stats.compare_to_baseline(pairs, margin=margin, n_resamples=99).values():
                code = c.verdict.code
                zero, beyond, within = (c.intervals[x] for x in ("zero", "beyond", "equivalent"))
                assert (code in stats.DIFFERS) == (zero.low > 0 or zero.high < 0)
                assert (code in ("better", "worse")) == (beyond.low > margin or beyond.high < -margin)
                inside = -margin < within.low and within.high < margin
                assert (code in ("equivalent", "smaller_than_margin")) == inside
                t_low, t_high = c.t.confidence_interval(zero.level)
                vetoed += (t_low > 0 or t_high < 0) and code not in stats.DIFFERS
    assert vetoed >= 5  # the cases this test is about did occur


# -- issue 33, item 2: the count is exact up to EXACT_N pairs ------------------------------------


def _enumerated_tail(e) -> float:
    """An independent full enumeration: the sum of every one of the 2^n sign patterns, listed."""
    e = np.asarray(e, dtype=float)
    sums = np.zeros(1)
    for x in np.abs(e):
        sums = np.concatenate([sums + x, sums - x])  # each pattern with this pair's sign + or -
    tie = 1e-9 * max(abs(e.sum()), np.abs(e).max())
    return float(np.mean(sums >= e.sum() - tie))


@pytest.mark.parametrize("n", range(1, 21))
def test_the_sign_flip_p_is_exact_for_every_n_up_to_20_on_continuous_data(n):
    from harness.stats.sign_flip import EXACT_N, sign_flip_method, sign_flip_reaches

    rng = np.random.default_rng(100 + n)
    rows = rng.normal(0.3, 1.0, (6 if n <= 16 else 2, n))  # continuous: off any lattice
    for e in rows:
        exact = _enumerated_tail(e)
        assert sign_flip_tail(e) == pytest.approx(exact, rel=0, abs=1e-12)
        # the decision at a level a hair above and below the exact p agrees with it
        assert sign_flip_reaches(e, exact * (1 + 1e-9)) and not sign_flip_reaches(e, exact * (1 - 1e-6))
    assert n <= EXACT_N and sign_flip_method(n) == "exact"


def test_above_the_exact_range_the_p_is_an_upper_bound_and_said_so():
    from harness.stats.sign_flip import EXACT_N, sign_flip_method

    assert sign_flip_method(EXACT_N + 1) == "upper bound" and sign_flip_method(1001) == "normal limit"
    # the reported 52/1024 against the exact 50/1024 (issue 33): now exact on 10 pairs
    e = np.random.default_rng(3).normal(0.5, 1.0, (2000, 10))
    exact = np.array([_enumerated_tail(row) for row in e[:200]])
    assert np.array_equal(np.round(sign_flip_tail(e[:200]) * 1024), np.round(exact * 1024))

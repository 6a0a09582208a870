"""harness.stats against independent references: statsmodels, textbook numbers, brute force,
and a vectorised simulation of the verdict's error rate and power."""

import dataclasses
import itertools
import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import DescrStatsW, ttest_ind, ttost_paired

from harness import stats

# Fixed paired data (accuracy points, multiples of 100/360 as a 360-example test set gives).
A = np.round(np.array([95.0, 94.72, 95.83, 96.11, 94.44, 95.28, 95.56, 94.17, 95.83, 95.0]) * 3.6) / 3.6
B = np.round((A + np.array([0.56, 0.28, 0.83, 0.0, 0.56, 1.11, 0.28, 0.56, -0.28, 0.83])) * 3.6) / 3.6


def _no_nan(obj):
    """True when no float anywhere inside (dataclasses, dicts, lists) is NaN."""
    if dataclasses.is_dataclass(obj):
        return all(_no_nan(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return all(_no_nan(v) for v in obj.values())
    if isinstance(obj, (list, tuple, np.ndarray)):
        return all(_no_nan(v) for v in obj)
    if isinstance(obj, (float, np.floating)):
        return not math.isnan(obj)
    return True


# -- t tests against references -----------------------------------------------------------------


def test_paired_t_textbook_numbers():
    # d = 1..5: mean 3, sd sqrt(2.5), se = sqrt(2.5/5) = 0.70711, t = 3 / 0.70711 = 4.2426, df 4;
    # t(0.975, 4) = 2.7764 from the table, so the 95% CI is 3 -+ 1.9632; two-sided p = 0.0132.
    a = np.array([10.0, 10.0, 10.0, 10.0, 10.0])
    r = stats.paired_t(a, a + np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert r.statistic == pytest.approx(4.2426, abs=1e-4)
    assert r.df == 4
    assert r.pvalue == pytest.approx(0.0132, abs=1e-4)
    low, high = r.confidence_interval()
    assert low == pytest.approx(3 - 1.9632, abs=1e-4)
    assert high == pytest.approx(3 + 1.9632, abs=1e-4)


def test_paired_t_matches_statsmodels():
    d = B - A
    t, p, df = DescrStatsW(d).ttest_mean(0)
    r = stats.paired_t(A, B)
    assert r.statistic == pytest.approx(t, rel=1e-9)
    assert r.pvalue == pytest.approx(p, rel=1e-9)
    assert r.df == df
    assert r.confidence_interval() == pytest.approx(DescrStatsW(d).tconfint_mean(alpha=0.05), rel=1e-9)
    assert r.confidence_interval(0.9) == pytest.approx(DescrStatsW(d).tconfint_mean(alpha=0.1), rel=1e-9)


def test_welch_matches_statsmodels_and_differs_from_paired():
    t, p, df = ttest_ind(B, A, usevar="unequal")
    r = stats.welch_t(A, B)
    assert (r.statistic, r.pvalue, r.df) == pytest.approx((t, p, df), rel=1e-9)
    # the arms share most of their seed noise, so ignoring the pairing loses most of the evidence
    assert r.pvalue > 10 * stats.paired_t(A, B).pvalue


def test_welch_with_one_constant_arm_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = stats.welch_t([95.0, 95.0, 95.0], [95.0, 96.0, 97.0])
    t, p, df = ttest_ind([95.0, 96.0, 97.0], [95.0, 95.0, 95.0], usevar="unequal")
    assert (r.statistic, r.pvalue, r.df) == pytest.approx((t, p, df), rel=1e-9)


def test_tost_textbook_numbers_and_statsmodels():
    # d = 1..5, margin 4: t against +4 is (3 - 4) / 0.70711 = -1.4142, one-sided p = 0.1151;
    # against -4 it is 9.8995, p = 0.0003. TOST's p is the larger: 0.1151, not equivalent.
    d = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    r = stats.tost(d, 4.0)
    assert r.p_upper == pytest.approx(0.1151, abs=1e-4)
    assert r.p_lower == pytest.approx(0.0003, abs=1e-4)
    assert r.pvalue == r.p_upper
    for margin in (0.3, 0.6, 1.0):
        p, lower, upper = ttost_paired(B, A, -margin, margin)
        r = stats.tost(stats.differences(A, B), margin)
        assert r.pvalue == pytest.approx(p, rel=1e-9)
        assert r.p_lower == pytest.approx(lower[1], rel=1e-9)
        assert r.p_upper == pytest.approx(upper[1], rel=1e-9)


def test_minimum_effect_matches_one_sided_tests_and_the_interval():
    d = stats.differences(A, B)
    for margin in (0.0, 0.1, 0.3, 0.6):
        r = stats.minimum_effect_test(d, margin)
        _, p_above, _ = DescrStatsW(d).ttest_mean(margin, alternative="larger")
        _, p_below, _ = DescrStatsW(d).ttest_mean(-margin, alternative="smaller")
        assert r.p_above == pytest.approx(p_above, rel=1e-9)
        assert r.p_below == pytest.approx(p_below, rel=1e-9)
        # rejects exactly when the 95% t interval lies beyond the margin
        low, high = DescrStatsW(d).tconfint_mean(alpha=0.05)
        assert (r.pvalue < 0.05) == (low > margin or high < -margin)
    # with margin 0 it is the ordinary two-sided t test
    assert stats.minimum_effect_test(d, 0.0).pvalue == pytest.approx(stats.paired_t(A, B).pvalue, rel=1e-9)


# -- rank, permutation and bootstrap ------------------------------------------------------------


def test_wilcoxon_exact_without_ties_or_zeros():
    a = np.zeros(8)
    b = np.array([0.3, -0.1, 0.5, 0.7, 0.2, 0.9, -0.4, 1.1])
    r = stats.wilcoxon_signed_rank(a, b)
    assert r.method == "exact"
    assert r.pvalue == pytest.approx(sps.wilcoxon(b, method="exact").pvalue)


def test_wilcoxon_with_zeros_and_ties_matches_brute_force_sign_flips():
    d = np.array([0.0, 0.5, 0.5, 1.0, -0.5, 1.5, 0.0, 2.0])
    r = stats.wilcoxon_signed_rank(np.zeros(8), d)
    assert r.zero_method == "pratt" and r.n_zeros == 2 and r.ties
    assert "exact over all 256" in r.method
    # Pratt: rank |d| with the zeros, then drop the zeros' ranks; flip signs of the rest.
    ranks = sps.rankdata(np.abs(d))
    nonzero = d != 0
    observed = min(ranks[d > 0].sum(), ranks[d < 0].sum())
    total = ranks[nonzero].sum()
    signs = np.array(list(itertools.product([1, -1], repeat=8)))
    plus = (ranks * nonzero * (signs > 0)).sum(axis=1)
    null = np.minimum(plus, total - plus)
    assert r.pvalue == pytest.approx(np.mean(null <= observed + 1e-9))
    assert r.statistic == observed
    # and scipy's own (slow, looped) permutation version of the same test agrees
    reference = sps.wilcoxon(d, zero_method="pratt", method=sps.PermutationMethod(n_resamples=9999))
    assert (r.statistic, r.pvalue) == pytest.approx((reference.statistic, reference.pvalue))


def test_permutation_is_exact_for_small_n_and_matches_brute_force():
    r = stats.sign_flip_permutation(A, B, n_resamples=9999)
    assert r.exact and r.n_resamples == 1024 and r.seed is None
    d = B - A
    signs = np.array(list(itertools.product([1, -1], repeat=len(d))))
    null = (signs * d).mean(axis=1)
    brute = np.mean(np.abs(null) >= abs(d.mean()) - 1e-12)
    assert r.pvalue == pytest.approx(brute)


def test_permutation_samples_with_a_seed_when_2_to_the_n_is_large():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=16), rng.normal(0.3, 1, size=16)
    r1 = stats.sign_flip_permutation(a, b, n_resamples=2000, seed=5)
    r2 = stats.sign_flip_permutation(a, b, n_resamples=2000, seed=5)
    assert not r1.exact and r1.n_resamples == 2000 and r1.seed == 5
    assert r1.pvalue == r2.pvalue
    assert r1.pvalue == pytest.approx(stats.paired_t(a, b).pvalue, abs=0.05)


def test_bootstrap_is_studentized_reproducible_and_brackets_the_mean():
    r1 = stats.bootstrap_ci(A, B, n_resamples=2000, seed=1)
    r2 = stats.bootstrap_ci(A, B, n_resamples=2000, seed=1)
    assert r1.method == "studentized" and r1 == r2
    assert r1.low < np.mean(B - A) < r1.high
    # close to the t interval for well-behaved data
    assert r1.confidence_interval() == pytest.approx(stats.paired_t(A, B).confidence_interval(), abs=0.15)


def test_bootstrap_with_resamples_that_do_not_vary_gives_no_warning():
    # n = 3 with two equal differences: many resamples have se* = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = stats.bootstrap_ci([95.0, 95.0, 95.0], [95.5, 95.5, 96.0], n_resamples=999)
    assert r.low <= 0.5 + 1 / 6 <= r.high  # an infinite bound is allowed: n = 3 may not bound it


# -- noise floor, margin, Holm ------------------------------------------------------------------


def test_noise_floor_numbers():
    r = stats.noise_floor(A, B, n_test=360)
    assert r.std_a == pytest.approx(np.std(A, ddof=1))
    assert r.std_diff == pytest.approx(np.std(B - A, ddof=1))
    assert r.correlation == pytest.approx(np.corrcoef(A, B)[0, 1])
    # Var(B - A) = Var A + Var B - 2 cov: the ratio is what pairing left of the unpaired variance
    cov = np.cov(A, B)[0, 1]
    assert r.variance_ratio == pytest.approx((r.std_a**2 + r.std_b**2 - 2 * cov) / (r.std_a**2 + r.std_b**2))
    p = np.mean(np.concatenate([A, B])) / 100
    assert r.test_set_floor == pytest.approx(100 * math.sqrt(p * (1 - p) / 360))


def test_auto_margin_is_the_pooled_seed_std_and_says_so():
    m = stats.resolve_margin("auto", [A, B], unit=" pts")
    assert m.source == "auto"
    assert m.value == pytest.approx(math.sqrt((np.var(A, ddof=1) + np.var(B, ddof=1)) / 2))
    assert "pooled per-arm seed standard deviation" in m.description
    assert stats.resolve_margin(0.5).value == 0.5
    for bad in (-1, float("nan"), "big", True):
        with pytest.raises(ValueError):
            stats.resolve_margin(bad)


@pytest.mark.slow
def test_holm_matches_statsmodels():
    rng = np.random.default_rng(0)
    cases = [rng.uniform(0, 0.1, 6), np.array([0.01, 0.04, 0.03, 0.2]), np.array([0.02, 0.02, 0.5, 1.0]), np.array([0.3])]
    for p in cases:
        assert stats.holm(p) == pytest.approx(multipletests(p, method="holm")[1])


def test_compare_to_baseline_adjusts_decisions_for_the_number_of_comparisons():
    rng = np.random.default_rng(1)
    base = 95 + rng.normal(0, 0.5, 8)
    arms = {name: (base, base + shift + rng.normal(0, 0.3, 8)) for name, shift in (("B", 0.5), ("C", 0.1), ("D", -0.4))}
    out = stats.compare_to_baseline(arms, margin=0.2, n_resamples=999)
    for c in out.values():
        assert c.n_comparisons == 3 and "Bonferroni over 3 comparisons" in c.verdict.sentence
        # the t-based p, never below the exact sign-flip test's p of the same test (issue 24), times 3
        assert c.p_decision["zero"] == pytest.approx(min(1.0, 3 * max(c.t.pvalue, c.sign_flip_p["zero"])))
        assert c.p_decision["beyond"] == pytest.approx(min(1.0, 3 * max(c.minimum_effect.pvalue, c.sign_flip_p["beyond"])))
        assert c.sign_flip_p["zero"] >= 2.0 ** (1 - 8)


# -- degenerate data ----------------------------------------------------------------------------


def test_identical_arms_give_identical_verdict_without_nan_or_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = stats.compare(A, A.copy(), unit=" pts")
    assert c.identical and c.verdict.code == "identical"
    assert c.verdict.sentence.startswith("identical results: the factor did not change the numerics")
    assert c.t.pvalue == 1.0 and c.permutation.pvalue == 1.0 and c.wilcoxon.pvalue == 1.0
    assert c.bootstrap.confidence_interval() == (0.0, 0.0)
    assert _no_nan(c)


def test_constant_nonzero_difference_is_exact_without_nan_or_warnings():
    step = 100 / 360  # one more test example right in every seed; b - a carries rounding noise
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = stats.compare(A, A + step, margin=0.1, unit=" pts")
    assert c.exact and not c.identical
    assert c.t.pvalue == 0.0 and c.t.confidence_interval() == pytest.approx((step, step))
    assert c.d_z is None and c.noise.std_diff == 0.0
    assert c.verdict.code == "better"
    assert "Every seed moved by the same" in c.verdict.sentence
    assert _no_nan(c)
    # inside a wider margin the same exact shift is a real difference smaller than the margin
    assert stats.compare(A, A + step, margin=0.5).verdict.code == "smaller_than_margin"


def test_fewer_than_three_pairs_is_an_error():
    with pytest.raises(ValueError, match="at least 3 complete pairs"):
        stats.compare([95.0, 96.0], [95.5, 96.5])


# -- power --------------------------------------------------------------------------------------


def test_seeds_needed_matches_statsmodels_power():
    from harness.stats.power.exact_share import _EXACT_BELOW
    from harness.stats.power.seeds_needed import _exact_share

    # d_z = 1: statsmodels solves n = 9.94 for 80% t-test power, so 10 seeds; but every claim must
    # also pass the exact sign-flip test (issue 24), with which 10 seeds give 0.79: 11
    t_count = math.ceil(TTestPower().solve_power(effect_size=1.0, alpha=0.05, power=0.8))
    assert t_count == 10 and stats.seeds_needed(0.4, 0.4) == 11
    assert stats.paired_t_power(10, 0.4, 0.4) * _exact_share(10, 1.0, 0.025) < 0.8  # 0.79
    for effect, sd in ((0.1, 0.4), (0.25, 0.3), (0.8, 0.4)):  # statsmodels shares nct's NaN beyond ~3.3
        n = stats.seeds_needed(effect, sd)
        assert stats.paired_t_power(n, effect, sd) >= 0.8
        if n > stats.fewest_seeds(0.05) and stats.paired_t_power(n - 1, effect, sd) >= 0.8:
            assert n - 1 < _EXACT_BELOW  # raised for the exact test, which only costs power at small n
        assert stats.paired_t_power(n, effect, sd) == pytest.approx(
            TTestPower().power(effect_size=effect / sd, nobs=n, alpha=0.05), abs=1e-6
        )
    assert stats.seeds_needed(0.0, 0.4) is None and stats.seeds_needed(0.3, 0.0) is None


# -- the verdict's error rate and power, simulated ----------------------------------------------

N_SIM, N_SEEDS, SIGMA, ALPHA = 4000, 10, 0.4, 0.05


def _simulate(shift: float, margin: float, rng_seed: int) -> np.ndarray:
    """Verdict codes of N_SIM experiments, each N_SEEDS paired seeds, all at once (axis=1)."""
    rng = np.random.default_rng(rng_seed)
    level = 95 + rng.normal(0, 1.0, (N_SIM, N_SEEDS))  # what the arms of one seed share
    a = level + rng.normal(0, SIGMA / math.sqrt(2), (N_SIM, N_SEEDS))
    b = level + shift + rng.normal(0, SIGMA / math.sqrt(2), (N_SIM, N_SEEDS))  # sd of b - a: SIGMA
    d = b - a
    p_zero = sps.ttest_rel(b, a, axis=1).pvalue
    p_beyond = stats.minimum_effect_test(d, margin).pvalue
    p_equivalent = stats.tost(d, margin).pvalue
    return stats.decide(p_zero, p_beyond, p_equivalent, d.mean(axis=1), ALPHA)


def _tolerance(rate: float) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / N_SIM)  # 3 binomial standard errors


def test_false_difference_rate_under_equal_means_is_alpha():
    codes = _simulate(shift=0.0, margin=SIGMA, rng_seed=0)
    rate = np.isin(codes, stats.DIFFERS).mean()
    assert abs(rate - ALPHA) <= _tolerance(ALPHA)
    assert not np.isin(codes, ["better", "worse", "identical"]).any()


def test_power_under_a_shift_matches_the_noncentral_t_prediction():
    shift = 0.4
    predicted = stats.paired_t_power(N_SEEDS, shift, SIGMA, ALPHA)
    assert 0.75 < predicted < 0.85
    codes = _simulate(shift=shift, margin=0.1, rng_seed=1)
    empirical = np.isin(codes, stats.DIFFERS).mean()
    assert abs(empirical - predicted) <= 0.03


def test_verdicts_at_the_margin_keep_their_error_rates():
    # a true difference exactly at the margin: "better" is a false claim, at most alpha/2 of the
    # time (its p-value is doubled); "equivalent" is a false claim, at most alpha of the time.
    codes = _simulate(shift=SIGMA, margin=SIGMA, rng_seed=2)
    better = (codes == "better").mean()
    equivalent = np.isin(codes, ["equivalent", "smaller_than_margin"]).mean()
    assert abs(better - ALPHA / 2) <= _tolerance(ALPHA / 2)
    assert abs(equivalent - ALPHA) <= _tolerance(ALPHA)


def test_decide_reads_direction_from_the_metric():
    assert stats.decide(0.001, 0.01, 0.9, 0.5, higher_is_better=True) == "better"
    assert stats.decide(0.001, 0.01, 0.9, 0.5, higher_is_better=False) == "worse"
    assert stats.decide(0.001, 0.3, 0.01, 0.05) == "smaller_than_margin"
    assert stats.decide(0.4, 0.9, 0.01, 0.05) == "equivalent"
    assert stats.decide(0.01, 0.3, 0.3, 0.5) == "differs"
    assert stats.decide(0.4, 0.9, 0.3, 0.05) == "undecided"
    assert stats.decide(1.0, 1.0, 0.0, 0.0, identical=True) == "identical"


def _loaded_after(imports: str, modules: tuple) -> list:
    """Which of ``modules`` a fresh interpreter has loaded after ``import <imports>``."""
    code = f"import json, sys, {imports}; print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_analysis_side_imports_neither_hydra_wandb_nor_statsmodels():
    # nor scipy.stats or matplotlib at import: harness.analyze starts faster, they load when used
    assert _loaded_after("harness.stats, harness.analysis.analyze, harness.analyze, harness.analysis.render.report",
                         ("hydra", "wandb", "statsmodels", "scipy.stats", "matplotlib")) == []


def test_the_gathering_process_compiles_only_the_stats_it_uses():
    # python -m harness.analyze's first process reads and gathers while a second computes the
    # statistics: it needs harness.stats._core alone (issue 33: the rest is compiled on first use)
    assert _loaded_after("harness.tools.analyze", ("harness.stats.verdict", "harness.stats.paired", "harness.stats.power.seeds_needed",
                                                   "harness.stats.noise", "harness.stats.margins", "harness.stats.verdict_words")) == []


def test_every_name_of_the_stats_api_resolves_from_its_module():
    import importlib

    for name in stats.__all__:
        assert getattr(stats, name) is not None, name
    for module, names in stats._LAZY.items():
        for name in names:
            assert getattr(stats, name) is getattr(importlib.import_module(f"harness.stats.{module}"), name)
    assert stats.power is importlib.import_module("harness.stats.power")  # submodules and rooms by name, as before
    with pytest.raises(AttributeError):
        stats.no_such_name

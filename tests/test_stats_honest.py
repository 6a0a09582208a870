"""Issue 11, "Honest verdicts": each defect the audit found, reproduced and pinned.

Simulations are vectorised and small; each tolerance is a number of binomial standard errors of
the simulated rate, never a hand-picked slack. scripts/bench_stats.py runs the same checks large.
"""

import itertools
import json
import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from harness import stats
from harness.stats.power.exact_share import _EXACT_BELOW
from harness.stats.power.seeds_needed import _exact_share

STEP = 100 / 360  # one test example of a 360-example test set, in points


def _tolerance(rate: float, n: int) -> float:
    return 3 * math.sqrt(max(rate * (1 - rate), 1e-4) / n)


def _accuracies(rng, n, shape=()):
    """Accuracies in points that a 360-example test set can give (multiples of 100/360)."""
    return np.round((95 + rng.normal(0, 0.8, shape + (n,))) * 3.6) / 3.6


# -- 1. the sign-flip permutation p-value -------------------------------------------------------


def _enumerated_pvalue(units: np.ndarray) -> float:
    """Exact sign-flip p-value of the mean, over all 2^n patterns, in integer arithmetic."""
    signs = np.array(list(itertools.product([1, -1], repeat=len(units))))
    null = np.abs(signs @ units)
    return float(np.mean(null >= abs(units.sum())))


@pytest.mark.parametrize("n", [6, 10])
def test_permutation_pvalue_equals_full_enumeration_on_accuracy_data(n):
    # Accuracies are multiples of 100/360: b - a in floats carries ~1e-14 of noise, which used to
    # split sign patterns that tie exactly and give p below the exact value (27% of data sets).
    rng = np.random.default_rng(n)
    for _ in range(60):
        a = _accuracies(rng, n)
        b = np.round((a + rng.integers(-3, 5, n) * STEP) * 3.6) / 3.6
        units = np.round((b - a) * 3.6).astype(np.int64)  # differences in test examples, exact
        r = stats.sign_flip_permutation(a, b)
        assert r.exact
        assert r.pvalue == pytest.approx(_enumerated_pvalue(units), abs=1e-12), (a, b)


def test_permutation_the_audited_n6_case_is_exact():
    # the float-split sign patterns gave 0.6875 here; the exact enumeration gives 0.75
    a = np.round(np.array([94.4444, 94.7222, 95.0, 94.4444, 95.0, 96.1111]) * 3.6) / 3.6
    units = np.array([-1, -1, 1, 2, 1, 0])  # differences in test examples
    b = np.round((a + units * STEP) * 3.6) / 3.6
    assert _enumerated_pvalue(units) == 0.75
    assert stats.sign_flip_permutation(a, b).pvalue == pytest.approx(0.75, abs=1e-12)


def test_result_objects_have_to_dict():
    rng = np.random.default_rng(3)
    a = _accuracies(rng, 8)
    c = stats.compare(a, a + rng.integers(0, 3, 8) * STEP, margin=0.5, n_resamples=199)
    d = c.to_dict()
    assert d["verdict"]["code"] == c.verdict.code and d["margin"]["source"] == "given"
    assert d["intervals"]["zero"]["level"] == 0.95 and d["t"]["pvalue"] == c.t.pvalue
    json.dumps(d)  # plain Python all the way down


# -- 2. seeds needed for large effects ----------------------------------------------------------


def _reference_power(n: int, effect_over_sd: float, alpha: float) -> float:
    """Two-sided paired t power by integrating over the chi-square of the variance (no nct),
    over +-12 sd of the chi-square around its mean (quad over [0, inf) misses the peak at large df).

    Pure-math integrand (erfc, lgamma): scipy.stats per-point calls would make quad slow.
    """
    df = n - 1
    delta = effect_over_sd * math.sqrt(n)
    c = float(sps.t.ppf(1 - alpha / 2, df))
    log_norm = -(df / 2) * math.log(2) - math.lgamma(df / 2)

    def phi(x):
        return 0.5 * math.erfc(-x / math.sqrt(2))

    def reject(v):
        if v <= 0:
            return 0.0
        s = math.sqrt(v / df)
        density = math.exp(log_norm + (df / 2 - 1) * math.log(v) - v / 2)
        return (phi(delta - c * s) + phi(-c * s - delta)) * density

    return integrate.quad(reject, max(0.0, df - 12 * math.sqrt(2 * df)), df + 12 * math.sqrt(2 * df) + 20,
                          limit=400, epsabs=1e-12)[0]


def test_power_is_finite_everywhere_in_the_far_tail():
    n = np.arange(3, 40)
    for es in (2.1, 3.3, 4.0, 6.0, 10.0):
        for alpha in (0.05, 0.01):
            power = stats.paired_t_power(n, es, 1.0, alpha)
            assert np.isfinite(power).all() and ((power >= 0) & (power <= 1)).all()
            assert (np.diff(power) >= -1e-12).all()  # more seeds never lose power
    # from ~500 df the quadrature's weights overflowed: paired_t_power(600, 0.9, 1) was NaN
    n = np.arange(280, 1200, 7)
    for es in (0.9, 4.0):
        power = stats.paired_t_power(n, es, 1.0, 0.05)
        assert np.isfinite(power).all() and (power > 0.999999).all()
    near = stats.paired_t_power(np.array([300.0, 301.0]), 0.2, 1.0, 0.05)  # either side of the switch
    assert abs(near[1] - near[0]) < 0.01


def test_seeds_needed_on_a_dense_grid_matches_the_integrated_power():
    # effect/sd above ~3.3 made scipy's noncentral t return NaN, read as "not enough power"
    for alpha in (0.05, 0.01):
        previous = math.inf
        for es in np.linspace(0.5, 6.0, 30):
            n = stats.seeds_needed(es, 1.0, alpha=alpha)
            assert n is not None and n <= previous  # a larger effect never needs more seeds
            previous = n
            assert _reference_power(n, es, alpha) >= 0.8 - 1e-6
            if n > stats.fewest_seeds(alpha) and _reference_power(n - 1, es, alpha) >= 0.8 - 1e-6:
                # one seed fewer has the t test's power: the count was raised for the exact sign-flip
                # test every claim must also pass (issue 24), which falls short there
                assert n - 1 < _EXACT_BELOW
                assert _reference_power(n - 1, es, alpha) * _exact_share(n - 1, math.floor(es * 20) / 20, alpha / 2) < 0.8
    # a huge effect needs as few seeds as any claim can rest on: 6 at alpha 0.05 (2/2^5 > 0.05)
    assert stats.seeds_needed(3.5, 1.0) == stats.fewest_seeds(0.05) == 6


# -- 3. zero spread is not proof ----------------------------------------------------------------


def test_three_seeds_each_one_example_better_is_not_a_claim():
    a = np.array([95.0, 95.2777777778, 94.7222222222])
    c = stats.compare(a, a + STEP, margin=0.1, unit=" pts")
    assert c.exact
    # the exact sign-flip and Wilcoxon tests on these pairs cannot go below 2 / 2^3 = 0.25
    assert c.permutation.pvalue == pytest.approx(0.25) and c.wilcoxon.pvalue == pytest.approx(0.25)
    assert c.verdict.code == "undecided"
    assert c.p_decision["zero"] >= 0.25 and c.p_decision["beyond"] >= 0.25
    assert "0.25" in c.verdict.sentence and "sign-flip" in c.verdict.sentence


def test_no_verdict_p_value_is_below_what_the_exact_sign_flip_test_can_reach():
    rng = np.random.default_rng(5)
    for n in (3, 4, 5, 6, 8):
        for _ in range(10):
            a = _accuracies(rng, n)
            b = a + rng.integers(0, 4, n) * STEP
            if np.array_equal(a, b):
                continue
            c = stats.compare(a, b, margin=0.05)
            n_moved = int(np.sum(np.round((b - a) * 3.6) != 0))
            assert c.p_decision["zero"] >= 2.0 ** (1 - n_moved) - 1e-12
            assert c.p_decision["beyond"] >= 2.0 ** (1 - n) - 1e-12
            assert c.p_decision["equivalent"] >= 2.0 ** (-n) - 1e-12


# -- 4. the margin: every claim at most alpha at its boundary ----------------------------------

ALPHA, N_SIM, N_SEEDS = 0.05, 4000, 10


def _simulate_claims(rho: float, auto: bool, rng_seed: int, margin: float = 0.5):
    """Verdict codes of N_SIM two-arm experiments with the true difference AT the margin.

    Each arm's seed std is 1 and the arms correlate rho across seeds. Auto: the margin is the
    true seed std (1), estimated by the verdict from the same runs; given: ``margin``, declared.
    The same functions compare() uses, on all experiments at once.
    """
    rng = np.random.default_rng(rng_seed)
    true_margin = 1.0 if auto else margin
    level = rng.normal(0, math.sqrt(rho), (N_SIM, N_SEEDS))
    a = level + rng.normal(0, math.sqrt(1 - rho), (N_SIM, N_SEEDS))
    b = level + true_margin + rng.normal(0, math.sqrt(1 - rho), (N_SIM, N_SEEDS))
    d = b - a
    if auto:
        pooled = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / 2)
        f_low, f_high = stats.margin_bound_factors(N_SEEDS - 1, ALPHA / 2)
        p = stats.decision_pvalues(d, margin_beyond=pooled * f_high, margin_equivalent=pooled * f_low,
                                   margin_share=0.5, alpha=ALPHA)
    else:
        p = stats.decision_pvalues(d, margin_beyond=margin, margin_equivalent=margin, alpha=ALPHA)
    return stats.decide(p["zero"], p["beyond"], p["equivalent"], d.mean(axis=1), ALPHA)


@pytest.mark.parametrize("auto", [True, False], ids=["auto", "declared"])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_margin_claims_at_the_boundary_err_at_most_alpha(rho, auto):
    codes = _simulate_claims(rho, auto, rng_seed=int(rho * 10) + 100 * auto)
    wrong_beyond = np.mean(codes == "better")  # the true difference is not beyond the margin
    wrong_equivalent = np.mean(np.isin(codes, ["equivalent", "smaller_than_margin"]))  # nor inside it
    assert wrong_beyond <= ALPHA + _tolerance(ALPHA, N_SIM)
    assert wrong_equivalent <= ALPHA + _tolerance(ALPHA, N_SIM)


def test_the_simulation_path_is_the_path_compare_takes():
    rng = np.random.default_rng(8)
    level = rng.normal(95, 0.8, N_SEEDS)
    a, b = level + rng.normal(0, 0.2, N_SEEDS), level + 0.3 + rng.normal(0, 0.2, N_SEEDS)
    c = stats.compare(a, b, n_resamples=199)
    pooled = stats.pooled_seed_std([a, b])
    f_low, f_high = stats.margin_bound_factors(N_SEEDS - 1, ALPHA / 2)
    assert (c.margin.low, c.margin.high) == pytest.approx((pooled * f_low, pooled * f_high))
    p = stats.decision_pvalues(b - a, margin_beyond=c.margin.high, margin_equivalent=c.margin.low, margin_share=0.5)
    assert c.p_decision == pytest.approx(p)


def test_an_estimated_margin_is_said_to_be_estimated():
    rng = np.random.default_rng(9)
    a = rng.normal(95, 0.5, 6)
    c = stats.compare(a, a + rng.normal(0.05, 0.1, 6), n_resamples=199, unit=" pts")
    assert "ESTIMATED FROM THE DATA" in c.margin.description
    assert "rests on a margin ESTIMATED FROM THE DATA" in c.verdict.sentence
    declared = stats.compare(a, a + rng.normal(0.05, 0.1, 6), margin=0.5, n_resamples=199)
    assert "ESTIMATED" not in declared.verdict.sentence and "declared before the data" in declared.margin.description


def test_an_auto_margin_below_one_test_example_is_flagged():
    a = np.round((95 + np.array([0.0, 0.05, -0.05, 0.02, 0.0])) * 3.6) / 3.6  # barely varies
    b = a + np.array([0, 1, 0, 0, 1]) * STEP
    c = stats.compare(a, b, n_test=360, n_resamples=199)
    assert c.margin.value < STEP
    assert "smaller than one test example" in c.margin.description


# -- 5. intervals agree with decisions when there are several arms -----------------------------


def test_with_several_arms_the_interval_shown_decides_the_claim():
    rng = np.random.default_rng(11)
    seen = set()
    for trial in range(25):
        base = 95 + rng.normal(0, 0.6, 10)
        pairs = {arm: (base, base + rng.uniform(-0.8, 0.8) + rng.normal(0, 0.25, 10)) for arm in "BCD"}
        margin = 0.3
        for c in stats.compare_to_baseline(pairs, margin=margin, n_resamples=199).values():
            code = c.verdict.code
            seen.add(code)
            beyond, zero, equivalent = (c.intervals[k] for k in ("beyond", "zero", "equivalent"))
            assert beyond.level == pytest.approx(1 - ALPHA / 3) and c.n_comparisons == 3
            assert (code in ("better", "worse")) == (beyond.low > margin or beyond.high < -margin)
            assert (code in ("equivalent", "smaller_than_margin")) == (-margin < equivalent.low and equivalent.high < margin)
            assert (code in stats.DIFFERS) == (zero.low > 0 or zero.high < 0)
            # raw and decision p-values are both in the sentence when they differ
            if code == "better":
                assert "raw p" in c.verdict.sentence and "decision p" in c.verdict.sentence
    assert {"better", "worse", "undecided"} <= seen


# -- 6. the bootstrap interval covers what it says ----------------------------------------------


@pytest.mark.parametrize("n", [5, 10])
def test_the_bootstrap_interval_covers_at_least_93_percent_at_small_n(n):
    # BCa's "95%" interval covered 88% at n = 10 (83% at n = 5); a studentized bootstrap holds.
    rng = np.random.default_rng(12 + n)
    sims = 500
    d = rng.normal(0.3, 0.5, (sims, n))
    covered = 0
    for row in d:
        r = stats.bootstrap_ci(np.zeros(n), row, n_resamples=999, seed=int(rng.integers(1 << 30)))
        covered += r.low <= 0.3 <= r.high
    rate = covered / sims
    assert rate >= 0.93 - _tolerance(0.93, sims)
    assert "studentized" in r.method


# -- 7. the test set's own noise ----------------------------------------------------------------


def test_test_set_noise_reproduces_jordans_floor():
    # Jordan 2024: a 94% model on 10,000 test examples has a test-set floor of 0.24 pts. When every
    # seed makes the same predictions and the baseline is always right, all the noise in the
    # difference is the test set's: its SE must be that floor.
    n, seeds = 10_000, 4
    correct = np.zeros(n, dtype=bool)
    correct[: int(0.94 * n)] = True
    b = np.tile(correct, (seeds, 1))
    ts = stats.test_set_noise(np.ones_like(b), b)
    assert ts.se_test_set == pytest.approx(stats.test_set_floor(94.0, n), rel=1e-3)
    assert round(ts.se_test_set, 2) == 0.24 and ts.se_seeds == 0
    assert ts.floor_arm == pytest.approx(stats.test_set_floor(94.0, n))


def test_the_interval_for_the_data_distribution_covers_where_the_seed_interval_does_not():
    # Test examples drawn from a population with example-specific effects of the arm; seeds add
    # a shared shift and Bernoulli noise. The effect on the distribution is the population mean.
    from scipy.special import ndtr

    pop = np.random.default_rng(0)
    u, tau = pop.normal(0, 1, 200_000), pop.normal(0, 1.5, 200_000)
    truth = 100 * np.mean(ndtr(4 * (0.5 + u) + tau) - ndtr(4 * (0.5 + u)))
    rng = np.random.default_rng(1)
    sims, seeds, n = 250, 5, 400
    covered_distribution = covered_seeds = 0
    for _ in range(sims):
        j = rng.integers(0, len(u), n)
        shift = rng.normal(0, 0.15, (seeds, 1))
        a = rng.random((seeds, n)) < ndtr(4 * (0.5 + u[j]) + shift)
        b = rng.random((seeds, n)) < ndtr(4 * (0.5 + u[j]) + tau[j] + shift)
        ts = stats.test_set_noise(a, b)
        low, high = ts.confidence_interval()
        covered_distribution += low <= truth <= high
        low, high = stats.paired_t(100 * a.mean(axis=1), 100 * b.mean(axis=1)).confidence_interval()
        covered_seeds += low <= truth <= high
    assert covered_distribution / sims >= 0.95 - _tolerance(0.95, sims)
    # the seed-only interval is about this test set: for the distribution it falls short
    assert covered_seeds / sims <= 0.90


@pytest.mark.bench
def test_bench_stats_runs_small_and_every_cell_passes(capsys):
    # The bench at a toy size (seeded, so deterministic): it must run, print every section, pass.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_stats.py"
    spec = importlib.util.spec_from_file_location("bench_stats", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    status = bench.main(["--experiments", "2000", "--bootstrap-experiments", "300", "--test-set-experiments", "100",
                         "--conditions-experiments", "2000"])
    out = capsys.readouterr().out
    for section in ("### 1.", "### 2.", "### 3.", "### 4.", "### 5.", "### 6.", "### 7.", "### 8.",
                    "seeds needed on a grid of 360 points"):
        assert section in out
    assert status == 0 and "all cells pass" in out, out

"""The random-effects model across conditions (harness.stats.meta.random_effects) and rliable's aggregates
(harness.stats.meta.aggregates), checked against published numbers and their own formulas.

The published numbers are metafor's canonical example (Viechtbauer 2010; the README of
github.com/wviechtb/metafor and the rma.uni documentation): the 13 BCG vaccine trials (dat.bcg,
Colditz et al. 1994), log risk ratios computed as escalc(measure="RR") does. metafor prints 4
decimals; each value must agree with the printed one to 1e-4 (rounding to 4 decimals plus metafor's own
convergence threshold: its Fisher scoring stops when tau^2 changes by < 1e-5, ours solves the REML
equation to float precision, which moves the 4th decimal of the meta-regression's t by < 1e-4).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from harness.stats.meta.random_effects import (
    better_on, common_scale, effect_slope, pooled_rows, q_profile, random_effects, reml_tau2,
)
from harness.stats.meta.aggregates import iqm_difference, probability_of_improvement

# dat.bcg: tpos, tneg, cpos, cneg (vaccinated TB+/TB-, control TB+/TB-), and absolute latitude
BCG = np.array([
    [4, 119, 11, 128], [6, 300, 29, 274], [3, 228, 11, 209], [62, 13536, 248, 12619], [33, 5036, 47, 5761],
    [180, 1361, 372, 1079], [8, 2537, 10, 619], [505, 87886, 499, 87892], [29, 7470, 45, 7232],
    [17, 1699, 65, 1600], [186, 50448, 141, 27197], [5, 2493, 3, 2338], [27, 16886, 29, 17825],
], dtype=float)
ABLAT = [44, 55, 42, 52, 13, 44, 19, 13, 27, 42, 18, 33, 33]


def bcg():
    """escalc(measure="RR"): yi = log risk ratio, vi = 1/ai - 1/n1i + 1/ci - 1/n2i."""
    ai, bi, ci, di = BCG.T
    yi = np.log(ai / (ai + bi)) - np.log(ci / (ci + di))
    vi = 1 / ai - 1 / (ai + bi) + 1 / ci - 1 / (ci + di)
    return yi, vi


def printed(value, published):
    return abs(value - published) <= 1e-4


def test_escalc_effects_match_metafors_table():
    yi, vi = bcg()
    # the yi / vi columns metafor prints for dat.bcg after escalc(measure="RR")
    assert all(printed(a, b) for a, b in zip(yi, [-0.8893, -1.5854, -1.3481, -1.4416, -0.2175, -0.7861, -1.6209,
                                                   0.0120, -0.4694, -1.3713, -0.3394, 0.4459, -0.0173]))
    assert all(printed(a, b) for a, b in zip(vi, [0.3256, 0.1946, 0.4154, 0.0200, 0.0512, 0.0069, 0.2230,
                                                   0.0040, 0.0564, 0.0730, 0.0124, 0.5325, 0.0714]))


def test_reml_with_hartung_knapp_reproduces_metafor_bcg():
    r = random_effects(*bcg())
    # rma(yi, vi, data=dat): REML; the z-test line gives se 0.1798
    assert printed(r.estimate, -0.7145) and printed(r.standard_error_z, 0.1798)
    assert printed(r.tau2, 0.3132) and printed(r.tau, 0.5597)
    assert printed(r.i2, 0.9222)  # printed as 92.22%
    assert printed(r.q, 152.2330) and r.q_pvalue < 1e-4
    # rma(yi, vi, data=dat, test="knha") (metafor README): se 0.1808, tval -3.9522, df 12, p 0.0019,
    # CI -1.1084 .. -0.3206: wider than the z interval -1.0669 .. -0.3622
    assert printed(r.standard_error, 0.1808) and printed(r.statistic, -3.9522) and r.df == 12
    assert printed(r.pvalue, 0.0019)
    low, high = r.confidence_interval()
    assert printed(low, -1.1084) and printed(high, -0.3206)
    z_low, z_high = r.estimate + np.array([-1, 1]) * sps.norm.ppf(0.975) * r.standard_error_z
    assert printed(z_low, -1.0669) and printed(z_high, -0.3622)
    assert high - low > z_high - z_low


def test_meta_regression_on_latitude_reproduces_metafor_bcg():
    s = effect_slope(*bcg(), ABLAT)
    # rma(yi, vi, mods = ~ ablat, data=dat, test="knha") (metafor README)
    assert printed(s.intercept, 0.2515) and printed(s.intercept_standard_error, 0.2839)
    assert printed(s.slope, -0.0291) and printed(s.slope_standard_error, 0.0082)
    assert printed(s.statistic, -3.5483) and printed(s.pvalue, 0.0046) and s.df == 11
    low, high = s.confidence_interval()
    assert printed(low, -0.0472) and printed(high, -0.0111)
    assert printed(s.tau2, 0.0764) and printed(s.q_residual, 30.7331) and printed(s.q_residual_pvalue, 0.0012)


def test_hartung_knapp_and_reml_follow_their_formulas():
    yi, vi = bcg()
    r = random_effects(yi, vi)
    w = 1 / (vi + r.tau2)
    mu = sum(w * yi) / sum(w)
    # REML fixed point (Viechtbauer 2005, eq. 10): tau^2 = sum w^2((y-mu)^2 - v) / sum w^2 + 1 / sum w
    assert r.tau2 == pytest.approx(sum(w**2 * ((yi - mu) ** 2 - vi)) / sum(w**2) + 1 / sum(w), rel=1e-9)
    # HK (Hartung & Knapp 2001): var = sum w (y - mu)^2 / ((K - 1) sum w)
    assert r.standard_error == pytest.approx(math.sqrt(sum(w * (yi - mu) ** 2) / (12 * sum(w))), rel=1e-12)
    # Q-profile bounds: the generalised Q at each bound is the chi-square(12) quantile
    for bound, quantile in zip(r.tau2_interval, (0.975, 0.025)):
        wb = 1 / (vi + bound)
        mub = sum(wb * yi) / sum(wb)
        assert sum(wb * (yi - mub) ** 2) == pytest.approx(sps.chi2.ppf(quantile, 12), rel=1e-9)
    assert r.tau2_interval.low < r.tau2 < r.tau2_interval.high
    assert r.tau_interval.low == pytest.approx(math.sqrt(r.tau2_interval.low))
    # prediction interval for a new trial: mu +- t(K-2) sqrt(tau^2 + se^2) (Higgins et al. 2009);
    # metafor's predict() uses K-1 df there, so its printed 0.14..1.76 (risk ratio) is a little narrower
    half = sps.t.ppf(0.975, 11) * math.sqrt(r.tau2 + r.standard_error**2)
    assert r.prediction_interval.low == pytest.approx(r.estimate - half)
    assert r.prediction_interval.high == pytest.approx(r.estimate + half)
    metafor_half = sps.t.ppf(0.975, 12) * math.sqrt(r.tau2 + r.standard_error**2)
    assert round(math.exp(r.estimate - metafor_half), 2) == 0.14 and round(math.exp(r.estimate + metafor_half), 2) == 1.76


def test_rows_agree_with_the_one_row_api_and_tau2_is_zero_without_excess_spread():
    rng = np.random.default_rng(3)
    y, v = rng.normal(0, 1, (50, 4)), rng.uniform(0.5, 2, (50, 4))
    rows = pooled_rows(y, v)
    for i in (0, 17, 49):
        one = random_effects(y[i], v[i])
        assert rows["mu"][i] == pytest.approx(one.estimate) and rows["pvalue"][i] == pytest.approx(one.pvalue)
        assert rows["tau2"][i] == pytest.approx(one.tau2, abs=1e-12)
    # effects closer together than their own noise: no between-condition spread, and Q-profile bounds at 0
    y0, v0 = np.array([0.1, 0.12, 0.09, 0.11]), np.full(4, 1.0)
    assert reml_tau2(y0, v0)[0] == 0.0 and q_profile(y0, v0)[0][0] == 0.0
    with pytest.raises(ValueError, match="at least 2 conditions"):
        random_effects([0.3], [0.1])


def test_better_on_k_of_k_is_holm_adjusted_and_units_must_agree():
    p, est = [0.001, 0.02, 0.04, 0.5], [1.0, 2.0, -1.0, 0.5]
    res = better_on(p, est)
    assert list(res.adjusted_pvalues) == pytest.approx(multipletests(p, method="holm")[1])
    assert (res.better, res.worse, res.conditions) == (1, 0, 4) and "Holm" in res.multiplicity
    assert better_on(p, est, higher_is_better=False).worse == 1
    with pytest.raises(ValueError, match="different units") as e:
        common_scale([1.0, 2.0], [0.1, 0.1], ["%", "nats"])
    assert "%" in str(e.value) and "nats" in str(e.value)
    y, v, unit = common_scale([1.0, 2.0], [0.25, 1.0], ["%", "nats"], sds=[2.0, 4.0])
    assert list(y) == [0.5, 0.5] and list(v) == [0.0625, 0.0625] and "sd" in unit


def test_probability_of_improvement_and_iqm_follow_rliable():
    a = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0, 40.0])]
    b = [np.array([2.0, 2.0, 4.0]), np.array([5.0, 25.0, 35.0, 45.0])]
    # condition 1: b runs {2,2,4} vs a runs {1,2,3}: wins 1+1+3, ties 1+1 -> (5 + 1) / 9
    # condition 2: b {5,25,35,45} vs a {10,20,30,40}: wins 0+2+3+4 = 9 of 16
    poi = probability_of_improvement(a, b, rng=0)
    assert poi.statistic == pytest.approx((6 / 9 + 9 / 16) / 2)
    assert poi.low <= poi.statistic <= poi.high
    iqm = iqm_difference(a, b, rng=0)
    assert iqm["a"].statistic == pytest.approx(sps.trim_mean(np.concatenate(a), 0.25))
    assert iqm["difference"].statistic == pytest.approx(iqm["b"].statistic - iqm["a"].statistic)
    # pairs are kept through the resampling: b = a + 1 on every seed gives a difference interval of width 0
    shifted = iqm_difference(a, [x + 1.0 for x in a], rng=0)["difference"]
    assert shifted.low == pytest.approx(1.0) and shifted.high == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one 1-D array per condition"):
        probability_of_improvement(a, b[:1])


def test_the_claims_that_carry_estimated_variances_are_the_textbook_tests():
    from harness.stats.meta.claims import average_rows, common_effect_pvalue, slope_rows

    rng = np.random.default_rng(4)
    y = rng.normal(0.3, 1.0, 6)
    avg = average_rows(y)
    ref = sps.ttest_1samp(y, 0.0)
    assert avg["pvalue"][0] == pytest.approx(ref.pvalue)
    assert (avg["low"][0], avg["high"][0]) == pytest.approx(tuple(ref.confidence_interval(0.95)))
    x = [0.0, 0.1, 0.2, 0.4, 0.8, 1.6]
    fit, line = slope_rows(y, x), sps.linregress(x, y)
    assert fit["slope"][0] == pytest.approx(line.slope) and fit["se"][0] == pytest.approx(line.stderr)
    assert fit["pvalue"][0] == pytest.approx(line.pvalue)
    groups = [rng.normal(0, s, n) for s, n in ((1, 5), (2, 4), (0.5, 6))]
    assert common_effect_pvalue(groups) == pytest.approx(sps.alexandergovern(*groups).pvalue)
    # a condition whose differences do not vary gets the smallest other variance: a number, no NaN
    p = common_effect_pvalue([np.array([1.0, 1.0, 1.0]), groups[0], groups[1]])
    assert 0.0 <= p <= 1.0
    assert common_effect_pvalue([np.array([1.0, 1.0]), np.array([2.0, 2.0])]) == 0.0


def test_the_prediction_interval_for_a_new_condition_is_a_t_interval_for_one_more_draw():
    from harness.stats.meta.claims import average_rows

    y = np.array([0.2, 0.9, 0.4, 1.3])
    low, high = average_rows(y)["prediction"]
    half = sps.t.ppf(0.975, 3) * y.std(ddof=1) * math.sqrt(1 + 1 / 4)
    assert (low[0], high[0]) == pytest.approx((y.mean() - half, y.mean() + half))

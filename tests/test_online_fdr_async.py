"""Asynchronous online FDR (harness/stats/fdr/asynchronous.py; Zrnic, Ramdas & Jordan 2021) against
onlineFDR itself, and its reduction to the synchronous rules when every decision is known at once.

Reference numbers: onlineFDR 2.19.1 (github.com/dsrobertson/onlineFDR at 1d89c48, R CMD INSTALL on
Debian's R 4.2.2), on the vignette's 15 ``sample.df$pval`` (tests/test_online_fdr.py's VIGNETTE_P)
with ``d <- data.frame(id = 1:15, pval = p, decision.times = E)`` and each function's defaults:
``LONDstar(d, version = "async")``, ``LORDstar(d, version = "async")``, ``SAFFRONstar(d, version =
"async")``, ``ADDIS(d, async = TRUE)`` and ``LORDstar(d, alpha = 0.1, version = "async")``; ``$alphai``
printed with sprintf("%.17g"). E: the help pages' own example (decision.times = seq_len(15) + 1: each
test decided one step late), and an overlapping one where tests finish out of order.
"""

import numpy as np
import pytest

from harness.stats.fdr import online as ofdr
from harness.stats.fdr import asynchronous as afdr
from harness.stats.fdr.dependent import DEPENDENT, lond_dep, xi_dep
from harness.stats.fdr.simulate import decision_times, simulate_online_fdr, simulate_streams

from .test_online_fdr import VIGNETTE_P

ONE_BEHIND = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
OVERLAPPING = (3, 3, 5, 7, 6, 7, 9, 12, 10, 11, 15, 13, 16, 14, 16)

REFERENCE = {  # (decision times, method, level) -> (alpha_t, rejections)
    (ONE_BEHIND, *('lond', 0.05)): ([
        0.0026758385456300436, 0.00058191028914708718, 0.00049562493972303567, 0.0004121803029483667,
        0.00034944348546739925, 0.00030229501708324276, 0.00026597221092941473, 0.00047452254313193673,
        0.00042809486140637712, 0.00038982519052638921, 0.00035775929673247944, 0.00049577047626617958,
        0.00046062614301290111, 0.00043008814577381421, 0.0004033104201615975,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    (ONE_BEHIND, *('lord++', 0.05)): ([
        0.00026758385456300429, 5.8191028914708707e-05, 0.0024578171850393425, 0.00056493729052721508,
        0.00048100679429747206, 0.00040119177436185428, 0.00034109635801360085, 0.0029716301881615587,
        0.00084269002205387923, 0.00072865134365872667, 0.00062271095541786023, 0.0032172290493765235,
        0.0010605511945270423, 0.00092466456505809803, 0.0034769116437203015,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (ONE_BEHIND, *('saffron', 0.05)): ([
        0.0054686270725000001, 0.0018039741708076409, 0.0072726012433076415, 0.014545202486615283,
        0.0072158966832305636, 0.018153150828230564, 0.021761099169845845, 0.025369047511461133,
        0.011151472535262247, 0.011151472535262247, 0.011151472535262247, 0.022088726680262245,
        0.010254545768448333, 0.010254545768448333, 0.021191799913448335,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (ONE_BEHIND, *('addis', 0.05)): ([
        0.0027343135362500001, 0.00090198708540382045, 0.0018039741708076409, 0.0018039741708076409,
        0.0018039741708076409, 0.0036079483416152818, 0.0054119225124229231, 0.0072158966832305636,
        0.0072158966832305636, 0.0037717620968234821, 0.0023803581892106549, 0.0041843323600182954,
        0.0041843323600182954, 0.0026086002787551357, 0.0044125744495627775,
    ], [1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (ONE_BEHIND, *('lord++', 0.1)): ([
        0.00053516770912600859, 0.00011638205782941741, 0.004915634370078685, 0.0011298745810544302,
        0.00096201358859494411, 0.00080238354872370855, 0.0006821927160272017, 0.0059432603763231173,
        0.0016853800441077585, 0.0014573026873174533, 0.0012454219108357205, 0.0064344580987530471,
        0.0021211023890540847, 0.0018493291301161961, 0.006953823287440603,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (OVERLAPPING, *('lond', 0.05)): ([
        0.0026758385456300436, 0.00058191028914708718, 0.00049562493972303567, 0.0004121803029483667,
        0.00034944348546739925, 0.00030229501708324276, 0.00026597221092941473, 0.00047452254313193673,
        0.00042809486140637712, 0.00038982519052638921, 0.00035775929673247944, 0.00049577047626617958,
        0.00046062614301290111, 0.00043008814577381421, 0.0004033104201615975,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    (OVERLAPPING, *('lord++', 0.05)): ([
        0.00026758385456300429, 5.8191028914708707e-05, 4.9562493972303563e-05, 0.0024494727213618755,
        0.00055866360877911841, 0.00047629194745905641, 0.00039755949374647146, 0.0056899023553373422,
        0.0014572908367394115, 0.0012501161288088641, 0.0010557837151427287, 0.0035838938867399171,
        0.0013772758638175445, 0.0012028973166372749, 0.0010488776696322105,
    ], [1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (OVERLAPPING, *('saffron', 0.05)): ([
        0.0054686270725000001, 0.0018039741708076409, 0.00094294052420587052, 0.01820985538830764,
        0.0063548630366287934, 0.0037717620968234821, 0.01470901624182348, 0.032698353314845843,
        0.012873539828465785, 0.0073422993806394644, 0.0073422993806394644, 0.018279553525639466,
        0.010950247722254745, 0.010950247722254745, 0.0067647288694462938,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (OVERLAPPING, *('addis', 0.05)): ([
        0.0027343135362500001, 0.00090198708540382045, 0.00047147026210293526, 0.0018039741708076409,
        0.00094294052420587052, 0.00094294052420587052, 0.00094294052420587052, 0.0054119225124229231,
        0.0028288215726176118, 0.0028288215726176118, 0.0017852686419079912, 0.0035892428127156321,
        0.0021921853401178195, 0.0015282526581111532, 0.0015282526581111532,
    ], [1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    (OVERLAPPING, *('lord++', 0.1)): ([
        0.00053516770912600859, 0.00011638205782941741, 9.9124987944607126e-05, 0.0048989454427237509,
        0.0011173272175582368, 0.00095258389491811282, 0.00079511898749294293, 0.011379804710674684,
        0.0029145816734788229, 0.0025002322576177282, 0.0021115674302854574, 0.0071677877734798341,
        0.0027545517276350889, 0.0024057946332745497, 0.002097755339264421,
    ], [1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
}


@pytest.mark.parametrize("key", sorted(REFERENCE, key=str))
def test_alpha_sequences_equal_onlinefdr_async(key):
    times, method, level = key
    alpha, rejected = REFERENCE[key]
    out = afdr.ASYNC[method](VIGNETTE_P, times, level=level)
    np.testing.assert_allclose(out.alpha, alpha, rtol=0, atol=1e-9)
    assert out.rejected.astype(int).tolist() == rejected


def test_decided_at_once_the_async_rules_are_the_synchronous_ones():
    p = np.random.default_rng(3).uniform(size=(40, 60)) ** 3
    now = np.arange(1, 61)  # E_t = t: known to the next test
    for method, sync in (("lord++", ofdr.lord_plus_plus), ("saffron", ofdr.saffron), ("addis", ofdr.addis)):
        np.testing.assert_allclose(afdr.ASYNC[method](p, now, level=0.1).alpha, sync(p, level=0.1).alpha, atol=1e-15)
    np.testing.assert_allclose(afdr.lond_async(p, now, 0.1, original=True).alpha, ofdr.lond(p, 0.1).alpha, atol=1e-15)
    for method, sync in DEPENDENT.items():
        np.testing.assert_allclose(afdr.ASYNC[method](p, now, level=0.1).alpha, sync(p, level=0.1).alpha, atol=1e-15)


def test_the_dependent_rules_count_a_test_still_running_as_not_rejected():
    """LOND-dep's and LORD-dep's asynchronous form (none is published: the conservative rule). Tests
    finish out of order (up to 6 at once), and the p-values make many rejections. LOND-dep: test t's level
    is the synchronous rule's with every decision not known when t starts read as not rejected. LORD-dep:
    xi_t times the wealth just after the last rejection known at t, what the tests up to it spent taken
    off (each its own alpha, as assigned), b0 added per known rejection."""
    rng = np.random.default_rng(5)
    p = rng.uniform(size=(30, 40)) ** 8
    times = np.arange(1, 41) + rng.integers(0, 6, size=p.shape)
    lond, lord = afdr.lond_dep_async(p, times, level=0.1), afdr.lord_dep_async(p, times, level=0.1)
    assert 0.1 < lond.rejected.mean() < 0.9 and 0.1 < lord.rejected.mean() < 0.9
    xi, w0 = xi_dep(40), 0.01
    for t in range(40):
        known = np.zeros_like(lond.rejected)
        known[:, :t] = lond.rejected[:, :t] & (times[:, :t] <= t)
        np.testing.assert_allclose(lond.alpha[:, t], lond_dep(p, 0.1, decisions=known).alpha[:, t], rtol=1e-13)
        for r in range(30):
            seen = [j for j in range(t) if times[r, j] <= t and lord.rejected[r, j]]
            wealth = w0 - lord.alpha[r, :max(seen) + 1].sum() + 0.09 * len(seen) if seen else w0
            assert lord.alpha[r, t] == pytest.approx(xi[t] * wealth, rel=1e-12, abs=1e-18)
    assert (lord.alpha > 0).all()


def test_a_test_still_running_is_never_read_and_a_late_rejection_earns_later():
    p = [1e-9, 0.2, 0.3, 0.4]
    late = afdr.lord_async(p, [3, 3, 4, 5], level=0.1)  # test 1 decided after test 3 started
    unknown = afdr.lord_async([1e-9, np.nan, np.nan, 0.4], [3, 3, 4, 5], level=0.1)
    assert late.alpha[1] == unknown.alpha[1] == afdr.lord_async([1e-9, 1.0, 1.0, 1.0], [3, 3, 4, 5], level=0.1).alpha[1]
    now = ofdr.lord_plus_plus(p, level=0.1)
    assert late.alpha[1] < now.alpha[1]  # the rejection not known yet earns nothing
    g, w0 = ofdr.gamma_lord(4), 0.01  # then it earns from when it became known, as if just rejected there
    assert late.alpha[3] == pytest.approx(w0 * g[3] + (0.1 - w0) * g[0], rel=1e-12)


@pytest.mark.parametrize("bad,words", [((0.1, 0.2), "at least its test's own start"), ((1, 1, 1), "at least")])
def test_decision_times_before_the_start_are_refused(bad, words):
    with pytest.raises(ValueError, match=words):
        afdr.lord_async([0.1, 0.2, 0.3][:len(bad)], bad)


def test_overlapping_claims_hold_the_fdr_within_its_standard_error():
    # 1000 streams of 100 one-sided z-tests (20% effects of 3 sd), each decided 0..7 claims after it
    # started (up to 8 experiments at once, finishing out of order), under the ledger's asynchronous
    # rules: every method's FDR is at most 0.1 within 3 standard errors, with power; testing each claim
    # at 0.1 exceeds it by far, so this check can fail. Under positive dependence (rho 0.5) as well, the
    # dependent variants hold it.
    p, null = simulate_streams(n=100, reps=1000, pi1=0.2, effect=3.0, seed=6)
    times = decision_times(p.shape, max_lag=7, seed=7)
    for method in ofdr.ALL_METHODS:
        r = simulate_online_fdr(method, 0.1, p=p, null=null, times=times)
        assert r.fdr <= 0.1 + 3 * r.fdr_se and r.power > 0.05, (method, r)
    every = p <= 0.1
    fdp = (every & null).sum(1) / np.maximum(every.sum(1), 1)
    assert fdp.mean() - 3 * fdp.std(ddof=1) / np.sqrt(len(fdp)) > 0.1
    p, null = simulate_streams(n=100, reps=1000, pi1=0.2, effect=3.0, rho=0.5, seed=8)
    for method in DEPENDENT:
        r = simulate_online_fdr(method, 0.1, p=p, null=null, times=times)
        assert r.fdr <= 0.1 + 3 * r.fdr_se and r.power > 0.05, (method, r)

"""The online FDR procedures (harness/stats/fdr/online.py) against the R/Bioconductor package onlineFDR,
and their false discovery rate by simulation.

Reference numbers: onlineFDR 2.19.1 (github.com/dsrobertson/onlineFDR at 1d89c48, built with
R CMD INSTALL on Debian's R 4.2.2), run on the p-values of the package's vignette example
(vignettes/onlineFDR.Rmd, ``sample.df$pval``, in the given order) with each function's defaults:
``LOND(p)``, ``LORD(p)`` (version "++"), ``SAFFRON(p)``, ``ADDIS(p)``, and ``LORD(p, alpha = 0.1)``,
``SAFFRON(p, alpha = 0.1)``; ``$alphai`` printed with sprintf("%.17g").
"""

import numpy as np
import pytest

from harness.stats.fdr import online as ofdr
from harness.stats.fdr.asynchronous import next_alpha
from harness.stats.fdr.simulate import simulate_online_fdr, simulate_streams

VIGNETTE_P = [2.90e-14, 0.00143, 0.06514, 0.00174, 0.00171, 3.61e-05, 0.79149, 0.27201, 0.28295, 7.59e-08,
              0.69274, 0.30443, 0.000487, 0.72342, 0.54757]

REFERENCE = {  # (method, level) -> (alpha_t, rejections), printed with %.17g
    ('lond', 0.05): ([
        0.0026758385456300436, 0.0011638205782941744, 0.00099124987944607134, 0.00082436060589673339,
        0.00069888697093479851, 0.00060459003416648551, 0.00079791663278824419, 0.00071178381469790507,
        0.00064214229210956565, 0.00058473778578958379, 0.00071551859346495887, 0.0006610273016882394,
        0.00061416819068386812, 0.0007168135762896904, 0.00067218403360266258,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    ('lord++', 0.05): ([
        0.00026758385456300429, 0.0024664457199817477, 0.0032491202998347251, 0.0010691907651926558,
        0.00090153156092330554, 0.00075690894157735031, 0.0033239447675653027, 0.0011473064232234,
        0.0009965370381321407, 0.00086157552167352421, 0.0034326387623741304, 0.0012566352675653463,
        0.0011045621466656407, 0.0036430610599961027, 0.0014414133773928393,
    ], [1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    ('saffron', 0.05): ([
        0.0054686270725000001, 0.010937254145, 0.021874508290000001, 0.021874508290000001,
        0.032811762435000003, 0.043749016580000001, 0.054686270725, 0.018039741708076408,
        0.018039741708076408, 0.018039741708076408, 0.028976995853076407, 0.013037353583673987,
        0.013037353583673987, 0.023974607728673991, 0.01144472486305366,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    ('addis', 0.05): ([
        0.0027343135362500001, 0.0054686270725000001, 0.010937254145, 0.010937254145,
        0.016405881217500001, 0.021874508290000001, 0.0273431353625, 0.0273431353625,
        0.009019870854038204, 0.0047147026210293524, 0.010183329693529353, 0.010183329693529353,
        0.0047794219073209587, 0.01024804897982096, 0.01024804897982096,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    ('lord++', 0.1): ([
        0.00053516770912600859, 0.0049328914399634953, 0.0064982405996694501, 0.0021383815303853116,
        0.0071547402131066969, 0.0080293155527089606, 0.0088029599928708506, 0.0041102233317896041,
        0.0035163216530958129, 0.0030266280484483325, 0.0080018119807735745, 0.0035197375001214583,
        0.0031117416978695949, 0.0081040421719249713, 0.0036304112420445472,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
    ('saffron', 0.1): ([
        0.010937254145, 0.021874508290000001, 0.043749016580000001, 0.043749016580000001,
        0.065623524870000005, 0.087498033160000002, 0.10937254145, 0.036079483416152816,
        0.036079483416152816, 0.036079483416152816, 0.057953991706152813, 0.026074707167347975,
        0.026074707167347975, 0.047949215457347982, 0.022889449726107319,
    ], [1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]),
}


@pytest.mark.parametrize("method,level", sorted(REFERENCE))
def test_alpha_sequence_equals_onlinefdr_on_its_vignette_data(method, level):
    alphas, rejections = REFERENCE[(method, level)]
    out = ofdr.online_fdr(method, VIGNETTE_P, level=level)
    np.testing.assert_allclose(out.alpha, alphas, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.alpha, alphas, rtol=1e-12)
    assert out.rejected.astype(int).tolist() == rejections


@pytest.mark.parametrize("method,p,expected", [
    # onlineFDR 2.19.1's own tests (tests/testthat/test_*.R, "Correct rejections"), default arguments
    ("lord++", [1e-07, 0.1, 0.00025, 0.07], [1, 0, 1, 0]),
    ("saffron", [1e-07, 0.1, 1e-07], [1, 0, 1]),
    ("saffron", [1e-07, 3e-04, 0.1, 6e-04], [1, 1, 0, 1]),
    ("saffron", [0.1, 0.1], [0, 0]),
    ("addis", [1e-07, 3e-04, 0.1, 6e-04], [1, 1, 0, 1]),
    ("lond", [1e-07, 0.1, 6e-04], [1, 0, 1]),
])
def test_rejections_equal_onlinefdrs_own_tests(method, p, expected):
    assert ofdr.online_fdr(method, p).rejected.astype(int).tolist() == expected


def test_lord_plus_plus_by_hand():
    # Ramdas et al. 2017, eq. (LORD++): alpha_1 = w0 g1; after a rejection at 1,
    # alpha_2 = w0 g2 + (alpha - w0) g1; after a second at 2, alpha_3 = w0 g3 + (alpha - w0) g2 + alpha g1
    g, a = ofdr.gamma_lord(3), 0.1
    w0 = a / 10
    out = ofdr.lord_plus_plus([0.0, 0.0, 1.0], level=a)
    np.testing.assert_allclose(out.alpha, [w0 * g[0], w0 * g[1] + (a - w0) * g[0],
                                           w0 * g[2] + (a - w0) * g[1] + a * g[0]], rtol=1e-14)


def test_saffron_and_addis_by_hand():
    # SAFFRON (Ramdas et al. 2018): a candidate (p <= lambda) spends nothing, so after p = 0.3
    # alpha_2 = (1 - lambda) w0 g1 again; after p = 0.9 it moves to g2. ADDIS (Tian & Ramdas 2019):
    # p = 0.9 > tau is discarded and spends nothing either; p = 0.4 in (lambda, tau] spends.
    g, a = ofdr.gamma_saffron(4), 0.1
    sa = ofdr.saffron([0.3, 0.9, 1.0], level=a)
    np.testing.assert_allclose(sa.alpha, 0.5 * a / 2 * g[[0, 0, 1]], rtol=1e-14)
    ad = ofdr.addis([0.9, 0.4, 1.0], level=a)
    np.testing.assert_allclose(ad.alpha, 0.25 * a / 2 * g[[0, 0, 1]], rtol=1e-14)


def test_next_alpha_follows_recorded_decisions_and_a_pending_claim_is_never_read():
    p = VIGNETTE_P[:6]
    replay = ofdr.online_fdr("lord++", p + [1.0], level=0.05)
    assert next_alpha("lord++", p, replay.rejected[:6], level=0.05) == pytest.approx(replay.alpha[6], rel=1e-14)
    # recorded decisions win over a recomputation: claim 2 recorded as not rejected lowers the level
    fewer = list(replay.rejected[:6])
    fewer[1] = False
    assert next_alpha("lord++", p, fewer, level=0.05) < replay.alpha[6]
    for method in ofdr.ALL_METHODS:
        pending = next_alpha(method, [1e-6, None], [True, False], level=0.1)
        for outcome, decided in ((1e-6, True), (0.01, False), (0.3, False), (0.45, False), (0.9, False)):
            assert pending <= next_alpha(method, [1e-6, outcome], [True, decided], level=0.1) + 1e-15, \
                (method, outcome)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown online FDR method"):
        ofdr.online_fdr("lord", [0.1])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        ofdr.lond([0.1, 1.5])
    with pytest.raises(ValueError, match="FDR level"):
        ofdr.saffron([0.1], level=1.0)


def test_simulated_fdr_is_at_most_the_level_and_unadjusted_testing_is_not():
    # 1000 streams of 100 one-sided z-tests, 20% effects of 3 sd, independent: each method's FDR is at
    # most the level within 3 standard errors; testing every claim at the level itself (no online
    # correction) exceeds it by far, so this check can fail.
    p, null = simulate_streams(n=100, reps=1000, pi1=0.2, effect=3.0, seed=1)
    level = 0.1
    results = {m: simulate_online_fdr(m, level, p=p, null=null) for m in ofdr.METHODS}
    for m, r in results.items():
        assert r.fdr <= level + 3 * r.fdr_se, (m, r)
        assert r.power > 0.2, (m, r)
    assert results["saffron"].power > results["lord++"].power > results["lond"].power
    unadjusted = (p <= level)
    fdp = (unadjusted & null).sum(1) / np.maximum(unadjusted.sum(1), 1)
    assert fdp.mean() - 3 * fdp.std(ddof=1) / np.sqrt(len(fdp)) > level

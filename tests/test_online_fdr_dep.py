"""Online FDR under dependence (harness/stats/fdr/dependent.py) against onlineFDR, and its false
discovery rate under positive dependence by simulation.

Reference numbers: onlineFDR 2.19.1 (github.com/dsrobertson/onlineFDR at 1d89c48, R CMD INSTALL on
Debian's R 4.2.2) on the vignette's 15 ``sample.df$pval`` (tests/test_online_fdr.py's VIGNETTE_P):
``LOND(p, dep = TRUE)``, ``LOND(p, alpha = 0.1, dep = TRUE)``, ``LORD(p, version = "dep")`` and
``LORD(p, alpha = 0.1, version = "dep")``; ``$alphai`` printed with sprintf("%.17g").
"""

import numpy as np
import pytest

from harness.stats.fdr import online as ofdr
from harness.stats.fdr.dependent import DEPENDENT
from harness.stats.fdr.simulate import simulate_streams

from .test_online_fdr import VIGNETTE_P

REFERENCE = {  # (method, level) -> (alpha_t, rejections)
    ('lond_dep', 0.05): ([
        0.0026758385456300436, 0.00077588038552944957, 0.00054068175242512979, 0.00039569309083043201,
        0.00030608188508093366, 0.00024677144251693283, 0.0003077364423976699, 0.00026189154811486653,
        0.00022698815768215815, 0.00019963950957725937, 0.00023693630957518914, 0.00021301399428974317,
        0.00019312652799348575, 0.00017636163894112588, 0.00016205850409342732,
    ], [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    ('lond_dep', 0.1): ([
        0.0053516770912600872, 0.0015517607710588991, 0.0016220452572753893, 0.001187079272491296,
        0.00091824565524280103, 0.0007403143275507985, 0.0008206305130604531, 0.00069837746163964407,
        0.00060530175381908835, 0.00053237202553935831, 0.00059234077393797286, 0.00053253498572435791,
        0.00048281631998371439, 0.00044090409735281471, 0.00040514626023356831,
    ], [1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    ('lord_dep', 0.05): ([
        0.0020915418598595353, 0.010020254564143207, 0.002902759497051943, 0.0010835259216734818,
        0.00055395307851967008, 0.0003345609831082114, 0.00033224540774475479, 0.00023822933702764422,
        0.00017949796211347407, 0.0001403712962271482, 0.00015350622762338596, 0.00012644388699966971,
        0.00010612790279964176, 9.047629522339981e-05, 7.8153409116948851e-05,
    ], [1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    ('lord_dep', 0.1): ([
        0.0041830837197190706, 0.020040509128286414, 0.005805518994103886, 0.0021670518433469636,
        0.0016561065636989747, 0.00100020861254843, 0.00090519586571769504, 0.00064905099045269011,
        0.00048903855229413113, 0.0003824387457233543, 0.00038827932155671062, 0.00031982771917030465,
        0.00026844038014131816, 0.00022885113568483286, 0.00019768157382984227,
    ], [1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
}


@pytest.mark.parametrize("method,level", sorted(REFERENCE))
def test_alpha_sequences_equal_onlinefdr_dependent_variants(method, level):
    alpha, rejected = REFERENCE[(method, level)]
    out = DEPENDENT[method](VIGNETTE_P, level=level)
    np.testing.assert_allclose(out.alpha, alpha, rtol=0, atol=1e-9)
    assert out.rejected.astype(int).tolist() == rejected


def _fdp(rejected, null):
    fdp = (rejected & null).sum(1) / np.maximum(rejected.sum(1), 1)
    return fdp.mean(), fdp.std(ddof=1) / np.sqrt(len(fdp))


def test_under_positive_dependence_the_dependent_variants_hold_the_level_and_saffron_does_not():
    # 1000 streams of 200 one-sided z-tests, 20% effects of 3 sd, equicorrelated (rho 0.5: one shared
    # factor per stream): LOND and LORD's dependent variants hold FDR 0.1 within 3 standard errors;
    # SAFFRON (proved for independent p-values) exceeds it by more than 3, so this check can fail.
    p, null = simulate_streams(n=200, reps=1000, pi1=0.2, effect=3.0, rho=0.5, seed=2)
    for method, procedure in DEPENDENT.items():
        out = procedure(p, level=0.1)
        fdr, se = _fdp(out.rejected, null)
        assert fdr <= 0.1 + 3 * se, (method, fdr, se)
        assert (out.rejected & ~null).sum() > 0, method  # it still finds effects
    fdr, se = _fdp(ofdr.saffron(p, level=0.1).rejected, null)
    assert fdr - 3 * se > 0.1, (fdr, se)

"""Exactly zero is zero: a spread over identical values is 0 wherever it is printed (the noise
audit, the learning curves the report, the figures and wandb show), as the seeds' std already is.
np.std of five runs that all scored 62.2222...% is 7.9e-15, which a table printed as a measured spread."""

from __future__ import annotations

import numpy as np

from harness.analysis.curves import curves
from harness.stats import exact_std
from harness.tools.noise.noise_audit import spread, std_ratio

SAME = 560 / 9  # 62.2222...: five equal floats whose mean rounds
assert np.std([SAME] * 5, ddof=1) > 0  # the trap itself, so the tests below can fail


def test_the_noise_audit_gives_identical_runs_a_std_of_exactly_zero():
    s = spread([SAME] * 5)
    assert s["std"] == 0.0 and s["range"] == 0.0
    seeds = spread([61.0, 62.5, 63.0, 60.5, 62.0])
    assert std_ratio(s, seeds) == {"ratio": 0.0, "low": None, "high": None}  # "(std 0)", not "1.2e-15x"
    assert spread([SAME, SAME, SAME + 1e-9])["std"] > 0  # a real difference, however small, stays


def test_curves_over_identical_runs_have_std_exactly_zero():
    same_steps = {(seed, "A"): {"result": {"curve": {"step": [1, 2], "acc": [SAME, 50.0 + seed]}}} for seed in range(5)}
    acc = curves(same_steps, ["A"])["A"]["acc"]
    assert acc["std"][0] == 0.0 and acc["std"][1] > 1
    # runs that logged at different steps take the other path: the same answer
    uneven = {(seed, "A"): {"result": {"curve": {"step": [1, 2 + seed], "acc": [SAME, SAME]}}} for seed in range(5)}
    acc = curves(uneven, ["A"])["A"]["acc"]
    assert acc["std"][acc["step"].index(1)] == 0.0


def test_exact_std_is_the_std_where_values_differ_and_keeps_nan():
    rows = np.array([[SAME] * 4, [1.0, 2.0, 3.0, 4.0], [1.0, np.nan, 2.0, 3.0]])
    got = exact_std(rows, axis=1)
    assert got[0] == 0.0 and got[1] == np.std([1, 2, 3, 4], ddof=1) and np.isnan(got[2])


def test_an_interval_end_at_zero_reads_0_not_the_bisections_rounding():
    # the exact sign-flip test's bound of these differences is 0: bisection lands ~1e-9 from it
    from harness.stats import compare

    d = np.array([0.8333333333333321, 0.5555555555555571, 0.0, 0.8333333333333321, 1.1111111111111107,
                  0.8333333333333321])
    a = np.array([98.0, 97.5, 98.25, 97.0, 98.5, 97.75])
    c = compare(a, a + d, margin=0.5, unit=" pts")
    low, high = c.intervals["zero"].low, c.intervals["zero"].high
    assert low != 0 and abs(low) < 1e-6 * abs(high)  # the arithmetic's 0
    sentence = c.verdict.sentence
    assert "e-0" not in sentence and "e-1" not in sentence, sentence
    assert "CI 0 to +" in sentence, sentence


def test_the_screen_prints_an_end_at_zero_as_0():
    from harness.analysis.render.summary import Fmt

    assert Fmt({"unit": ""}).interval([-1.1e-09, 0.6]) == "[0, +0.6]"
    assert Fmt({"unit": ""}).interval([0.0012, 0.6]) == "[+0.0012, +0.6]"  # a small real end stays


def test_the_figure_of_constant_differences_with_no_margin_draws_no_empty_legend(tmp_path):
    """Constant differences have no t interval to draw; with no margin either, the differences panel
    has nothing labelled, and matplotlib's "No artists with labels" warning reached the user's screen."""
    import warnings

    from harness.api import run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(["+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "data.train_limit=64",
                   "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0", "+train.kwargs.sd=0.0",
                   "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.0", "ab.seeds=[0,1,2]",
                   "stats.margin=null", "determinism.threads=1"], out_dir=tmp_path, verbose=False)
    assert res.analysis["comparisons"]["B"]["exact"] and (tmp_path / "analysis.png").is_file()
    assert not [w for w in caught if "No artists with labels" in str(w.message)]

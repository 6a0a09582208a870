"""Degenerate samples (issue 24, items 2 and 3): arms that are each constant across seeds, and a
bootstrap interval that is not defined at 3 seeds."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from harness import stats

N_TEST = 450
STEP = 100 / N_TEST  # one test example, in points
# 302 and 305 of 450 right: np.std of one arm's equal floats is ~1e-14, not 0, at 7, 10 and 11 seeds
# (their mean rounds)
LEVEL = 302 * STEP


@pytest.mark.parametrize("n", [7, 10, 11])
def test_constant_arms_give_an_auto_margin_of_exactly_0(n):
    a, b = np.full(n, LEVEL), np.full(n, LEVEL + 3 * STEP)  # every seed the same, 3 test examples apart
    # the float noise behind the auto margin of 1.085e-14 at 7 seeds
    assert max(np.std(a, ddof=1), np.std(b, ddof=1)) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning from a correlation of constant arms
        c = stats.compare(a, b, n_test=N_TEST)
    assert c.margin.value == 0.0 and c.margin.low == 0.0 and c.margin.high == 0.0
    assert "every seed gave the same value, so any real difference counts" in c.margin.description
    assert "smaller than what changing the seed does" not in c.margin.description
    assert "smaller than one test example" not in c.margin.description
    assert c.noise.std_a == c.noise.std_b == 0.0 and c.noise.correlation is None
    assert c.noise.variance_ratio is None  # 0 / 0: pairing removed nothing measurable
    assert stats.pooled_seed_std([a, b]) == 0.0 and stats.seed_std(a) == 0.0
    assert stats.mean_interval(a) == (pytest.approx(LEVEL, abs=1e-12),) * 2
    assert stats.welch_t(a, b).standard_error == 0.0


def test_seed_std_is_the_ordinary_std_when_seeds_differ():
    x = np.array([95.1, 95.3, 94.9, 95.6, 95.0]) + STEP
    assert stats.seed_std(x) == pytest.approx(np.std(x, ddof=1), rel=1e-9)
    a, b = x, x[::-1] + 0.2
    assert stats.pooled_seed_std([a, b]) == pytest.approx(math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2), rel=1e-9)


def test_bootstrap_at_three_seeds_says_in_words_why_it_is_not_defined():
    a, b = [90.0, 91.0, 92.0], [90.5, 91.2, 92.9]
    r = stats.bootstrap_ci(a, b)
    assert r.method == "studentized" and math.isinf(r.low) and math.isinf(r.high)
    assert r.note.startswith("not defined with 3 pairs: both ends infinite")
    assert "one pair 3 times" in r.note and "0.111" in r.note and "se* = 0" in r.note
    assert "read the t interval instead" in r.note
    # what analysis.json receives: the ends become null, the note says why
    assert json.loads(json.dumps(r.to_dict()["note"])) == r.note
    # from 4 distinct differences the interval is finite and the note is the usual one
    r4 = stats.bootstrap_ci(a + [93.0], b + [93.1])
    assert math.isfinite(r4.low) and math.isfinite(r4.high) and r4.note.startswith("bootstrap-t")


def test_a_comparison_of_few_pairs_shows_no_bootstrap_interval_and_says_why():
    # 6 differences all at or below -56 gave a "95%" bootstrap interval of [-145, +25] beside the verdict
    a = [120.0, 131.0, 118.0, 125.0, 140.0, 122.0]
    b = [64.0, 70.0, 55.0, 60.0, 20.0, 64.0]
    assert all(y - x <= -56 for x, y in zip(a, b))
    c = stats.compare(a, b, margin=5.0, higher_is_better=False)
    assert c.bootstrap.confidence_interval() == (None, None) and c.bootstrap.method == "none"
    assert c.bootstrap.note.startswith(f"not shown with 6 pairs: the studentized bootstrap interval is shown from "
                                       f"{stats.BOOTSTRAP_MIN_PAIRS} pairs")
    assert (c.to_dict()["bootstrap"]["low"], c.to_dict()["bootstrap"]["high"]) == (None, None)
    ten = stats.compare(a + a[:4], b + b[:4], margin=5.0, higher_is_better=False)  # from 10 pairs it is shown
    assert ten.bootstrap.method == "studentized" and ten.bootstrap.high < 0


def test_three_seeds_on_disk_analysis_json_and_report_say_why_the_bootstrap_is_undefined(tmp_path):
    from harness.analysis.analyze import analyze_dir

    from . import _results_factory as F  # the tests' synthetic result files

    root = F.write_results(tmp_path / "exp", F.make_results({"A": [90.0, 91.0, 92.0], "B": [90.5, 91.2, 92.9]}))
    analyze_dir(root, bootstrap_resamples=999)
    boot = json.loads((root / "analysis.json").read_text())["comparisons"]["B"]["bootstrap"]
    assert boot["ci"] == [None, None]  # JSON has no infinity: the ends are null ...
    assert boot["note"].startswith("not shown with 3 pairs")  # ... and the words say why
    assert "not shown with 3 pairs" in (root / "report.md").read_text()

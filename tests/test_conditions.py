"""Issue 19, item 3: dose trends over a numeric factor with three or more values (harness.stats.meta.trend,
analysis.dose_trend, the report's section and the dose-response figure's line)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from scipy.linalg import null_space

sys.path.insert(0, str(Path(__file__).parent))
import _results_factory as F  # noqa: E402

from harness.analysis.dose_trend import dose_trend as dose_trend_block  # noqa: E402
from harness.analysis.analyze import analyze  # noqa: E402
from harness.analysis.render.markdown import markdown  # noqa: E402
from harness.analysis.render.figures import write_figure  # noqa: E402
from harness.stats.meta.trend import dose_trend, linearity_rows, per_seed_slopes  # noqa: E402


def test_the_trend_is_a_t_test_of_per_seed_least_squares_slopes():
    rng = np.random.default_rng(1)
    doses = np.array([0.0, 0.1, 0.3])
    y = rng.normal(0, 1, (6, 1)) + 2.0 * doses + rng.normal(0, 0.05, (6, 3))  # a seed level plus a line
    r = dose_trend(y, doses)
    slopes = [np.polyfit(doses, row, 1)[0] for row in y]
    assert per_seed_slopes(y, doses) == pytest.approx(slopes)
    ref = sps.ttest_1samp(slopes, 0.0)
    assert r.slope == pytest.approx(np.mean(slopes)) and r.pvalue == pytest.approx(ref.pvalue)
    low, high = r.confidence_interval()
    ci = ref.confidence_interval(0.95)
    assert (low, high) == pytest.approx((ci.low, ci.high)) and low < 2.0 < high
    # three doses: the departure from a line is the t test of the per-seed second divided differences
    second = [2 * ((row[2] - row[1]) / 0.2 - (row[1] - row[0]) / 0.1) / 0.3 for row in y]
    assert r.curvature == pytest.approx(np.mean(second))
    assert r.linearity_pvalue == pytest.approx(sps.ttest_1samp(second, 0.0).pvalue)
    assert r.linearity_statistic == pytest.approx(sps.ttest_1samp(second, 0.0).statistic ** 2)
    # the doses in any order give the same answer
    assert dose_trend(y[:, ::-1], doses[::-1]).slope == pytest.approx(r.slope)


def test_departure_from_a_line_with_more_doses_is_hotellings_t2_on_the_higher_contrasts():
    rng = np.random.default_rng(2)
    doses = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    y = rng.normal(0, 1, (9, 1)) + np.log(doses) + rng.normal(0, 0.2, (9, 5))  # a curve, not a line
    f, df1, df2, p = linearity_rows(y, doses)
    # any basis of the contrasts orthogonal to (1, dose) gives the same T^2 (it is invariant to the basis)
    z = y @ null_space(np.vstack([np.ones(5), doses]))
    n, q = z.shape
    t2 = n * z.mean(0) @ np.linalg.inv(np.cov(z, rowvar=False)) @ z.mean(0)
    assert (df1, df2) == (q, n - q) == (3, 6)
    assert f[0] == pytest.approx(t2 * (n - q) / (q * (n - 1))) and p[0] == pytest.approx(sps.f.sf(f[0], q, n - q))
    assert p[0] < 0.05  # log(dose) bends
    with pytest.raises(ValueError, match="at least 3 distinct"):
        dose_trend(y[:, :2], doses[:2])


def _three_dose_results(shifts=(0.0, 0.5, 1.0)):
    arms = {"A": 0.0, "B": 0.1, "C": 0.2}
    values = F.accuracies(8, rng_seed=5, arms=tuple(arms))
    values = {arm: [float(v) for v in F.quantise(np.array(column) + s)]
              for (arm, column), s in zip(values.items(), shifts)}
    items = []
    for arm, column in values.items():
        for seed, value in enumerate(column):
            items.append(F.make_result(seed, arm, value, arms=arms))
    return items, values, arms


def test_the_dose_trend_block_reads_the_runs_and_reaches_the_report_and_figure(tmp_path):
    items, values, arms = _three_dose_results()
    usable = {(r["seed"], r["arm"]): {"result": r, "value": r["metrics"]["test_accuracy"]} for r in items}
    block = dose_trend_block(usable, list(arms), 0.05)
    table = np.array([values[a] for a in arms]).T
    ref = dose_trend(table, list(arms.values()))
    assert block["doses"] == [0.0, 0.1, 0.2] and block["seeds"] == 8
    assert block["slope_per_unit"] == pytest.approx(ref.slope) and block["pvalue"] == pytest.approx(ref.pvalue)
    assert block["trend"] and block["linearity"]["df"] == [1, 7]
    # two arms, or arms whose factor value is not a number: no dose trend
    assert dose_trend_block({k: v for k, v in usable.items() if k[1] != "C"}, ["A", "B"], 0.05) is None
    named = {k: {"result": {**v["result"], "factor_value": str(v["result"]["factor_value"])}, "value": v["value"]}
             for k, v in usable.items()}
    assert dose_trend_block(named, list(arms), 0.05) is None

    analysis = analyze(items)
    assert analysis["dose_trend"] == block  # the analysis carries it to analysis.json
    text = markdown(analysis)
    assert "## Dose trend" in text and "per unit of loss.label_smoothing" in text and "departure from a line" in text
    write_figure(analysis, tmp_path / "analysis.png")
    assert (tmp_path / "analysis.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

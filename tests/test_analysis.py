"""harness.analysis.analyze, harness.analysis.render.report and the `python -m harness.analyze` command, on synthetic
result files built by tests/_results_factory.py."""

import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

from harness import results as results_io
import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))  # the factory lives beside the tests

import _results_factory as F  # noqa: E402

from harness import stats
from harness.analysis.render import report as report  # noqa: E402
from harness.analysis.render import summary  # noqa: E402
from harness.analysis.render import markdown  # noqa: E402
from harness.analysis.analyze import analyze, analyze_dir  # noqa: E402
from harness.analysis import SCHEMA
from harness.analysis import AnalysisError
from harness.tools.analyze import main  # noqa: E402
from harness.results import ResultsError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FAST = {"bootstrap_resamples": 999}  # the resampling tests live in test_stats.py


def _tree(tmp_path, values=None, **kw):
    return F.write_results(tmp_path / "exp", F.make_results(values or F.accuracies(10, shift=0.5), **kw))


def _finite_everywhere(obj):
    json.dumps(obj, allow_nan=False)  # raises on NaN or infinity
    return True


# -- the analysis dict --------------------------------------------------------------------------


def test_analysis_of_ten_seeds_has_the_documented_structure():
    values = F.accuracies(10, shift=0.5)
    a = analyze(F.make_results(values), **FAST)
    assert a["schema"] == SCHEMA
    assert list(a) == [
        "schema", "declaration", "departures", "experiment", "factor", "metric", "unit", "direction", "higher_is_better", "directions",
        "alpha", "baseline", "margin", "arms", "noise_floor", "test_set_noise", "pairing_verified", "pairing", "setup",
        "identity", "multiple_comparisons", "comparisons", "curves", "dose_trend", "dose_trend_why", "not_compared", "excluded", "unreadable",
        "data_unverified",
    ]
    assert (a["experiment"], a["factor"], a["baseline"]) == (F.EXPERIMENT, F.FACTOR, "A")
    assert list(a["arms"]) == ["A", "B"]
    assert a["arms"]["B"]["mean"] == pytest.approx(np.mean(values["B"]))
    assert a["arms"]["B"]["std"] == pytest.approx(np.std(values["B"], ddof=1))
    assert a["arms"]["B"]["factor_value"] == 0.1
    assert a["pairing_verified"] == ["init", "data_order"]
    c = a["comparisons"]["B"]
    assert c["n_pairs"] == 10 and c["pairs"][3] == [3, values["A"][3], values["B"][3]]
    # the numbers are the statistics module's, on the paired values
    t = stats.paired_t(values["A"], values["B"])
    assert c["t"]["pvalue"] == pytest.approx(t.pvalue) and c["t"]["ci"] == pytest.approx(list(t.confidence_interval()))
    assert a["margin"]["source"] == "auto"
    assert a["margin"]["value"] == pytest.approx(a["noise_floor"]["pooled_seed_std"])
    assert c["verdict"]["code"] in stats.VERDICTS and c["verdict"]["sentence"]
    assert c["decision"]["n_comparisons"] == 1
    assert c["decision"]["pvalues"]["zero"] == pytest.approx(max(c["t"]["pvalue"], 2.0 ** (1 - c["n_moved"])))
    assert a["excluded"] == [] and a["unreadable"] == []
    assert _finite_everywhere(a)
    # deterministic: the same input gives the same JSON text
    assert json.dumps(a) == json.dumps(analyze(F.make_results(values), **FAST))


def test_a_clear_improvement_is_better_beyond_the_margin():
    a = analyze(F.make_results(F.accuracies(10, shift=2.0, noise=0.2)), **FAST)
    assert a["comparisons"]["B"]["verdict"]["code"] == "better"
    assert a["comparisons"]["B"]["minimum_effect"]["pvalue"] < 0.05


def test_identical_arms_get_the_identical_verdict_with_no_nan_and_no_warnings():
    column = F.accuracies(10)["A"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        items = F.make_results({"A": column, "B": list(column)})
        for r in items:  # the factor changed nothing: both arms end at the same weights
            r["fingerprints"]["final"] = F._hex("final", r["seed"])
        a = analyze(items, **FAST)
    c = a["comparisons"]["B"]
    assert c["verdict"]["code"] == "identical"
    assert "identical results: the factor did not change the numerics" in c["verdict"]["sentence"]
    assert c["final_weights_identical"] is True
    assert c["t"]["pvalue"] == 1.0 and c["d_z"] is None
    assert _finite_everywhere(a)


def test_a_lower_loss_is_better():
    rng = np.random.default_rng(0)
    items = []
    for seed in range(8):
        level = 0.3 + rng.normal(0, 0.02)
        for arm, shift in (("A", 0.0), ("B", -0.05)):
            items.append(F.make_result(seed, arm, None, metrics={"test_loss": level + shift + rng.normal(0, 0.005)}))
    a = analyze(items, metric="test_loss", margin=0.01, **FAST)
    assert a["higher_is_better"] is False and a["unit"] == ""
    assert a["comparisons"]["B"]["verdict"]["code"] == "better"


# -- runs that do not count ---------------------------------------------------------------------


def test_a_failed_run_is_excluded_and_named_with_its_error():
    items = F.make_results(F.accuracies(10, shift=0.5))
    items = [r for r in items if (r["seed"], r["arm"]) != (3, "B")]
    items.append(F.make_result(3, "B", None, status="failed",
                               error={"type": "NonFiniteLoss", "message": "loss became nan", "step": 12}))
    for r in items:  # a divergence left out as before issue 33 (the default, worst, counts it: test_diverged.py)
        r["config"]["stats"]["diverged"] = "exclude"
    a = analyze(items, **FAST)
    assert {"seed": 3, "arm": "B", "reason": "failed: NonFiniteLoss: loss became nan (at step 12)"} in a["excluded"]
    # its baseline partner has nobody to be compared with
    assert any(e["seed"] == 3 and e["arm"] == "A" and e["reason"].startswith("unpaired") for e in a["excluded"])
    assert a["comparisons"]["B"]["n_pairs"] == 9 and 3 not in a["comparisons"]["B"]["seeds"]
    assert a["arms"]["A"]["n"] == 9


def test_a_nan_or_missing_metric_is_excluded_and_named():
    # B clearly better (shift 3): a settled verdict, so no seeds-needed search (~4 s at shift 0.5, where
    # the 8 pairs left give 'differs' and the margin question's seeds are searched); what is checked is
    # which runs are left out and why
    items = F.make_results(F.accuracies(10, shift=3.0))
    items[2]["metrics"]["test_accuracy"] = float("nan")
    del items[13]["metrics"]["test_accuracy"]
    for r in items:  # a nan metric is a divergence: left out here as before issue 33 (test_diverged.py counts it)
        r["config"]["stats"]["diverged"] = "exclude"
    a = analyze(items, **FAST)
    reasons = {(e["seed"], e["arm"]): e["reason"] for e in a["excluded"]}
    assert reasons[(2, "A")] == "metric test_accuracy is nan"
    assert reasons[(3, "B")] == "metric test_accuracy is missing"
    assert a["comparisons"]["B"]["n_pairs"] == 8


def test_an_unpaired_run_is_dropped_and_named():
    values = F.accuracies(10, shift=0.5)
    items = F.make_results(values) + [F.make_result(10, "B", 95.0)]
    a = analyze(items, **FAST)
    assert {"seed": 10, "arm": "B",
            "reason": "unpaired: the baseline arm A has no usable result for this seed"} in a["excluded"]
    assert a["arms"]["B"]["n"] == 10 and a["comparisons"]["B"]["n_pairs"] == 10


def test_fewer_than_three_pairs_is_refused():
    with pytest.raises(AnalysisError, match="At least 3 seeds"):
        analyze(F.make_results(F.accuracies(2)), **FAST)
    # failed runs leave too few pairs: the message names them
    items = F.make_results(F.accuracies(4))
    items = [r for r in items if not (r["arm"] == "B" and r["seed"] < 2)]
    items += [F.make_result(s, "B", None, status="failed") for s in (0, 1)]
    with pytest.raises(AnalysisError, match=r"B vs A has 2 .*seed 0 arm B \(failed: RuntimeError: loss became NaN"):
        analyze(items, **FAST)


def test_a_metric_that_no_result_has_names_the_available_ones():
    with pytest.raises(AnalysisError) as e:
        analyze(F.make_results(F.accuracies(5)), metric="val_accuracy", **FAST)
    assert "'val_accuracy'" in str(e.value)
    assert "n_test, n_train, test_accuracy, test_loss, train_loss" in str(e.value)


# -- refusals: pairing, mixing, arms ------------------------------------------------------------


def test_a_pairing_violation_is_an_error_naming_seed_arms_and_fingerprint():
    items = F.make_results(F.accuracies(6, shift=0.5))
    for r in items:
        if (r["seed"], r["arm"]) == (4, "B"):
            r["fingerprints"]["init"] = "0123456789abcdef"
    with pytest.raises(AnalysisError) as e:
        analyze(items, **FAST)
    message = str(e.value)
    assert "seed 4, arms A, B: fingerprints.init differs" in message and "B=0123456789abcdef" in message


def test_a_fingerprint_the_pairing_does_not_require_may_differ():
    items = F.make_results(F.accuracies(6, shift=0.5), pairing={"init": False, "data_order": True})
    for r in items:
        if r["arm"] == "B":
            r["fingerprints"]["init"] = "0123456789abcdef"  # e.g. the factor changes the model
    a = analyze(items, **FAST)
    assert a["pairing_verified"] == ["data_order"]


def test_results_of_two_experiments_are_not_mixed():
    items = F.make_results(F.accuracies(4)) + F.make_results(F.accuracies(4), experiment="lr_ab", factor="optim.lr")
    with pytest.raises(AnalysisError) as e:
        analyze(items, **FAST)
    assert "'loss_ab' with factor 'loss.label_smoothing' (8 results)" in str(e.value)
    assert "'lr_ab' with factor 'optim.lr' (8 results)" in str(e.value)


def test_two_configurations_within_one_arm_are_not_mixed():
    items = F.make_results(F.accuracies(6))
    items[-1]["config_hash"] = "feedfacefeedface"
    with pytest.raises(AnalysisError, match=r"seed 5 arm B\) records config_hash feedfacefeedface \(its config block"):
        analyze(items, **FAST)


def test_arms_follow_the_config_order_and_the_baseline_can_be_chosen():
    values = F.accuracies(6, shift=0.5, arms=("ctrl", "alt"))
    a = analyze(F.make_results(values), **FAST)
    assert list(a["arms"]) == ["ctrl", "alt"] and a["baseline"] == "ctrl"
    flipped = analyze(F.make_results(values), baseline="alt", **FAST)
    assert flipped["comparisons"]["ctrl"]["mean_diff"] == pytest.approx(-a["comparisons"]["alt"]["mean_diff"])
    with pytest.raises(AnalysisError, match="the arms are: ctrl, alt"):
        analyze(F.make_results(values), baseline="B", **FAST)


def test_three_arms_are_each_compared_with_the_baseline_at_alpha_over_k():
    rng = np.random.default_rng(2)
    level = 95 + rng.normal(0, 0.8, 8)
    values = {arm: list(F.quantise(level + shift + rng.normal(0, 0.3, 8)))
              for arm, shift in (("A", 0), ("B", 0.6), ("C", 0.1))}
    a = analyze(F.make_results(values), **FAST)
    assert list(a["comparisons"]) == ["B", "C"]
    for arm in ("B", "C"):
        c = a["comparisons"][arm]
        floor = 2.0 ** (1 - c["n_moved"])
        assert c["decision"]["pvalues"]["zero"] == pytest.approx(min(1, 2 * max(c["t"]["pvalue"], floor)))
        assert c["intervals"]["zero"]["level"] == pytest.approx(1 - 0.05 / 2)
    assert a["multiple_comparisons"] == {**a["multiple_comparisons"], "method": "bonferroni", "comparisons": 2}


def test_extra_is_merged_but_may_not_overwrite():
    items = F.make_results(F.accuracies(4))
    a = analyze(items, extra={"certificate": {"line": "bitwise reproducible: yes (3 steps)", "reproducible": True}}, **FAST)
    assert a["certificate"]["reproducible"] is True
    with pytest.raises(AnalysisError, match="'metric'"):
        analyze(items, extra={"metric": "x"}, **FAST)


def test_bad_options_are_refused_with_what_is_allowed():
    items = F.make_results(F.accuracies(4))
    with pytest.raises(AnalysisError, match="margin must be a finite number >= 0"):
        analyze(items, margin=-1.0, **FAST)
    with pytest.raises(AnalysisError, match="alpha must be a number between 0 and 0.5"):
        analyze(items, alpha=5, **FAST)


# -- folders ------------------------------------------------------------------------------------


def test_analyze_dir_writes_the_three_files_with_certificate_and_unreadable(tmp_path):
    root = _tree(tmp_path)
    (root / "runs" / "seed=99" / "arm=B").mkdir(parents=True)
    (root / "runs" / "seed=99" / "arm=B" / "result.json").write_text("{not json")
    made_for = F.make_results(F.accuracies(10, shift=0.5))[0]["config_hash"]  # seed 0, arm A
    (root / "certificate.json").write_text(json.dumps({"line": "bitwise reproducible: yes (440 steps)", "reproducible": True,
                                                       "seed": 0, "arm": "A", "config_hash": made_for}))
    a = analyze_dir(root, **FAST)
    assert {p.name for p in root.iterdir()} >= {"analysis.json", "report.md", "analysis.png"}
    assert a["certificate"]["line"] == "bitwise reproducible: yes (440 steps)"
    assert a["unreadable"][0]["path"] == "runs/seed=99/arm=B/result.json"
    assert a["unreadable"][0]["reason"].startswith("not valid JSON")
    first = (root / "analysis.json").read_bytes()
    assert json.loads(first) == a
    assert str(tmp_path) not in first.decode()  # no absolute paths
    analyze_dir(root, **FAST)
    assert (root / "analysis.json").read_bytes() == first
    assert "bitwise reproducible: yes (440 steps)" in (root / "report.md").read_text()
    assert (root / "analysis.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analyze_dir_refuses_empty_corrupt_and_missing_folders(tmp_path):
    with pytest.raises(ResultsError):
        analyze_dir(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalysisError, match="No result.json files under"):
        analyze_dir(tmp_path / "empty")
    bad = tmp_path / "bad" / "runs" / "seed=0" / "arm=A"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{")
    with pytest.raises(AnalysisError, match=r"No readable result.json .*runs/seed=0/arm=A/result.json: not valid JSON"):
        analyze_dir(tmp_path / "bad")


# -- the report ---------------------------------------------------------------------------------


def test_the_table_and_markdown_show_the_numbers_verdict_exclusions_and_certificate():
    items = F.make_results(F.accuracies(10, shift=0.5))
    items = [r for r in items if (r["seed"], r["arm"]) != (7, "B")] + [F.make_result(7, "B", None, status="failed")]
    a = analyze(items, extra={"certificate": {"line": "bitwise reproducible: yes (440 steps)", "reproducible": True}}, **FAST)
    buffer = io.StringIO()
    report.render_table(a, Console(file=buffer, width=1000), tables=True)  # wide: no line wrapping inside sentences
    text = buffer.getvalue()
    c = a["comparisons"]["B"]
    for expected in (
        "mean ± std", f"{a['arms']['A']['mean']:.2f} ± {a['arms']['A']['std']:.2f}", "seed std, pooled",
        "test-set floor", f"[{c['t']['ci'][0]:+.2f}, {c['t']['ci'][1]:+.2f}] pts", "bootstrap 95% CI",
        "p, Wilcoxon signed-rank", "p, sign-flip permutation", "effect size d_z", c["verdict"]["sentence"],
        "failed: RuntimeError: loss became NaN (at step 12)", "bitwise reproducible: yes (440 steps)",
    ):
        assert expected in text, expected
    md = markdown.markdown(a)
    assert c["verdict"]["sentence"] in md and "| 7 | B | failed: RuntimeError" in md


def test_seeds_needed_are_shown_when_undecided():
    a = analyze(F.make_results(F.accuracies(5, shift=0.0, noise=0.5, rng_seed=3)), margin=0.2, **FAST)
    c = a["comparisons"]["B"]
    assert c["verdict"]["code"] == "undecided"
    buffer = io.StringIO()
    report.render_table(a, Console(file=buffer, width=200), tables=True)
    need = c["seeds_needed"]
    low, high = need["at_margin_range"]
    # from 5 seeds the count is uncertain: shown with its range over the sd's 95% interval
    assert low < need["at_margin"] < high
    assert f"{need['at_margin']} ({low} to {high}) / {need['at_observed']} (" in buffer.getvalue()


# -- the command --------------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.analyze", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cli_prints_the_table_and_writes_byte_identical_analysis(tmp_path, capsys):
    root = _tree(tmp_path)
    first = _cli(root, "--bootstrap-resamples", "999", "--tables")
    assert first.returncode == 0, first.stderr
    assert "verdict" in first.stdout and "mean ± std" in first.stdout
    written = (root / "analysis.json").read_bytes()
    assert json.loads(written)["comparisons"]["B"]["n_pairs"] == 10
    # a second run (in this process, to spare a second interpreter start) writes the same bytes
    assert main([str(root), "--bootstrap-resamples", "999"]) == 0
    assert "verdict" in capsys.readouterr().out
    assert (root / "analysis.json").read_bytes() == written


def test_cli_bad_input_exits_2_without_traceback(tmp_path):
    result = _cli(tmp_path / "nowhere")
    assert result.returncode == 2
    assert "no such file or folder" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("case, message", [
    ("empty", "No result.json files under"),
    ("corrupt", "No readable result.json"),
    ("metric", "'val_accuracy' is in none of the"),
    ("two_pairs", "At least 3 seeds"),
    ("missing", "no such file or folder"),
])
def test_main_bad_inputs_give_a_message_and_exit_2(tmp_path, capsys, case, message):
    root = tmp_path / case
    args = [str(root)]
    if case == "empty":
        root.mkdir()
    elif case == "corrupt":
        (root / "runs").mkdir(parents=True)
        (root / "runs" / "result.json").write_text("[1, 2")
    elif case == "metric":
        F.write_results(root, F.make_results(F.accuracies(4)))
        args += ["--metric", "val_accuracy"]
    elif case == "two_pairs":
        F.write_results(root, F.make_results(F.accuracies(2)))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness.analyze: ") and message in err and "Traceback" not in err


def test_main_no_write_only_prints(tmp_path, capsys):
    root = _tree(tmp_path)
    assert main([str(root), "--no-write", "--tables", "--margin", "0.3", "--bootstrap-resamples", "999"]) == 0
    assert "given: 0.3 pts" in capsys.readouterr().out
    assert not (root / "analysis.json").exists()


# -- metric directions: declared, never guessed (issue 10 item 7) -------------------------------


def _rmse_results(shift=-0.05, declare=True):
    rng = np.random.default_rng(4)
    items = []
    for seed in range(8):
        level = 0.5 + rng.normal(0, 0.03)
        for arm, delta in (("A", 0.0), ("B", shift)):
            metrics = {"rmse": level + delta + rng.normal(0, 0.005), "test_loss": 0.3 + rng.normal(0, 0.01),
                       "ece": 0.1 + delta + rng.normal(0, 0.002)}
            items.append(F.make_result(seed, arm, None, metrics=metrics,
                                       directions={"rmse": "min", "ece": "min"} if declare else {}))
    return items


def test_a_lower_is_better_metric_that_b_lowers_is_reported_better():
    a = analyze(_rmse_results(), metric="rmse", margin=0.01, **FAST)
    assert a["direction"] == "min" and a["higher_is_better"] is False
    assert a["directions"] == {"rmse": "min", "ece": "min"}
    c = a["comparisons"]["B"]
    assert c["verdict"]["code"] == "better" and c["mean_diff"] < 0
    # ece (declared min) is reported too; test_loss has no declared direction here, so it is not
    assert set(c["other_metrics"]) == {"ece"}
    assert c["other_metrics"]["ece"]["reading"] == "better" and c["other_metrics"]["ece"]["pvalue_holm"] < 0.05


def test_the_name_decides_nothing_a_rising_loss_named_metric_declared_max_is_better():
    import enum

    items = _rmse_results(shift=+0.05)
    a = analyze(items, metric="rmse", directions={"rmse": "max"}, margin=0.01, **FAST)
    assert a["comparisons"]["B"]["verdict"]["code"] == "better"
    Direction = enum.Enum("Direction", {"max": "max", "min": "min"})  # as a structured config declares it
    assert analyze(items, metric="rmse", directions={"rmse": Direction.max}, margin=0.01, **FAST)["direction"] == "max"


def test_a_primary_metric_without_a_declared_direction_is_refused_with_how_to_declare_it():
    with pytest.raises(AnalysisError) as e:
        analyze(_rmse_results(declare=False), metric="rmse", **FAST)
    assert "stats.metrics.rmse=max" in str(e.value) and "--direction" in str(e.value)
    with pytest.raises(AnalysisError, match="'max' or 'min'"):
        analyze(_rmse_results(), metric="rmse", directions={"rmse": "down"}, **FAST)


def test_cli_direction_for_a_metric_the_config_does_not_declare(tmp_path, capsys):
    root = F.write_results(tmp_path / "exp", _rmse_results(declare=False))
    assert main([str(root), "--metric", "rmse", "--no-write", "--bootstrap-resamples", "999"]) == 2
    assert "no declared direction" in capsys.readouterr().err
    assert main([str(root), "--metric", "rmse", "--direction", "min", "--margin", "0.01",
                 "--bootstrap-resamples", "999"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the screen wraps its lines
    assert "analysed with (an alternative, not the declaration): metric rmse (lower is better)" in out
    assert "B is better than A" in out
    # an alternative analysis: its own folder, the departures named, nothing written over the declared files
    assert not (root / "analysis.json").exists()
    (written_to,) = (root / "alternatives").iterdir()
    written = json.loads((written_to / "analysis.json").read_text())
    assert written["directions"] == {"rmse": "min"} and written["direction"] == "min"
    assert written["departures"] == ["metric rmse (declared: test_accuracy)", "direction of rmse min (declared: none)",
                                     "margin 0.01 (declared: auto)"]


# -- the test set's own noise (issue 11, defect 7) ----------------------------------------------


def _with_examples(n_seeds=6, gain=0.04, rng_seed=5, arms=("A", "B")):
    """Results whose test_accuracy is exactly what their recorded per-example correctness gives."""
    rng = np.random.default_rng(rng_seed)
    difficulty = rng.normal(0, 1, F.N_TEST)
    items = []
    arm_values = {a: float(i) / 10 for i, a in enumerate(arms)}
    for seed in range(n_seeds):
        shift = rng.normal(0, 0.2)
        for i, arm in enumerate(arms):
            p = 1 / (1 + np.exp(-(2.5 + 3 * difficulty + shift + 30 * gain * i * rng.normal(1, 1, F.N_TEST))))
            correct = rng.random(F.N_TEST) < p
            r = F.make_result(seed, arm, float(100 * correct.mean()), arms=arm_values, examples=correct)
            r["env"]["mode"] = "strict"
            r["config"]["precision"] = "fp32"
            # the recorded hashes are of the config block (the analysis recomputes and compares them)
            r["config_hash"] = results_io.config_digest(r["config"])
            r["base_hash"] = results_io.config_digest(r["config"], exclude_factor=r["factor"])
            items.append(r)
    return items


def test_recorded_examples_put_the_test_sets_noise_into_an_interval_and_a_verdict_line():
    a = analyze(_with_examples(), **FAST)
    assert a["test_set_noise"]["available"] and a["test_set_noise"]["n_examples"] == F.N_TEST
    c = a["comparisons"]["B"]
    ts = c["test_set"]
    assert ts["se_test_set"] > 0 and ts["se_total"] >= ts["se_seeds"]
    assert ts["mean_diff"] == pytest.approx(c["mean_diff"])
    low, high = ts["distribution_ci"]
    assert low < c["mean_diff"] < high and (high - low) > (c["intervals"]["zero"]["high"] - c["intervals"]["zero"]["low"])
    assert c["verdict"]["beyond_test_set"].startswith("beyond this test set")
    text = markdown.markdown(a)
    assert "CI for the data distribution" in text and c["verdict"]["beyond_test_set"] in text
    assert a["setup"] == {"determinism": ["strict"], "device": ["cpu"], "precision": ["fp32"], "threads": ["2"]}
    assert "setup: determinism strict; device cpu; precision fp32; threads 2" in text


def test_without_recorded_examples_the_report_says_the_test_set_is_not_in_the_intervals():
    a = analyze(F.make_results(F.accuracies(6, shift=0.5)), **FAST)
    assert a["test_set_noise"]["available"] is False
    assert "not recorded" in a["test_set_noise"]["reason"]
    assert a["comparisons"]["B"]["test_set"] is None and a["comparisons"]["B"]["verdict"]["beyond_test_set"] == ""
    assert "test-set noise: not in the intervals: per-example correctness" in markdown.markdown(a)


def test_examples_that_do_not_match_the_metric_are_not_used():
    # issue 17: a run whose metric its own per-example record contradicts is excluded, named with
    # both values; the test-set noise comes from the runs that agree with their records
    items = _with_examples()
    items[3]["metrics"]["test_accuracy"] += 100 / F.N_TEST
    a = analyze(items, **FAST)
    assert (items[3]["seed"], items[3]["arm"]) == (1, "B")
    reasons = {x["arm"]: x["reason"] for x in a["excluded"] if x["seed"] == 1}
    assert set(reasons) == {"A", "B"} and reasons["A"].startswith("unpaired")
    assert reasons["B"].startswith("test_accuracy ") and "disagrees with its per-example record" in reasons["B"]
    assert f"from {F.N_TEST} examples): excluded" in reasons["B"]
    assert a["test_set_noise"]["available"] and items[3]["seed"] not in a["arms"]["B"]["seeds"]
    usable = {(r["seed"], r["arm"]): {"value": r["metrics"]["test_accuracy"], "result": r} for r in items}
    by_arm = {arm: {s: run for (s, x), run in usable.items() if x == arm} for arm in ("A", "B")}
    from harness.analysis import example_records
    from harness.config.metric_spec import metric_spec

    _, note = example_records.examples({"B": list(range(6))}, by_arm, "A", metric_spec("test_accuracy", F.DIRECTIONS["test_accuracy"]))
    assert note["available"] is False and "not the same test set" in note["reason"]


# -- numbers a reader misreads (defect 8) --------------------------------------------------------


def _table(a) -> str:
    buffer = io.StringIO()
    report.render_table(a, Console(file=buffer, width=1000), tables=True)
    return buffer.getvalue()


def test_negative_correlation_and_a_constant_arm_are_worded_plainly():
    level = np.array([95.0, 96.0, 94.0, 95.5, 94.5, 96.5])
    a_vals = list(F.quantise(level))
    b_vals = list(F.quantise(190.5 - level))  # B moves opposite to A across seeds: rho = -1
    text = _table(analyze(F.make_results({"A": a_vals, "B": b_vals}), **FAST))
    assert "negatively correlated, so pairing removed nothing" in text and "pairing left" not in text
    constant = [95.0] * 6
    text = _table(analyze(F.make_results({"A": constant, "B": a_vals}), **FAST))
    assert "correlation undefined: A gives the same value in every seed" in text and "rho —" not in text


def test_wilcoxon_variant_is_labelled_for_readers_of_r():
    values = {"A": [95.0] * 8, "B": list(F.quantise([95.0, 95.0, 95.28, 95.28, 95.56, 94.72, 95.28, 95.56]))}
    text = _table(analyze(F.make_results(values), **FAST))
    assert "Wilcoxon signed-rank (Pratt)" in text and "R's wilcox.test(paired = TRUE) drops zeros first" in text


# -- figures (defect 9) -------------------------------------------------------------------------


def test_the_figure_with_three_numeric_arms_has_verdict_title_pairs_dose_response_and_curves(tmp_path):
    from harness.analysis.render.figures import figure

    a = analyze(_with_examples(arms=("A", "B", "C")), **FAST)
    fig = figure(a, title=summary.title(a), fmt=summary.Fmt(a))
    pairs_ax, diffs_ax, dose_ax, curves_ax = fig.axes
    assert "B vs A: " in fig._suptitle.get_text() and a["comparisons"]["C"]["verdict"]["code"].replace("_", " ") in fig._suptitle.get_text()
    # each arm's lines stay within its own pair of columns: none passes through another arm
    spans = [abs(line.get_xdata()[1] - line.get_xdata()[0]) for line in pairs_ax.lines]
    assert len(spans) == 12 and max(spans) < 0.5
    assert dose_ax.get_xlabel() == "loss.label_smoothing (factor value)"
    assert len(curves_ax.lines) == 3  # one mean curve per arm, with its band
    analyze_dir(F.write_results(tmp_path / "exp", _with_examples(arms=("A", "B", "C"))), **FAST)
    md = (tmp_path / "exp" / "report.md").read_text()
    assert "](analysis.png)" in md and "## Per seed" in md and "| seed | A | B | C | B - A | C - A |" in md

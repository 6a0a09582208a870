"""The reproducibility toolkit: harness.diff, harness.golden, harness.audit, harness.noise_audit.

Runs are tiny (a dozen steps on 256 digits). threads=1 where the thread count is not the point: it
is the fastest setting on a busy 2-core machine, and the bits do not care which count is pinned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.tools import audit as audit
from harness.tools.diff import diff as diff
from harness.tools.golden import golden as golden
from harness.tools.noise import noise_audit as noise_audit
from harness.experiment.runner import run_one
from harness.results import save_weights
from harness.results import write_json

from .conftest import TEST_CONF, LazyRuns, compose_cfg, run_cli

STEPS = 12
SMALL = ["+experiment=loss_ab", "workers=1", f"train.max_steps={STEPS}", "data.train_limit=256", "logger=none", "progress=false"]


def _save_run(folder: Path, overrides: list[str]) -> Path:
    """Train one (seed, arm) and lay it out as the experiment does: result.json and weights.pt."""
    arm_cfg, seed, arm = golden.select_run(compose_cfg(SMALL + overrides))
    result, weights = run_one(arm_cfg, seed, arm)
    assert result["status"] == "completed", result["error"]
    write_json(folder / "result.json", result)
    if weights is not None:
        save_weights(folder / "weights.pt", weights)
    return folder


KEEP = ["repro.save_weights=true", f"repro.keep_step_weights={STEPS}"]
# Each run is trained on first use, once per xdist worker: only the tests that read a 2-thread run
# are solo (tests/conftest.py); the others train threads1 and plain beside the other worker's tests.
RUNS = {
    "threads1": KEEP + ["determinism.threads=1"],
    "threads2": KEEP + ["determinism.threads=2"],
    "threads2_again": KEEP + ["determinism.threads=2"],
    "plain": ["determinism.threads=1"],  # no weights.pt
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return LazyRuns(tmp_path_factory.mktemp("runs"), lambda folder, name: _save_run(folder, RUNS[name]))


# -- harness.diff -------------------------------------------------------------------------------


@pytest.mark.solo  # reads a run trained with 2 threads: the count is the point
def test_diff_one_vs_two_threads_names_the_first_divergent_step_and_a_growing_butterfly(runs, tmp_path, capsys):
    plot, report_path = tmp_path / "butterfly.png", tmp_path / "diff.json"
    code = diff.main([str(runs["threads1"]), str(runs["threads2"]), "--plot", str(plot), "--json", str(report_path)])
    out = capsys.readouterr().out
    assert code == 1
    report = json.loads(report_path.read_text())
    assert ["determinism.threads", 1, 2] in report["config_differences"]
    assert report["init_equal"] and report["data_order_equal"]  # same seed: they part ways in training
    first = report["first_params_step"]
    assert first is not None and 1 <= first <= STEPS
    curve = report["step_weights"]["max_abs_dw"]
    assert len(curve) == STEPS
    assert all(d == 0 for d in curve[: first - 1])  # identical before the first divergent step
    assert report["step_weights"]["first_nonzero_step"] == first
    assert curve[-1] > curve[first - 1] > 0  # the difference grows
    assert report["weights"]["overall"] == pytest.approx(max(report["weights"]["per_layer"].values()))
    assert report["weights"]["overall"] > 0
    assert plot.is_file() and plot.stat().st_size > 0
    assert f"parameters:             first differ at step {first}" in out
    assert "features.0.weight" in out and str(plot) in out


@pytest.mark.solo  # reads a run trained with 2 threads: the count is the point
def test_diff_same_thread_count_is_identical(runs, capsys):
    code = diff.main([str(runs["threads2"]), str(runs["threads2_again"] / "result.json")])
    assert code == 0
    assert f"The runs are bit-identical: {STEPS} steps" in capsys.readouterr().out
    assert not (runs["threads2"] / diff.PLOT_NAME).exists()  # nothing to draw for identical runs


@pytest.mark.solo  # reads a run trained with 2 threads: the count is the point
def test_diff_without_weights_still_finds_the_step_and_says_what_is_missing(runs, capsys):
    code = diff.main([str(runs["plain"]), str(runs["threads2"]), "--no-plot"])
    out = capsys.readouterr().out
    assert code == 1
    assert "not available (no weights.pt beside A: rerun with repro.save_weights=true" in out
    assert "first differ at step" in out


def test_diff_missing_path_is_bad_input(runs):
    proc = run_cli(["/no/such/run", str(runs["threads1"])], module="harness.diff", timeout=120)
    assert proc.returncode == 2
    assert "/no/such/run: no such file or folder" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_diff_folder_with_several_runs_or_none_is_bad_input(runs, tmp_path, capsys):
    assert runs["plain"].is_dir()  # a second run in the folder (it holds the runs trained so far)
    assert diff.main([str(runs["threads1"].parent), str(runs["threads1"])]) == 2
    assert f"holds {len(runs)} runs" in capsys.readouterr().err
    assert diff.main([str(tmp_path), str(runs["threads1"])]) == 2
    assert "no result.json in this folder" in capsys.readouterr().err


def test_diff_unreadable_weights_is_bad_input(runs, tmp_path, capsys):
    (tmp_path / "result.json").write_text((runs["threads1"] / "result.json").read_text())
    (tmp_path / "weights.pt").write_bytes(b"not a torch file")
    assert diff.main([str(tmp_path), str(runs["threads1"])]) == 2
    assert "weights.pt: cannot be read as saved weights" in capsys.readouterr().err


def test_first_difference_and_loss_bits():
    assert diff.first_difference(["a", "b"], ["a", "b"]) is None
    assert diff.first_difference(["a", "b"], ["a", "c"]) == 2
    assert diff.first_difference(["a"], ["a", "b"]) == 2  # one run is longer
    assert diff.loss_value("3f800000") == 1.0


# -- harness.golden -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def golden_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "golden.json"
    proc = run_cli(["save", str(path), *SMALL, "determinism.threads=1"], module="harness.golden")
    assert proc.returncode == 0, proc.stderr
    assert "golden saved" in proc.stdout
    return path


@pytest.mark.slow
def test_golden_file_is_small_and_holds_every_step(golden_file):
    g = json.loads(golden_file.read_text())
    assert g["schema"] == golden.GOLDEN_SCHEMA
    assert (g["seed"], g["arm"]) == (0, "A")  # the first of ab.seeds and ab.arms
    assert len(g["fingerprints"]["steps"]["loss"]) == len(g["fingerprints"]["steps"]["params"]) == STEPS
    assert g["env"]["threads"] == 1 and g["env"]["device_type"] == "cpu"
    assert "determinism.threads=1" in g["overrides"]
    assert golden_file.stat().st_size < 20_000


@pytest.mark.slow
def test_golden_check_passes_on_an_unchanged_run(golden_file, capsys):
    # saved by the CLI in a process of its own, checked here in the test's process: the bits cross processes
    assert golden.main(["check", str(golden_file)]) == 0
    out = capsys.readouterr().out
    assert f"golden check passed: {golden_file}: all {STEPS} steps bit-identical" in out


@pytest.mark.slow
def test_golden_check_fails_on_a_changed_hyperparameter_and_names_the_step(golden_file):
    proc = run_cli(["check", str(golden_file), "optim.lr=0.1"], module="harness.golden")
    assert proc.returncode == 1
    assert "golden check FAILED" in proc.stdout
    # lr acts in the first update: parameters part at step 1, the loss (computed before it) at step 2
    assert f"parts ways with the golden at step 1 of {STEPS}" in proc.stdout
    assert "parameter digests from step 1" in proc.stdout
    assert "optim.lr (0.05 -> 0.1)" in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.solo  # reruns with 2 threads: the count is the point
def test_golden_check_names_a_different_stack(golden_file, capsys):
    assert golden.main(["check", str(golden_file), "determinism.threads=2"]) == 1
    out = capsys.readouterr().out
    assert "the environment differs from the golden's: threads 1 -> 2" in out
    assert "Bits are only promised on the same stack" in out


@pytest.mark.slow
def test_golden_check_fails_when_training_breaks(golden_file, capsys):
    assert golden.main(["check", str(golden_file), "optim.lr=1e6"]) == 1
    assert "the run did not complete (NonFiniteLoss: loss became" in capsys.readouterr().out


def test_an_override_at_the_factor_is_named_as_having_no_effect(capsys):
    # loss_ab's factor is loss.label_smoothing; arm A places 0.0 there.
    arm_cfg, _, arm = golden.select_run(compose_cfg(["+experiment=loss_ab", "loss.label_smoothing=0.3"]), ["loss.label_smoothing=0.3"])
    assert (arm, arm_cfg.loss.label_smoothing) == ("A", 0.0)
    assert "the override loss.label_smoothing=0.3 has no effect on this run" in capsys.readouterr().err


def test_golden_bad_input(tmp_path, capsys):
    assert golden.main(["check", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such golden file" in capsys.readouterr().err
    not_golden = tmp_path / "other.json"
    not_golden.write_text("{}")
    assert golden.main(["check", str(not_golden)]) == 2
    assert "not a golden fingerprint file" in capsys.readouterr().err
    assert golden.main(["save", str(tmp_path / "g.json"), "optim.lrr=0.1"]) == 2
    assert "Could not override 'optim.lrr'" in capsys.readouterr().err
    assert golden.main(["save", str(tmp_path / "g.json"), "+optim.lrr=0.1"]) == 2
    assert "optim.lrr: torch.optim.SGD takes no parameter 'lrr'" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


# -- harness.audit ------------------------------------------------------------------------------


@pytest.mark.slow
def test_audit_finds_put_in_the_module_that_calls_it():
    proc = run_cli(["--config-dir", str(TEST_CONF), "model=put", "logger=none", "determinism.threads=1"], module="harness.audit")
    assert proc.returncode == 1, proc.stderr
    assert "1 op without a deterministic implementation" in proc.stdout
    assert "1. put_  [forward, aten.put_.default, 1 call]" in proc.stdout
    assert "called from: scatter (tests.models_for_tests.Scatter)" in proc.stdout
    assert "index_put_" in proc.stdout  # the way out


@pytest.mark.slow
def test_audit_default_model_is_clean():
    proc = run_cli(["logger=none", "determinism.threads=1"], module="harness.audit")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "clean: every op has a deterministic implementation" in proc.stdout


def test_audit_places_a_backward_op_in_the_module_whose_backward_called_it(capsys):
    assert audit.main(["--config-dir", str(TEST_CONF), "model=backward_put", "logger=none", "determinism.threads=1"]) == 1
    out = capsys.readouterr().out
    assert "put_  [backward, aten.put_.default, 1 call]" in out
    assert "called from: pool (tests.models_for_audit.RowMax)" in out
    assert "[forward" not in out  # its forward is deterministic


def test_audit_bad_input(capsys):
    assert audit.main(["model._target_=tests.no_such_module.Model"]) == 2
    assert "model._target_='tests.no_such_module.Model': the module 'tests.no_such_module' cannot be imported" \
        in capsys.readouterr().err


def test_ways_out_cover_the_known_cuda_offenders():
    assert "x.mean((2, 3)" in audit.way_out("adaptive_avg_pool2d_backward_cuda")
    assert "index_put_" in audit.way_out("index_add_cuda_")
    assert audit.way_out("some_new_op_cuda") == audit.UNKNOWN_WAY_OUT
    assert "determinism.mode=warn" in audit.UNKNOWN_WAY_OUT


# -- harness.noise_audit ------------------------------------------------------------------------


@pytest.mark.solo  # reruns with 2 and 3 threads: the counts are the point
def test_noise_audit_table_json_and_plot(tmp_path, capsys):
    out_dir = tmp_path / "audit"
    code = noise_audit.main(["--repeats", "2", "--out", str(out_dir), *SMALL, "determinism.threads=1"])
    assert code == 0
    text = capsys.readouterr().out
    result = json.loads((out_dir / "noise_audit.json").read_text())
    s = result["summary"]
    # (a) deterministic repeats are identical to the reference
    assert s["repeat"]["distinct_final_weights"] == 1
    assert s["repeat"]["metrics"]["test_accuracy"]["std"] == 0
    # (b) one ULP of one initial weight: a different start, and different final weights
    ulp_runs = [r for r in result["runs"] if r["source"] == "ulp"]
    assert [r["ulp_change"]["new"] > r["ulp_change"]["old"] for r in ulp_runs] == [True, True]
    assert s["ulp"]["identical_to_reference"] == 0
    assert s["ulp"]["params_part_at_step"]["max"] == 0  # step 0: the initial weights already differ
    free = result["threads"]["free_cores"]  # a busy machine (free 1) runs no other thread count
    assert ("threads" in s) == (free >= 2)
    if free >= 2:
        assert s["threads"]["params_part_at_step"]["min"] >= 1  # same start, parts in training
    # (c) threads 2 and 3 against the pinned 1, those the free cores keep busy; the rest skipped and said
    assert sorted(r["threads"] for r in result["runs"] if r["source"] == "threads") == [t for t in (2, 3) if t <= free]
    assert result["threads"]["thread_counts_skipped"] == [t for t in (2, 3) if t > free]
    assert ("skipped 3: more threads than the 2 free core(s)" in text) == (free == 2)
    # seeds: the reference seed and the next one
    assert s["seeds"]["runs"] == 2 and s["seeds"]["distinct_final_weights"] == 2
    if not torch.cuda.is_available():
        assert any(line.startswith("(d) determinism.mode=off") and line.endswith("not applicable: no CUDA")
                   for line in text.splitlines())
    assert "(a) deterministic repeats: all 2 bit-identical" in text
    assert (out_dir / "noise_audit.png").stat().st_size > 0
    assert (out_dir / "noise_audit.txt").read_text().startswith("noise audit: SmallCNN on digits")


def test_noise_audit_bad_input(tmp_path, capsys):
    assert noise_audit.main(["--repeats", "1", "--out", str(tmp_path)]) == 2
    assert "--repeats 1: a spread needs at least 2 runs" in capsys.readouterr().err
    assert noise_audit.main(["--out", str(tmp_path), "data=nope"]) == 2
    assert "Could not find 'data/nope'" in capsys.readouterr().err


def test_noise_audit_says_what_it_compared_when_a_source_has_one_run():
    # row (c) had one run and the seeds a std of 0.282: "the seeds show no spread" was false
    from harness.tools.noise.noise_audit import spread, std_ratio
    from harness.tools.noise.noise_table import verdict

    seeds = spread([0.90, 1.30, 0.75, 1.20])
    one = spread([1.02])
    summary = {"repeat": {"distinct_final_weights": 1, "runs": 2},
               "seeds": {"metrics": {"test_loss": {**seeds, "ratio_to_seeds": std_ratio(seeds, seeds)}}},
               "threads": {"identical_to_reference": 0, "compared_with_reference": 1,
                           "metrics": {"test_loss": {**one, "ratio_to_seeds": std_ratio(one, seeds)}}}}
    (line,) = [x for x in verdict(summary, "test_loss", 4) if x.startswith("(c)")]
    assert "seeds show no spread" not in line
    assert "1 run only" in line and f"std {seeds['std']:.3g} over 4 runs" in line and "+0.12" in line

    flat = spread([1.0, 1.0, 1.0])
    summary["seeds"]["metrics"]["test_loss"] = {**flat, "ratio_to_seeds": std_ratio(flat, flat)}
    two = spread([1.0, 1.1])
    summary["threads"]["metrics"]["test_loss"] = {**two, "ratio_to_seeds": std_ratio(two, flat)}
    (line,) = [x for x in verdict(summary, "test_loss", 3) if x.startswith("(c)")]
    assert "the 3 seeds show no spread in test_loss (std 0)" in line

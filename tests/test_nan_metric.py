"""A non-finite metric is a diverged run, whether a command printed it or a train.fn returned it:
result.json keeps it recognisable (JSON has no NaN: the value is null, and the result names the
metric as non-finite), and stats.diverged counts it as docs/statistics.md says."""

from __future__ import annotations

import math
import sys

import harness
import pytest
from harness.results import read_json, read_result, write_result

from .conftest import TEST_CONF, run_cli

NAN_SCRIPT = """
import argparse
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--mode", default="ok")
p.add_argument("--out", default=None)
a = p.parse_args()
if a.mode == "blowup" and a.seed in (1, 3):
    print("final score nan")
else:
    print(f"final score {50.0 + (a.seed * 7919 % 13) / 10 + (0.5 if a.mode == 'blowup' else 0.0):.4f}")
"""
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "ab.arms={A: ok, B: blowup}", "ab.seeds=[0,1,2,3,4,5]", "repro.certificate=false",
        "train.metrics_from.stdout.score='final score (\\S+)'"]


def _script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(NAN_SCRIPT)
    return f"train.cmd=[{sys.executable},{script}]"


def _unit(folder, seed, arm):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


@pytest.mark.slow
def test_a_command_that_prints_nan_is_a_diverged_run_counted_as_worst(tmp_path):
    done = harness.run([*BASE, _script(tmp_path)], out_dir=tmp_path / "run", config_dir=TEST_CONF, verbose=False)
    r = _unit(tmp_path / "run", 1, "B")
    assert r["metrics"]["score"] is None and r["non_finite_metrics"] == {"score": "nan"}
    assert "non_finite_metrics" not in _unit(tmp_path / "run", 0, "B")  # a finite result is as before
    a = done.analysis
    assert a["diverged"]["counts"] == {"A": 0, "B": 2}
    assert {(e["seed"], e["reason"]) for e in a["diverged"]["runs"]} == {(1, "metric score is nan"),
                                                                       (3, "metric score is nan")}
    assert "is missing" not in done.verdict and done.verdict.startswith("diverged: A 0 of 6 seeds, B 2 of 6 seeds")


@pytest.mark.slow
def test_stats_diverged_fail_refuses_the_verdict_on_a_printed_nan(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(["--config-dir", str(TEST_CONF), *BASE, _script(tmp_path), "stats.diverged=fail",
                    f"hydra.run.dir={out}"])
    assert proc.returncode != 0, proc.stdout[-2000:]
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "2 run(s) diverged (seed 1 arm B: metric score is nan; seed 3 arm B: metric score is nan)" in said
    assert _unit(out, 1, "B")["status"] == "completed"  # the results are kept


def nan_score(cfg, run, shift: float = 0.0) -> dict:
    """A train.fn whose arm with a shift returns a NaN score at seeds 1 and 3."""
    import torch

    with run.init():
        w = torch.nn.Parameter(torch.randn(1))
    run.watch([w])
    run.step((w - 1).pow(2).sum())
    return {"score": float("nan") if shift and run.seed in (1, 3) else 50.0 + float(w.detach()) + shift}


def test_a_train_fn_that_returns_nan_is_a_diverged_run(tmp_path):
    overrides = ["+experiment=loss_ab", "train.fn=tests.test_nan_metric.nan_score", "+train.kwargs.shift=0.0",
                 "ab.factor=train.kwargs.shift", "ab.arms={A: 0.0, B: 0.5}", "ab.seeds=[0,1,2,3,4,5]",
                 "stats.metric=score", "+stats.metrics.score=max", "logger=none", "progress=false", "workers=1",
                 "determinism.threads=1", "repro.certificate=false"]
    done = harness.run(overrides, out_dir=tmp_path / "run", verbose=False)
    assert _unit(tmp_path / "run", 3, "B")["non_finite_metrics"] == {"score": "nan"}
    assert done.analysis["diverged"]["counts"] == {"A": 0, "B": 2}


def test_a_result_written_with_inf_reads_back_as_diverged_and_old_files_still_read(tmp_path):
    from harness.results import diverged

    from . import _results_factory as F

    r = F.make_result(0, "B", 90.0)
    r["metrics"]["test_loss"] = -math.inf
    write_result(tmp_path / "result.json", r)
    back = read_result(tmp_path / "result.json")
    assert back["metrics"]["test_loss"] is None and back["non_finite_metrics"] == {"test_loss": "-inf"}
    assert diverged(back, "test_loss") and not diverged(back, "test_accuracy")
    old = {k: v for k, v in back.items() if k != "non_finite_metrics"}  # a file an older harness wrote
    assert not diverged(old, "test_loss")  # null without the marker stays "missing", as before

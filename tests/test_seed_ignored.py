"""A script that ignores the seed: every seed of an arm gives bit-identical metrics, so the seeds
measured no seed noise and an interval over them ("95% CI +0.5 to +0.5") is not one. The analysis
gives no verdict, says why and what to fix (train.seed_arg for a command arm), exits non-zero, and
keeps the results."""

from __future__ import annotations

import sys

import pytest

import harness
from harness.analysis.analyze import analyze
from harness.analysis.selection import AnalysisError

from . import _results_factory as F
from .conftest import TEST_CONF, run_cli

SCRIPT = """
import argparse, random
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--mode", default="ok")
p.add_argument("--out", default=None)
a = p.parse_args()
random.seed(42)  # the seed given is never used
noise = random.random() if a.mode != "seeded" else random.Random(a.seed).random()
print(f"final score {50.0 + noise + (0.5 if a.mode == 'better' else 0.0):.4f} loss {1.0 + noise:.4f}")
"""
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "ab.seeds=[0,1,2,3,4]", "repro.certificate=false",
        "train.metrics_from.stdout.score='final score (\\S+)'", "+train.metrics_from.stdout.loss='loss (\\S+)'"]


def _script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return f"train.cmd=[{sys.executable},{script}]"


@pytest.mark.slow
@pytest.mark.parametrize("arms", ["{A: ok, B: better}", "{A: seeded, B: better}"])
def test_a_command_that_ignores_the_seed_gets_no_verdict_and_is_told_train_seed_arg(tmp_path, arms):
    out = tmp_path / "run"
    done = harness.run([*BASE, _script(tmp_path), f"ab.arms={arms}"], out_dir=out, config_dir=TEST_CONF,
                       verbose=False)
    assert done.analysis is None  # no verdict
    assert len(list(out.rglob("result.json"))) == 10  # the results are kept
    proc = run_cli([str(out)], module="harness.analyze")
    assert proc.returncode != 0
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "No verdict" in said and "every one of the 5 seeds of arm B gave bit-identical metrics" in said
    assert "the seed never reached the script" in said and "train.seed_arg" in said
    assert "beyond the margin" not in said


def test_an_arm_whose_seeds_differ_is_analysed_as_before():
    values = F.accuracies(6, shift=0.5, rng_seed=1)
    assert "B" in analyze(F.make_results(values))["comparisons"]


def test_an_arm_whose_metrics_repeat_but_whose_weights_differ_is_analysed():
    values = F.accuracies(6, shift=0.5, rng_seed=1)
    values["B"] = [values["B"][0]] * 6  # a constant arm, but each seed's own final weights
    assert "B" in analyze(F.make_results(values))["comparisons"]


def test_a_train_fn_whose_seeds_end_at_the_same_weights_is_told_the_seed_did_not_reach_the_training():
    values = F.accuracies(6, shift=0.5, rng_seed=1)
    values["B"] = [values["B"][0]] * 6
    results = F.make_results(values)
    for r in results:  # a training function that seeds itself: every seed of B the same run
        if r["arm"] == "B":
            r["fingerprints"]["init"] = r["fingerprints"]["final"] = "ab" * 8
    with pytest.raises(AnalysisError) as e:
        analyze(results)
    text = str(e.value)
    assert "the seed did not reach the training" in text and "train.seed_arg" not in text
    assert "run.init()" in text


def test_results_without_fingerprints_constant_across_seeds_get_no_verdict():
    values = F.accuracies(6, shift=0.5, rng_seed=1)
    values["B"] = [values["B"][0]] * 6
    results = F.make_results(values)
    for r in results:  # another tool's minimal result files: no fingerprints
        r.pop("fingerprints")
    with pytest.raises(AnalysisError, match="every one of the 6 seeds of arm B gave bit-identical metrics"):
        analyze(results)

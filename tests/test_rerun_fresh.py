"""The certificate's rerun on a GPU runs in a fresh process, so plans the first run's process cached
cannot make a different answer look reproducible (tested on CPU, with the GPU decision faked)."""

from __future__ import annotations

import os

import pytest
from harness.experiment import units
from harness.experiment.rerun import rerun_fresh
from harness.experiment.runner import run_one
from harness.experiment.arms import arm_configs

from .conftest import FAST, compose_cfg

ONE = [o for o in FAST if not o.startswith("ab.seeds")] + ["ab.seeds=[0]", "train.fn=tests.math_fns.reports_pid"]


@pytest.mark.slow
def test_a_fresh_process_reruns_the_unit_to_the_same_bits():
    arm = arm_configs(compose_cfg(ONE))["A"]
    here, _ = run_one(arm, 0, "A")
    fresh = rerun_fresh(arm, 0, "A")
    assert fresh["status"] == "completed", fresh["error"]
    assert fresh["metrics"]["pid"] != os.getpid()
    assert fresh["fingerprints"] == here["fingerprints"]


@pytest.mark.slow
def test_on_a_gpu_the_certificate_reruns_in_a_fresh_process(tmp_path, monkeypatch):
    arms = arm_configs(compose_cfg(ONE))
    first, _ = run_one(arms["A"], 0, "A")
    calls = []

    def fresh(arm_cfg, seed, arm):
        calls.append((seed, arm))
        return rerun_fresh(arm_cfg, seed, arm)

    monkeypatch.setattr(units, "uses_gpu", lambda cfg: True)
    monkeypatch.setattr(units, "rerun_fresh", fresh)
    cert, kept = units._certify(arms, [first], tmp_path, lambda line: None)
    assert calls == [(0, "A")] and not kept
    assert cert["reproducible"] is True, cert["line"]


def test_a_rerun_whose_process_dies_is_a_failed_rerun_not_a_crash(monkeypatch):
    arm = arm_configs(compose_cfg(ONE))["A"]
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")  # still finds the harness: its root goes first
    monkeypatch.setattr("sys.executable", "/bin/false")
    again = rerun_fresh(arm, 0, "A")
    assert again["status"] == "failed" and "exited with status 1" in again["error"]["message"]


def test_side_by_side_on_a_gpu_reruns_in_a_fresh_process_not_a_worker(tmp_path, monkeypatch):
    from harness.experiment.parallel import side_by_side

    arms = arm_configs(compose_cfg(ONE))
    first, _ = run_one(arms["A"], 0, "A")
    calls = []
    monkeypatch.setattr(side_by_side, "uses_gpu", lambda cfg: True)
    monkeypatch.setattr(side_by_side, "rerun_fresh", lambda cfg, seed, arm: calls.append(seed) or run_one(cfg, seed, arm)[0])
    cert, _ = side_by_side.certify_with(None, arms, [first], tmp_path, lambda line: None)  # no worker used
    assert calls == [0] and cert["reproducible"] is True

"""Math modes (TF32, float32 matmul precision): pinned from the config in every unit, recorded in the
environment, restored after the unit, and part of a result's identity."""

from __future__ import annotations

import copy

import pytest
import torch

from harness.analysis.identity.comparability import check
from harness.analysis.identity.run_identity import IdentityError, identity
from harness.experiment.runner import train_one
from harness.experiment.arms import arm_configs
from harness.training import math_modes

from .conftest import FAST, compose_cfg

ONE = [o for o in FAST if not o.startswith("ab.seeds")] + ["ab.seeds=[0]"]


def _arm(*extra):
    return arm_configs(compose_cfg(ONE + ["train.fn=tests.math_fns.switches_matmul_precision", *extra]))["A"]


def test_a_training_fn_that_switches_precision_does_not_leak_into_the_next_unit():
    before = math_modes.read()
    first = train_one(_arm(), 0)
    assert first["env"]["math_modes"]["float32_matmul_precision"] == "highest"  # what the unit was pinned to
    assert first["env"]["math_modes_at_end"]["float32_matmul_precision"] == "medium"  # what the fn did
    assert math_modes.read() == before  # put back after the unit
    torch.set_float32_matmul_precision("medium")  # even a leak from outside the harness
    try:
        second = train_one(_arm("+train.kwargs.precision=highest"), 0)
    finally:
        math_modes.restore(before)
    assert second["env"]["math_modes"]["float32_matmul_precision"] == "highest"
    assert second["env"]["math_modes"]["cudnn_conv"] == "ieee" and "math_modes_at_end" not in second["env"]
    assert set(math_modes.ENV_VARS) <= set(second["env"]["math_environment"])


def test_the_config_sets_tf32_and_a_typo_fails_at_compose():
    before = math_modes.read()
    try:
        out = train_one(_arm("determinism.float32_matmul_precision=high", "determinism.tf32_cudnn=true",
                             "+train.kwargs.precision=high"), 0)
    finally:
        math_modes.restore(before)
    modes = out["env"]["math_modes"]
    assert (modes["float32_matmul_precision"], modes["cuda_matmul"], modes["cudnn_conv"]) == ("high", "tf32", "tf32")
    with pytest.raises(Exception, match="float32_matmul_precision"):
        compose_cfg(ONE + ["determinism.float32_matmul_precision=hihg"])


def _result(seed, arm, modes):
    return {"seed": seed, "arm": arm, "factor": "optim.lr", "status": "completed", "base_hash": "b",
            "code_version": "c", "config": None, "env": {"device": "cpu", "torch": "2.14.1", "math_modes": modes}}


def test_results_that_differ_only_in_a_recorded_math_mode_are_mixed_identities():
    ieee = math_modes.read()
    tf32 = {**copy.deepcopy(ieee), "cuda_matmul": "tf32"}
    same = [_result(0, "A", ieee), _result(0, "B", ieee)]
    assert identity(same[0]) == identity(same[1])
    mixed = [_result(0, "A", ieee), _result(0, "B", ieee), _result(1, "A", tf32), _result(1, "B", tf32)]
    assert identity(mixed[0]) != identity(mixed[2])
    with pytest.raises(IdentityError, match="math modes"):
        check(mixed, baseline="A", others=["B"])


def test_mode_warn_stores_the_warnings_it_raised_in_the_result():
    from harness.experiment.runner import run_one

    arm = arm_configs(compose_cfg(ONE + ["train.fn=tests.math_fns.puts_values", "determinism.mode=warn"]))["A"]
    with pytest.warns(UserWarning, match="put_"):  # still shown to the user
        result, _ = run_one(arm, 0, "A")
    assert result["status"] == "completed", result["error"]
    (kept,) = result["determinism_warnings"]
    assert "put_" in kept["message"] and kept["count"] == 2


def test_the_cublas_workspace_is_refused_only_where_torch_needs_it(monkeypatch):
    from harness.training.determinism import DeterminismError, check_cublas_workspace

    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    check_cublas_workspace("2.14.1")  # a workspace per handle and stream: deterministic whatever the value
    check_cublas_workspace("2.10.0+cu128")
    with pytest.raises(DeterminismError, match="CUBLAS_WORKSPACE_CONFIG"):
        check_cublas_workspace("2.9.1")  # shared workspaces: only :4096:8 or :16:8 are deterministic
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    check_cublas_workspace("2.9.1")


def test_float32_math_keeps_the_config_hash_of_results_made_before_the_keys():
    from harness.results import config_digest

    config = {"determinism": {"mode": "strict", "threads": 1}, "optim": {"lr": 0.1}}
    pinned = {"determinism": {**config["determinism"], "float32_matmul_precision": "highest", "tf32_cudnn": False}}
    assert config_digest({**config, **pinned}) == config_digest(config)
    tf32 = {"determinism": {**pinned["determinism"], "tf32_cudnn": True}}
    assert config_digest({**config, **tf32}) != config_digest(config)  # TF32 is another configuration


def test_the_report_says_tf32_when_float32_math_was_not_float32():
    from harness.analysis.run_setup import setup

    def usable(device, **modes):
        env = {"device": device, "mode": "strict", "threads": 1,
               "math_modes": {"cuda_matmul": "ieee", "cudnn_conv": "ieee", "cudnn_rnn": "ieee",
                              "mkldnn_matmul": "ieee", **modes}}
        return {(0, "A"): {"result": {"env": env, "config": {"precision": "fp32"}}}}

    assert setup(usable("cuda:0"))["precision"] == ["fp32"]
    assert setup(usable("cuda:0", cuda_matmul="tf32", cudnn_conv="tf32"))["precision"] == [
        "fp32 (TF32 in matmul, TF32 in cuDNN)"]
    assert setup(usable("cpu", cudnn_conv="tf32"))["precision"] == ["fp32"]  # no cuDNN on a CPU run
    assert setup(usable("cpu", mkldnn_matmul="bf16"))["precision"] == ["fp32 (bf16 allowed in oneDNN matmul)"]


def test_the_cuda_libraries_are_an_identity_part_of_gpu_runs_only():
    modes = math_modes.read()
    cpu = [_result(0, "A", modes), _result(0, "B", modes)]
    cpu[1]["env"]["math_environment"] = {"cublas_version": "other"}
    assert identity(cpu[0]) == identity(cpu[1])  # a CPU run uses neither cuBLAS nor cuDNN
    gpu = [_result(0, "A", modes), _result(0, "B", modes)]
    for r, version in zip(gpu, (91000, 92400)):
        r["env"].update(device="cuda:0", math_environment={"cudnn_version": version})
    assert identity(gpu[0]) != identity(gpu[1])


def test_a_math_mode_that_is_the_factor_may_differ_between_arms():
    ieee = {**math_modes.read(), "cudnn_conv": "ieee"}
    tf32 = {**ieee, "cudnn_conv": "tf32"}
    a, b = _result(0, "A", ieee), _result(0, "B", tf32)
    assert identity(a) != identity(b)
    a, b = ({**r, "factor": "determinism.tf32_cudnn"} for r in (_result(0, "A", ieee), _result(0, "B", tf32)))
    assert identity(a) == identity(b)

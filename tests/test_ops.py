"""harness.diff --ops: the first aten op whose outputs differ, on a tiny training function of the
tests' own (tests/models_for_tests.tiny_train, 6 steps); and harness.diff's readable report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.experiment.runner import run_one
from harness.results import save_weights
from harness.results import write_json
from harness.tools.diff import diff, ops
from harness.tools.golden import golden

from .conftest import LazyRuns, compose_cfg

TINY = ["train.fn=tests.models_for_tests.tiny_train", "model._target_=tests.models_for_tests.TinyConvNet",
        "model.width=4", "logger=none", "progress=false", "repro.save_weights=true"]


def _save_run(folder: Path, overrides: list[str]) -> Path:
    arm_cfg, seed, arm = golden.select_run(compose_cfg(TINY + overrides))
    result, weights = run_one(arm_cfg, seed, arm)
    assert result["status"] == "completed", result["error"]
    write_json(folder / "result.json", result)
    save_weights(folder / "weights.pt", weights)
    return folder


# Each run is trained on first use, once per xdist worker. Only the threads2 run trains (and is
# replayed) with 2 threads, so only the tests that read it are solo (tests/conftest.py): the others
# train and replay with 1 thread beside the other worker's tests.
RUNS = {
    "base": ["determinism.threads=1"],
    "threads2": ["determinism.threads=2"],  # the thread count is the point
    "eps": ["determinism.threads=1", "+model.eps=1e-3"],
    "edit": ["determinism.threads=1", "model._target_=tests.models_for_tests.TinyConvNetEdited"],
    "log_every": ["determinism.threads=1", "train.log_every=3"],  # not read by tiny_train
    "late": ["determinism.threads=1", "+train.kwargs.nudge_from=4"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return LazyRuns(tmp_path_factory.mktemp("ops"), lambda folder, name: _save_run(folder, RUNS[name]))


def _ops(runs, other: str, tmp_path, capsys, *extra) -> tuple[str, dict]:
    report = tmp_path / "diff.json"
    code = diff.main([str(runs["base"]), str(runs[other]), "--ops", "--no-plot", "--json", str(report), *extra])
    out = capsys.readouterr().out
    assert code == diff.EXIT_DIFFERENT, out
    return out, json.loads(report.read_text())["ops"]


@pytest.mark.solo  # the threads2 run: trained (and replayed) with 2 threads
def test_threads_1_vs_2_names_the_first_reduction_that_differs(runs, tmp_path, capsys):
    out, found = _ops(runs, "threads2", tmp_path, capsys)
    assert found["step"] == 1 and found["found"]["kind"] == "outputs"
    a, b = found["found"]["a"], found["found"]["b"]
    # LayerNorm's backward sums its weight gradient over the batch: 2 threads add it in another order
    assert a["name"] == "aten.native_layer_norm_backward.default" and a["phase"] == "backward"
    assert a["module"] == "norm (torch.nn.modules.normalization.LayerNorm)"
    assert a["in_hash"] == b["in_hash"] and a["out_hashes"] != b["out_hashes"]
    assert "inputs:     equal bits: the op itself computed other bits" in out
    assert re.search(r"outputs:    max \|Δ\| [0-9.e-]+; \d+ of \d+ elements differ", out)
    assert "call site:  tests/models_for_tests.py" in out and "loss.backward()" in out
    assert "recorder: PyTorch's DebugMode" in out
    assert "the replays reproduce both runs' recorded loss bits of steps 1-1" in out


def test_layernorm_eps_names_the_forward_layer_norm_and_its_argument(runs, tmp_path, capsys):
    out, found = _ops(runs, "eps", tmp_path, capsys)
    a, b = found["found"]["a"], found["found"]["b"]
    assert a["name"] == "aten.native_layer_norm.default" and a["phase"] == "forward"
    assert a["module"].startswith("norm (") and a["in_hash"] == b["in_hash"]
    assert "other arguments differ: (256, 1e-05) vs (256, 0.001)" in out
    assert "call site:  tests/models_for_tests.py" in out and "self.norm(" in out


def test_a_model_edit_names_the_layer_whose_ops_changed(runs, tmp_path, capsys):
    out, found = _ops(runs, "edit", tmp_path, capsys)
    assert found["found"]["kind"] == "ops"
    (a,), (b,) = found["found"]["a"], found["found"]["b"]
    assert (a["name"], b["name"]) == ("aten.relu.default", "aten.gelu.default")
    assert a["module"] == "fc_act (torch.nn.modules.activation.ReLU)"
    assert b["module"] == "fc_act (torch.nn.modules.activation.GELU)"
    assert "A runs: aten.relu.default [forward] -> 32x64 float32 in fc_act" in out


def test_a_change_from_step_4_is_replayed_to_step_4_and_named_there(runs, tmp_path, capsys):
    out, found = _ops(runs, "late", tmp_path, capsys)
    assert found["step"] == 4 and found["found"]["kind"] == "ops"  # B scales the loss: one more op
    (b,) = found["found"]["b"]
    assert found["found"]["a"] == [] and b["name"] == "aten.mul.Tensor" and b["module"] == "-"
    assert "loss = loss * (1 + 2**-20)" in b["site"]
    assert "the replays reproduce both runs' recorded loss bits of steps 1-4" in out


@pytest.mark.solo  # the threads2 run: trained (and replayed) with 2 threads
def test_our_own_recorder_finds_the_same_op(runs, tmp_path, capsys):
    out, found = _ops(runs, "threads2", tmp_path, capsys, "--recorder", "own")
    assert "recorder: harness's own TorchDispatchMode" in out
    assert found["found"]["a"]["name"] == "aten.native_layer_norm_backward.default"


def test_exact_hash_tells_a_last_bit_apart():
    import torch

    x = torch.tensor([1.0, 2.0])
    y = x.clone()
    y.view(torch.int32)[1] += 1  # one ULP
    assert ops.bit_hash(x) == ops.bit_hash(x.clone()) != ops.bit_hash(y)
    assert ops.bit_hash(x) != ops.bit_hash(x.double())


@pytest.mark.solo  # the threads2 run: trained (and replayed) with 2 threads
def test_readable_diff_config_first_and_layers_largest_first(runs, capsys):
    assert diff.main([str(runs["base"]), str(runs["threads2"]), "--no-plot"]) == diff.EXIT_DIFFERENT
    lines = capsys.readouterr().out.splitlines()
    config = next(i for i, s in enumerate(lines) if "config differs at:" in s)
    first_number = next(i for i, s in enumerate(lines) if "loss bits:" in s)
    assert config < first_number and "determinism.threads (1 vs 2)" in lines[config]
    start = next(i for i, s in enumerate(lines) if "max |Δw| (final)" in s) + 1
    sizes = []
    for s in lines[start:]:
        m = re.fullmatch(r"\s{6}\S+\s+([0-9.e+-]+)", s)
        if not m:
            break
        sizes.append(float(m.group(1)))
    assert len(sizes) >= 4 and sizes == sorted(sizes, reverse=True)


def test_bit_identical_names_the_config_difference(runs, capsys):
    assert diff.main([str(runs["base"]), str(runs["log_every"]), "--ops"]) == diff.EXIT_SAME
    out = capsys.readouterr().out
    assert "The runs are bit-identical: 6 steps" in out
    assert "although the config differs at: train.log_every (10 vs 3): that change did not move a bit" in out

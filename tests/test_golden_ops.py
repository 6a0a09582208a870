"""golden save --ops / check --ops: the op stream of step 1 stored in the golden, compared with this
machine's replay of the rerun (on the tests' tiny training function)."""

from __future__ import annotations

import json

import pytest

from harness.tools.golden import golden

TINY = ["train.fn=tests.models_for_tests.tiny_train", "model._target_=tests.models_for_tests.TinyConvNet",
        "model.width=4", "logger=none", "progress=false", "determinism.threads=1",
        "stats.metric=train_loss", "+stats.metrics.train_loss=min"]  # its own loop: its own declaration


@pytest.mark.slow
@pytest.mark.solo  # replays with 2 threads: the count is the point
def test_stored_op_stream_names_the_op_where_the_rerun_parts(tmp_path, capsys):
    path = tmp_path / "golden.json"
    assert golden.main(["save", str(path), "--ops", *TINY]) == 0
    stored = json.loads(path.read_text())["ops"]
    assert stored["step"] == 1 and len(stored["loss_bits"]) == 1
    assert {"name", "module", "phase", "in_hash", "out_hashes"} <= set(stored["stream"][0])
    assert all("outputs" not in op for op in stored["stream"])  # hashes, not tensors
    capsys.readouterr()
    # 2 threads: the bits part at step 1, where the golden stored its stream
    assert golden.main(["check", str(path), "determinism.threads=2", "--ops"]) == 1
    out = capsys.readouterr().out
    assert "ops: A is the op stream stored in the golden at save time (recorder: PyTorch's DebugMode" in out
    assert "first op whose outputs differ: #38 aten.native_layer_norm_backward.default [backward]" in out
    assert "inputs:     equal bits" in out
    assert "max |Δ| not available" in out  # the golden keeps hashes only


@pytest.mark.slow
def test_without_a_stored_stream_both_sides_are_replayed_here_and_it_says_so(tmp_path, capsys):
    path = tmp_path / "golden.json"
    assert golden.main(["save", str(path), *TINY]) == 0
    assert golden.main(["check", str(path), "+model.eps=1e-3"]) == 1  # the hint repeats the command given
    assert f"to name the first op whose bits differ: python -m harness.golden check {path} +model.eps=1e-3 --ops" in capsys.readouterr().out
    assert golden.main(["check", str(path), "+model.eps=1e-3", "--ops"]) == 1
    out = capsys.readouterr().out
    assert "ops: A and B both replayed on this machine (no op stream stored" in out
    assert "aten.native_layer_norm.default [forward]" in out and "(256, 1e-05) vs (256, 0.001)" in out


@pytest.mark.solo  # replays with 2 threads: the count is the point
def test_a_stream_stored_by_the_other_recorder_is_compared_with_a_replay_by_that_recorder(tmp_path, capsys):
    """A golden saved on a torch without PyTorch's DebugMode stores our own recorder's stream (which
    also sees detach ops); the check must replay with that recorder, not the one this torch prefers,
    or the streams part at the first detach, not where the bits part."""
    from harness.tools.diff import ops

    path = tmp_path / "golden.json"
    assert golden.main(["save", str(path), *TINY]) == 0
    saved = json.loads(path.read_text())
    own = ops.replay({"config": saved["config"], "seed": saved["seed"], "arm": saved["arm"]}, 1, "own")
    saved["ops"] = {"step": 1, "recorder": own.recorder, "loss_bits": own.loss_bits,
                    "stream": [ops.plain(op) for op in own.ops]}
    path.write_text(json.dumps(saved))
    capsys.readouterr()
    assert golden.main(["check", str(path), "determinism.threads=2", "--ops"]) == 1
    out = capsys.readouterr().out
    assert "recorder: harness's own TorchDispatchMode" in out and "aten.detach" not in out
    assert "aten.native_layer_norm_backward.default [backward]" in out

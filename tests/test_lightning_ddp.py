"""Lightning's strategy="ddp" on 2 CPU processes (gloo): a command arm's script whose Trainer launches
its own second rank, with harness.lightning.Callback(), and harness.lightning.fit as a train.nproc=2
unit. The proofs are those of any unit of several processes: rank 0 writes the unit's record, both
ranks' batches are in the data order, the replicas' parameters are compared, the world is in the
identity."""

from __future__ import annotations

import pytest

import harness
from harness.results import read_json

from .conftest import REPO, TEST_CONF

pytest.importorskip("lightning")

SCRIPT = REPO / "tests" / "command_scripts" / "lightning_ddp.py"


def _result(folder, arm, seed=0):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


def _proves_two_ranks(result) -> None:
    assert result["status"] == "completed", result.get("error")
    fp = result["fingerprints"]
    assert [r["rank"] for r in fp["ranks"]] == [0, 1] and all(r["batches"] > 0 for r in fp["ranks"])
    assert fp["ranks"][0]["data_order"] != fp["ranks"][1]["data_order"]  # each rank read its own share
    assert fp["batches"] == sum(r["batches"] for r in fp["ranks"])
    assert fp["replicas"] == {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    assert result["env"]["world"] == {"world_size": 2, "backend": "gloo"}


@pytest.mark.slow
@pytest.mark.solo  # 2 ranks: both cores
def test_a_lightning_ddp_script_with_the_callback_records_both_ranks(tmp_path):
    out = tmp_path / "out"
    harness.run(["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
                 f"train.cmd='python {SCRIPT}'", "stats.metrics={score: min}", "stats.metric=score",
                 "ab.factor=train.args.lr", "+train.args.lr=0.1", "ab.arms={A: 0.1, B: 0.05}", "ab.seeds=[0]",
                 "repro.certificate=false"], out_dir=out, config_dir=TEST_CONF, verbose=False)
    a, b = _result(out, "A"), _result(out, "B")
    _proves_two_ranks(a)
    _proves_two_ranks(b)
    assert a["fingerprints"]["init"] == b["fingerprints"]["init"] and a["fingerprints"]["data_order"] == b["fingerprints"]["data_order"]
    assert not list((out / "runs").rglob("attached*.json"))


@pytest.mark.slow
@pytest.mark.solo
def test_harness_lightning_fit_as_two_ranks(tmp_path):
    out = tmp_path / "out"
    harness.run(["+experiment=loss_ab", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
                 "train.fn=harness.lightning.fit", "train.nproc=2", "ab.seeds=[0]", "repro.certificate=false",
                 "+train.kwargs.module={_target_: tests.lightning_fns.MLP, label_smoothing: 0.0}",
                 "+train.kwargs.datamodule={_target_: tests.lightning_fns.Digits, batch_size: 64}",
                 "+train.kwargs.trainer={max_epochs: 1, num_sanity_val_steps: 0, enable_model_summary: false}",
                 "ab.factor=train.kwargs.module.label_smoothing", "ab.arms={A: 0.0, B: 0.1}"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    a, b = _result(out, "A"), _result(out, "B")
    _proves_two_ranks(a)
    _proves_two_ranks(b)
    assert [r["batches"] for r in a["fingerprints"]["ranks"]] == [2, 2]  # 256 examples, 2 ranks, batches of 64
    assert a["fingerprints"]["data_order"] == b["fingerprints"]["data_order"] and {"test_accuracy", "test_loss"} <= set(a["metrics"])

"""harness.attach(): a script of one's own proves what a train.fn proves, and still runs on its own.

Under a command arm the script's Run records init, data order and every step; the command arm adopts
that record, so arms of one seed are shown paired by their fingerprints and the certificate is
bitwise. Without the harness's environment the same script runs and writes nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import harness
from harness.integrations.process import ATTACHED_NAME, RUN_ENV, run_settings
from harness.results import read_json
from harness.training.run import Run
from harness.training.steps import RunUsageError

from .conftest import REPO, run_cli

EXAMPLE = REPO / "examples" / "command_arm"
HARNESS_ENV = ("HARNESS_RUN_DIR", "HARNESS_SEED", "HARNESS_ARM", RUN_ENV)
DETERMINISM = {"mode": "strict", "threads": 1, "fill_uninitialized_memory": False, "cudnn_benchmark": False}


def _train(run, steps=4):
    """A few steps of a tiny model, through the Run's public API (what a script or a train.fn does)."""
    with run.init():
        model = torch.nn.Linear(3, 1)
    run.watch(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.arange(24.0).reshape(8, 3) / 24, torch.arange(8.0) / 8
    for xb, yb in run.loader(harness.TensorBatches(x, y), batch_size=2):
        loss = ((model(xb).squeeze(1) - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.step(loss)
    return {"loss": loss.item()}


@pytest.fixture
def unit_env(tmp_path, monkeypatch):
    """The environment a command arm gives the script of seed 3, arm B."""
    monkeypatch.setenv("HARNESS_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("HARNESS_SEED", "3")
    monkeypatch.setenv("HARNESS_ARM", "B")
    monkeypatch.setenv(RUN_ENV, run_settings("cpu", "fp32", DETERMINISM, None, None, 10))
    return tmp_path


def test_on_its_own_attach_gives_a_run_that_works_and_records_nothing(tmp_path, monkeypatch):
    for key in HARNESS_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    run = harness.attach(seed=5)
    assert not run.attached and run.seed == 5
    _train(run)
    assert run.finish({"loss": 1.0}) is None and run.steps == 4
    assert list(tmp_path.iterdir()) == []


def test_an_attached_run_records_what_the_same_loop_records_as_a_train_fn(unit_env):
    run = harness.attach(seed=0)  # the harness's seed wins over the script's default
    assert run.attached and run.seed == 3 and torch.get_num_threads() == 1
    metrics = _train(run)
    run.finish(metrics)
    record = read_json(unit_env / ATTACHED_NAME)
    parent = Run(3)  # the command arm's Run in the harness's process
    parent.adopt(record)
    adopted = parent.finish({"loss": 2.0})
    direct = Run(3)
    own = direct.finish(_train(direct))
    for key in ("init", "data_order", "final", "batches"):
        assert adopted["fingerprints"][key] == own["fingerprints"][key] and own["fingerprints"][key]
    assert adopted["fingerprints"]["steps"]["params"] == own["fingerprints"]["steps"]["params"]
    assert len(adopted["fingerprints"]["steps"]["loss"]) == 4 and "black_box" not in adopted["fingerprints"]
    assert adopted["metrics"] == {"loss": 2.0}  # what the harness read from the output wins on a name


def test_a_script_that_attaches_but_never_watches_says_so(unit_env):
    run = harness.attach()
    with pytest.raises(RunUsageError, match="never called run.watch"):
        run.finish({"loss": 1.0})
    assert "never called run.watch" in read_json(unit_env / ATTACHED_NAME)["error"]
    with pytest.raises(RunUsageError, match="not what an attached Run writes: it recorded no step"):
        Run(0).adopt({"fingerprints": {"init": "a", "data_order": None, "final": "b", "batches": 0,
                                       "steps": {"loss": [], "params": []}}})


@pytest.mark.slow
def test_the_example_with_attach_is_paired_by_its_fingerprints_and_bitwise(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(["--config-dir", str(EXAMPLE / "conf"), "+experiment=command_attach_ab", "ab.seeds=[0,1,2]",
                    "workers=1", "determinism.threads=1", "logger=none", "progress=false", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = " ".join((proc.stdout + proc.stderr).split())  # the terminal report wraps its lines
    # ab.factor (train.args.*) may change the data, so data_order is shown equal but not required
    assert ("pairing verified: init equal across arms in every seed; data_order equal across arms in every seed "
            "(48 batches each; not required: ab.factor may change it)") in printed
    assert "bitwise reproducible: yes (48 steps as recorded by run.step, seed 0, arm raw rerun)" in printed
    assert "by seed only" not in printed
    fps = {(s, a): read_json(out / "runs" / f"seed={s}" / f"arm={a}" / "result.json")["fingerprints"]
           for s in range(3) for a in ("raw", "standardized")}
    for key in ("init", "data_order"):
        assert all(fps[(s, "raw")][key] == fps[(s, "standardized")][key] for s in range(3))
        assert len({fps[(s, "raw")][key] for s in range(3)}) == 3 and None not in {f[key] for f in fps.values()}
    assert fps[(0, "raw")]["final"] != fps[(0, "standardized")]["final"]  # the arms trained differently
    a = read_json(out / "analysis.json")
    assert a["pairing"]["basis"] == "fingerprints" and a["pairing"]["proven"] is True
    assert {k: c["state"] for k, c in a["pairing"]["checks"].items()} == {"init": "equal", "data_order": "equal"}
    assert a["certificate"]["reproducible"] is True and a["certificate"].get("level") != "metrics"
    # on its own, no harness environment: the same script runs, prints the unit's numbers, writes nothing
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
    alone = subprocess.run([sys.executable, str(EXAMPLE / "train_attached.py"), "--epochs", "3", "--standardize",
                            "--seed", "1"], capture_output=True, text=True, check=True, cwd=tmp_path,
                           env={**env, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}).stdout
    loss = float(re.search(r"final test_loss (\S+)", alone).group(1))
    assert read_json(out / "runs" / "seed=1" / "arm=standardized" / "result.json")["metrics"]["test_loss"] == loss
    assert list(tmp_path.iterdir()) == [out]
    assert not list(out.glob(f"runs/*/*/{ATTACHED_NAME}"))  # adopted into result.json, not left beside it

"""One wandb run per unit with Lightning's own WandbLogger in the user's Trainer (issue 30): the
logger logs into the harness's run of the unit (named, grouped by seed and arm), read back from the
offline ``.wandb`` files; where the harness logs the unit elsewhere the logger is turned off, said."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest
from harness.training.run import Run

from . import lightning_fns as L
from . import wandb_reader
from .test_tracking import REPO, subprocess_env

SEEDS = (0, 1, 2)  # the analysis needs 3


@pytest.mark.slow
def test_a_wandb_logger_in_the_users_trainer_logs_into_the_units_one_run(tmp_path):
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "harness", "+experiment=loss_ab", f"ab.seeds=[{','.join(map(str, SEEDS))}]",
           f"hydra.run.dir={out}", "progress=false", "determinism.threads=1", "logger.wandb.history_every=1",
           "train.fn=tests.lightning_fns.fit_with_wandb"]
    done = subprocess.run(cmd, cwd=REPO, env=subprocess_env(HOME=str(tmp_path / "home")), capture_output=True,
                          text=True, timeout=600)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(lines[-60:])

    runs = wandb_reader.read_runs(out / "wandb")
    names = collections.Counter(r.name for r in runs)
    units = {f"seed={s} arm={a}" for s in SEEDS for a in "AB"}
    assert names == collections.Counter(units | {"analysis"})  # no run of Lightning's own, none twice
    assert {r.project for r in runs} == {"harness"} and len({r.group for r in runs}) == 1
    for run in runs:
        if run.name != "analysis":
            arm = run.name.split("arm=")[1]
            assert run.job_type == arm and run.config["arm"] == arm and run.exit_code == 0
            assert "train_loss" in {k for row in run.history for k in row}  # what Lightning's logger logged
            harness_rows = [row for row in run.history if "harness/step" in row]  # and the harness's record
            assert [row["harness/step"] for row in harness_rows] == list(range(1, 9))
            assert run.summary["fingerprints/data_order"]

    # said once for the six units, with why the runs are not in the logger's project
    said = [line for line in lines if "WandbLogger (project 'my-lightning-project') logged into" in line]
    assert len(said) == 1 and "each of 6 units, in project 'harness', not 'my-lightning-project': " in said[0]
    assert "set logger.wandb.project=my-lightning-project" in said[0]
    # the certificate's rerun: Lightning's logger off (no seventh unit run above), said
    assert sum("WandbLogger (project 'my-lightning-project') is turned off for this unit" in line for line in lines) == 1
    # each Lightning line once per Trainer (6 units and the certificate's rerun), never twice
    assert sum("GPU available" in line for line in lines) == len(units) + 1
    assert not [line for line in lines if "There is a wandb run already in progress" in line]


def test_a_unit_written_nowhere_turns_the_loggers_run_off(tmp_path, capsys):
    """The certificate's rerun (and a Run of no folder): the logger writes no run of its own."""
    from lightning.pytorch.loggers import WandbLogger

    callback = L.Callback(Run(0))
    logger = WandbLogger(project="mine", save_dir=str(tmp_path))
    L.trainer(callback, logger=logger).fit(L.MLP(), datamodule=L.Digits())
    assert not list(tmp_path.rglob("*.wandb"))
    assert "WandbLogger (project 'mine') is turned off for this unit" in capsys.readouterr().err


@pytest.mark.slow
def test_in_a_command_arms_script_the_loggers_run_is_off_and_said(tmp_path):
    """A command arm's script (a fresh process, wandb not set up yet): the harness logs the unit's run
    from its own process, so the script's WandbLogger writes none, and says so."""
    from harness.integrations.process import RUN_ENV, run_settings

    from .trainer_ab import DETERMINISM

    code = ("import lightning.pytorch as pl\n"
            "from lightning.pytorch.loggers import WandbLogger\n"
            "from tests import lightning_fns as L\n"
            "pl.seed_everything(0)\n"
            f"L.trainer(L.Callback(), logger=WandbLogger(project='mine', save_dir={str(tmp_path / 'w')!r}))"
            ".fit(L.MLP(), datamodule=L.Digits())\n")
    (tmp_path / "unit").mkdir()
    env = subprocess_env(HOME=str(tmp_path / "home"), HARNESS_RUN_DIR=str(tmp_path / "unit"), HARNESS_SEED="0",
                         HARNESS_ARM="A", **{RUN_ENV: run_settings("cpu", "fp32", DETERMINISM, None, None, 10)})
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(tmp_path.rglob("*.wandb")) and (tmp_path / "unit" / "attached.json").is_file()
    assert done.stderr.count("Lightning's WandbLogger (project 'mine') is turned off for this unit") == 1
    # and noted in the unit's record, for the harness to say once and log the unit in that project
    record = json.loads((tmp_path / "unit" / "attached.json").read_text())
    assert record["notices"] == [{"who": "harness.lightning", "logger": "Lightning's WandbLogger", "wandb": "off",
                                  "project": "mine"}]


@pytest.mark.slow
def test_a_logger_turned_off_in_workers_is_said_once_and_its_project_kept(tmp_path):
    """workers=2: each unit runs in a worker, where the user's WandbLogger(project=...) is turned off and
    the main process logs the unit. The terminal says so once (not once per unit, not only in a
    worker's stderr), naming the user's project, and the harness's runs go to that project."""
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "harness", "+experiment=loss_ab", "ab.seeds=[0,1,2]", f"hydra.run.dir={out}",
           "progress=false", "determinism.threads=1", "workers=2", "repro.certificate=false",
           "train.fn=tests.lightning_fns.fit_with_wandb"]
    done = subprocess.run(cmd, cwd=REPO, env=subprocess_env(HOME=str(tmp_path / "home")), capture_output=True,
                          text=True, timeout=600)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(lines[-60:])

    said = [line for line in lines if "WandbLogger" in line]
    assert len(said) == 1, "\n".join(said)
    assert "'my-lightning-project'" in said[0] and "turned off in 6 units" in said[0], said[0]
    runs = wandb_reader.read_runs(out / "wandb")
    units = {f"seed={s} arm={a}" for s in SEEDS for a in "AB"}
    assert {r.name for r in runs} == units | {"analysis"}
    assert {r.project for r in runs} == {"my-lightning-project"}  # the analysis's run with them


@pytest.mark.slow
def test_a_command_arms_logger_turned_off_is_said_once_and_its_project_kept(tmp_path):
    """A command arm's script with WandbLogger(project="userproj"): each unit's stderr.txt says it was
    turned off there; the terminal says it once for all units; the harness logs them in userproj."""
    out = tmp_path / "exp"
    script = REPO / "tests" / "command_scripts" / "lightning_wandb.py"
    cmd = [sys.executable, "-m", "harness", "--config-dir", str(REPO / "examples" / "lightning" / "conf"),
           "+experiment=lightning_ab", "ab.seeds=[0,1,2]", f"hydra.run.dir={out}", "progress=false", "workers=1",
           "determinism.threads=1", "repro.certificate=false", "logger=wandb", f"train.cmd=[{sys.executable},{script}]"]
    done = subprocess.run(cmd, cwd=REPO, env=subprocess_env(HOME=str(tmp_path / "home")), capture_output=True,
                          text=True, timeout=600)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(lines[-60:])

    said = [line for line in lines if "WandbLogger" in line]
    assert len(said) == 1 and "(project 'userproj') was turned off in 6 units" in said[0], "\n".join(said)
    assert said[0].endswith("in project 'userproj' (the logger's).")
    unit = out / "runs" / "seed=0" / "arm=low"
    assert "Lightning's WandbLogger (project 'userproj') is turned off for this unit" in (unit / "stderr.txt").read_text()
    runs = wandb_reader.read_runs(out / "wandb")
    assert {r.name for r in runs} == {f"seed={s} arm={a}" for s in SEEDS for a in ("low", "high")} | {"analysis"}
    assert {r.project for r in runs} == {"userproj"}

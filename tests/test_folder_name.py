"""The output folder follows what changes results: workers, logger.*, progress, tables and (where
the runs are the same) the analysis-only stats.* keys do not rename it, so adding them to a command
resumes the finished folder instead of training every unit again; a changed declared analysis key is
re-analysed there without training; goldens ignore such keys."""

from __future__ import annotations

import json

from harness.config import compose
from harness.tools.golden import NOT_NUMERICS, differences
from tests.conftest import FAST, run_cli

BASE = [o for o in FAST if not o.startswith(("workers=", "logger=", "progress="))]


def _folder_name(overrides):
    return compose(overrides, return_hydra_config=True).hydra.job.override_dirname


def test_keys_that_change_no_bit_do_not_name_the_folder():
    plain = _folder_name(BASE)
    assert plain and "train.max_steps=30" in plain
    for extra in (["workers=1"], ["workers=auto", "logger=none", "progress=false", "tables=true"],
                  ["logger.wandb.mode=offline", "logger.wandb.project=p"], ["stats.margin=0.5", "stats.alpha=0.01"],
                  ["stats.metrics.test_loss=max"]):
        assert _folder_name([*BASE, *extra]) == plain, extra
    assert _folder_name([*BASE, "optim.lr=0.01"]) != plain  # a key that changes the bits does
    # a sequential design decides from the margin which runs to make: there it names the folder
    seq = [*BASE, "ab.sequential.enabled=true"]
    assert _folder_name([*seq, "stats.margin=0.5"]) != _folder_name([*seq, "stats.margin=0.3"])


def test_golden_check_lists_no_key_that_changes_no_bit():
    golden = {"workers": 2, "logger": {"wandb": {"mode": "offline"}}, "lock_timeout": None, "optim": {"lr": 0.05}}
    now = {"workers": "auto", "logger": {"wandb": {"mode": "disabled"}}, "lock_timeout": 5, "optim": {"lr": 0.05}}
    assert differences(golden, now, ignore=NOT_NUMERICS) == []
    assert differences(golden, {**now, "optim": {"lr": 0.1}}, ignore=NOT_NUMERICS) == [("optim.lr", 0.05, 0.1)]


def test_a_finished_folder_is_resumed_and_reanalysed_without_training(tmp_path):
    tiny = [*FAST, "train.max_steps=10", "ab.seeds=[0,1,2]", "repro.certificate=false"]  # no rerun: cheaper
    first = run_cli(tiny, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    # the same command without workers=1 and logger=none, and another margin: the same folder
    again = run_cli([o for o in tiny if o not in ("workers=1", "logger=none")] + ["logger.wandb.mode=disabled",
                                                                                    "stats.margin=0.5"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    folders = list((tmp_path / "outputs" / "loss_ab").iterdir())
    assert len(folders) == 1, folders
    log = again.stderr + again.stdout
    assert log.count("skipped, completed with the same config and code") == 6, log[-3000:]
    assert "the declaration changed" in log
    assert json.loads((folders[0] / "declaration.json").read_text())["margin"] == 0.5

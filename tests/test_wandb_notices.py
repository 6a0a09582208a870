"""A trainer's own wandb logger turned off in each unit (integrations/wandb_hook.py) is said once on
the terminal for all the units, naming the project the logger named; the harness's runs go there
unless the harness's own project was given, which the line then says (tracking/notices.py)."""

from __future__ import annotations

import copy

from harness.tracking import tracker as tracking

from . import wandb_reader
from .test_tracking import clean_env, open_tracker, synthetic_result, trackers, wandb_config  # noqa: F401

OFF = {"who": "harness.lightning", "logger": "Lightning's WandbLogger", "wandb": "off", "project": "userproj"}


def noted(seed: int, arm: str) -> dict:
    result = synthetic_result(seed, arm)
    result["notices"] = [dict(OFF)]
    return result


def test_a_given_project_wins_and_the_line_says_so(clean_env, trackers, tmp_path):  # noqa: F811
    cfg = wandb_config()
    cfg.logger.wandb.project = "given"
    tracker = open_tracker(trackers, cfg, tmp_path / "exp")
    for seed in (0, 1):
        tracker.log_run(copy.deepcopy(noted(seed, "A")))
    [line] = tracker.close()
    assert line == ("Lightning's WandbLogger (project 'userproj') was turned off in 2 units (wandb disabled while "
                    "the trainer ran): each unit's one wandb run is the harness's, in project 'given', not "
                    "'userproj': the harness's project comes from logger.wandb.project and wins.")
    assert {r.project for r in wandb_reader.read_runs(tmp_path / "exp" / "wandb")} == {"given"}


def test_the_loggers_project_is_kept_when_the_harness_has_none_of_its_own(clean_env, trackers, tmp_path):  # noqa: F811
    tracker = open_tracker(trackers, wandb_config(), tmp_path / "exp")
    for seed in (0, 1):
        tracker.log_run(copy.deepcopy(noted(seed, "A")))
    tracker.log_run(synthetic_result(2, "A"))  # a unit with no notice: counted in no line
    [line] = tracker.close()
    assert line.endswith("turned off in 2 units (wandb disabled while the trainer ran): each unit's one wandb "
                         "run is the harness's, in project 'userproj' (the logger's).")
    assert {r.project for r in wandb_reader.read_runs(tmp_path / "exp" / "wandb")} == {"userproj"}


def test_with_logger_none_the_line_says_no_run_was_logged():
    tracker = tracking.NullTracker()
    for seed in (0, 1, 2):
        tracker.log_run(noted(seed, "B"))
    assert tracker.close() == ["Lightning's WandbLogger (project 'userproj') was turned off in 3 units (wandb "
                               "disabled while the trainer ran); logger=none: the harness logged no wandb run "
                               "for them."]
    assert tracker.close() == []  # said once

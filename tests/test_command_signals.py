"""A command killed from outside (scancel, preemption, the OOM killer) is named as such, and running
the same command again reruns it."""

from __future__ import annotations

import sys

import harness
from harness.integrations.process import ending
from harness.results import read_json

from .conftest import REPO, TEST_CONF

TOY = REPO / "tests" / "command_scripts" / "toy.py"
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        f"train.cmd=[{sys.executable},{TOY}]", "ab.seeds=[0]", "ab.arms.B=killed_once", "repro.certificate=false"]


def test_a_command_killed_from_outside_says_so_and_the_same_command_reruns_it(tmp_path):
    harness.run(BASE, out_dir=tmp_path, config_dir=TEST_CONF, verbose=False)
    killed = read_json(tmp_path / "runs" / "seed=0" / "arm=B" / "result.json")
    assert killed["status"] == "failed"
    assert killed["error"]["message"].startswith(
        "seed 0 arm B: the command was killed by SIGTERM from outside the script (a scheduler's scancel")
    assert "running the same command again reruns it" in killed["error"]["message"]
    harness.run(BASE, out_dir=tmp_path, config_dir=TEST_CONF, verbose=False)  # resume
    rerun = read_json(tmp_path / "runs" / "seed=0" / "arm=B" / "result.json")
    assert rerun["status"] == "completed" and set(rerun["metrics"]) == {"score"}


def test_how_a_command_ended_in_words():
    assert ending(3) == "exited with code 3"
    assert ending(-9).startswith("was killed by SIGKILL from outside the script (the OOM killer")
    assert ending(-11) == "crashed (SIGSEGV)"
    assert ending(-200) == "was ended by signal 200"

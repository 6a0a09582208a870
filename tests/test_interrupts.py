"""A Ctrl-C stops the experiment wherever it arrives: while a pool worker starts, while a command
unit starts, during the analysis, and when the training code swallowed it. Each test has the harness
send SIGINT to its process group at exactly that point, as a terminal's Ctrl-C does
(harness/integrations/interrupts.py: HARNESS_TEST_INTERRUPT_AT), so none depends on the machine's
speed: the harness exits 130 with the documented message, and leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.results import load_tree

from .conftest import REPO, TEST_CONF
from .test_process_tree import _args, _end_leftovers, _of_run, _until

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

SYN = ["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1", "data.train_limit=64",
       "ab.seeds=[0,1,2]", "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0",
       "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6", "repro.certificate=false"]
WAIT_S = 300  # a bound on a whole run, not a measurement


def _interrupted_at(point: str, args: list[str], out: Path) -> tuple[int, str]:
    """Run with SIGINT at ``point``; (the harness's pid, its stderr) once it exited as after a Ctrl-C."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_TEST_INTERRUPT_AT": point}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "--config-dir", str(TEST_CONF), *args,
                             f"hydra.run.dir={out}"], cwd=REPO, env=env, text=True, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # its group: as a terminal's
    try:
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "harness: interrupted." in err and "Run the same command again to resume" in err
    return proc.pid, err


def _workers_of(parent: int) -> list[int]:
    """Pool workers started by ``parent`` (their command line names it), still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"harness.experiment.parallel.workers" in argv and str(parent).encode() in argv[-3:] and state != "Z":
            found.append(int(entry.name))
    return found


def test_ctrl_c_while_a_worker_starts_stops_the_run_and_leaves_no_worker(tmp_path):
    out = tmp_path / "run"
    pid, err = _interrupted_at("worker-started", [*SYN, "workers=2"], out)
    assert "No result was completed yet." in err or "The 0 completed result(s)" in err
    _until(lambda: not _workers_of(pid), "the worker to end")
    assert not list(out.rglob("result.json"))


def test_ctrl_c_while_a_command_unit_starts_ends_its_whole_process_tree(tmp_path):
    out = tmp_path / "run"
    try:
        _interrupted_at("unit-started", _args(tmp_path, "workers=1", "ab.arms.A=hang"), out)
        _until(lambda: not _of_run(out), "every process the unit started to end")
        assert not list(out.rglob("result.json"))
    finally:
        _end_leftovers(out)


def test_ctrl_c_during_the_analysis_says_so_and_keeps_every_result(tmp_path):
    out = tmp_path / "run"
    _, err = _interrupted_at("analysis", [*SYN, "workers=1"], out)
    assert "The 6 completed result(s)" in err and "The analysis was not finished." in err
    assert "The run in progress" not in err
    assert len([r for r in load_tree(out).results if r["status"] == "completed"]) == 6


def test_a_ctrl_c_that_the_training_code_swallowed_still_stops_the_run(tmp_path):
    out = tmp_path / "run"
    _, err = _interrupted_at("none", [*SYN, "workers=1", "train.fn=tests.interrupt_fns.swallows_ctrl_c"], out)
    assert "The 1 completed result(s)" in err  # seed 0's arm A ran to its end; nothing after it
    assert [(r["seed"], r["arm"]) for r in load_tree(out).results] == [(0, "A")]

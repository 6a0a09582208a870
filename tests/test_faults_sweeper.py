"""Faults around the sweepers' own files: a full disk under sequential.json, a bad lock_timeout, and
the temporary folder of an analysis that was killed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from harness.analysis.render.outputs import write_together
from harness.results import read_json

from .conftest import REPO, run_cli
from .test_faults_pool import PAIRED

# python -m harness, with write_json failing once with ENOSPC at the Nth write of sequential.json
FULL_DISK_AT = """
import errno, runpy, sys
import harness.results as results
real, calls, at = results.write_json, [], int(sys.argv[1])
def write_json(path, obj):
    if str(path).endswith("sequential.json"):
        calls.append(path)
        if len(calls) == at:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
    real(path, obj)
results.write_json = write_json
sys.argv = ["harness"] + sys.argv[2:]
runpy.run_module("harness", run_name="__main__")
"""


@pytest.mark.slow
def test_a_full_disk_under_sequential_json_gives_the_storage_message_and_leaves_it_stopped(tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/sweeper=harness_sequential", *PAIRED, "ab.sequential.max_seeds=8", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, "-c", FULL_DISK_AT, "2", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"could not write {sweep / 'sequential.json'}: the disk is full" in said, said[-2000:]
    assert "Free some space" in said and "run the same command again to resume" in said
    state = read_json(sweep / "sequential.json")  # the disk had room again for the one try after it
    assert state["status"] == "stopped" and "the disk is full" in state["stopped"]

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(sweep / "sequential.json")["status"] == "settled"


@pytest.mark.slow
def test_bad_lock_timeout_values_are_refused_before_any_run(tmp_path):
    said = {}
    for value, code in (("-1", 2), ("abc", 1)):
        out = tmp_path / f"out{value}"
        proc = run_cli([*PAIRED, f"lock_timeout={value}", f"hydra.run.dir={out}"])
        assert proc.returncode == code, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and "lock_timeout" in proc.stderr
        assert not list(out.rglob("result.json"))
        said[value] = " ".join(proc.stderr.split())
    assert "'abc' of type 'str' could not be converted to Float" in said["abc"]  # the schema, at composition
    negative = said["-1"]  # the refusal of lock_timeout=-1 above, in words
    assert "lock_timeout=-1.0 is not allowed" in negative and "a number >= 0" in negative and "Nothing was run" in negative
    for sweeper in ("harness_basic", "harness_sequential"):
        sweep = tmp_path / sweeper
        proc = run_cli(["-m", f"hydra/sweeper={sweeper}", *PAIRED, "lock_timeout=-2", f"hydra.sweep.dir={sweep}"])
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "lock_timeout=-2.0 is not allowed" in " ".join(proc.stderr.split()) and "No job was launched" in proc.stderr
        assert not list(sweep.rglob("result.json"))


def test_the_folder_of_a_killed_analysis_is_removed_by_the_next_and_a_running_ones_kept(tmp_path, caplog):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    killed = tmp_path / f".analysis-new-{host}.{int(dead.stdout)}-abc"  # its process is gone
    running = tmp_path / f".analysis-new-{host}.{os.getpid()}-def"  # this process: still running
    for folder in (killed, running):
        (folder / ".old").mkdir(parents=True)
        (folder / "analysis.json").write_text("{}")
    caplog.set_level("WARNING", logger="harness")
    write_together(tmp_path, {"report.md": lambda p: p.write_text("new")})
    assert not killed.exists() and running.exists() and (tmp_path / "report.md").read_text() == "new"
    assert f"left by an analysis that was killed: {killed.name}" in caplog.text
    assert [p.name for p in tmp_path.glob(".analysis-new-*")] == [running.name]  # its own was removed too


class TerminatedWorkerError(Exception):
    """Named as joblib/loky's: what _lost_units recognises a dead pool worker by."""


class FakePool:
    """A launcher whose first launch loses the worker running (seed 0, arm B) after (seed 0, arm A)
    completed; (seed 1, arm A) had not started. Later launches complete what they are given."""

    def __init__(self, root):
        self.root, self.calls = root, []

    def launch(self, jobs, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        self.calls.append([list(j) for j in jobs])
        if len(self.calls) == 1:
            done = self.root / "seed=0,arm=A" / "runs" / "seed=0" / "arm=A"
            done.mkdir(parents=True)
            (done / "result.json").write_text('{"seed": 0, "arm": "A", "status": "completed"}')
            lost = self.root / "seed=0,arm=B" / "runs" / "seed=0" / "arm=B"
            lost.mkdir(parents=True)
            (lost / ".lock").write_text('{"pid": 4242, "host": "node7", "since": "2026-12-01T00:00:00"}')
            raise TerminatedWorkerError("A worker process managed by the executor was unexpectedly terminated.\n"
                                        "The exit codes of the workers are {SIGKILL(-9)}")
        return [JobReturn(status=JobStatus.COMPLETED, _return_value=None) for _ in jobs]


def test_launch_surviving_names_the_lost_unit_records_it_and_launches_only_what_has_no_result(tmp_path):
    from hydra_plugins.harness_sweeper._lost_units import launch_surviving

    jobs = [["seed=0", "arm=A"], ["seed=0", "arm=B"], ["seed=1", "arm=A"]]
    pool, said = FakePool(tmp_path), []
    launched = launch_surviving(pool, jobs, 5, tmp_path, say=said.append)
    assert pool.calls == [jobs, [["seed=1", "arm=A"]]]  # the done and the lost unit's jobs are not launched again
    assert launched.lost == ["(seed=0, arm=B): the job died, killed by signal 9 (SIGKILL, e.g. out of memory) (its "
                             "process, PID 4242 on host node7 since 2026-12-01T00:00:00, is gone)"]
    assert launched.next_idx == 5 + 3 + 1 and [jobs for jobs, _ in launched.launched] == [[["seed=1", "arm=A"]]]
    failed = read_json(tmp_path / "seed=0,arm=B" / "runs" / "seed=0" / "arm=B" / "result.json")
    assert failed["status"] == "failed" and failed["error"]["type"] == "LostJob"
    assert failed["error"]["message"] == launched.lost[0] and (failed["seed"], failed["arm"]) == (0, "B")
    assert "launching the batch's 1 job(s) without a result again" in said[0]

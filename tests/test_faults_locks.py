"""Run locks that explain themselves: the lock file, its holder (PID, host, stopped?), the wait, a bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from harness.experiment import resume
from harness.experiment.resume import LockTimeout, run_lock

from .conftest import FAST, REPO

HOLD = """
import os, signal, sys, time
from pathlib import Path
from harness.experiment.resume import run_lock
with run_lock(Path(sys.argv[1]), lambda: None):
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a holder stopped as by Ctrl-Z: it never lets go by itself
    time.sleep(600)
"""


@pytest.fixture
def stopped_holder(tmp_path):
    """A process that holds the run lock of tmp_path/<folder> and is stopped (SIGSTOP)."""
    procs = []

    def start(folder):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout.readline().strip() == "held"
        deadline = time.monotonic() + 30
        while resume._process_state(p.pid) != "stopped" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert resume._process_state(p.pid) == "stopped"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_stopped_holder_is_named_and_lock_timeout_bounds_the_wait(tmp_path, stopped_holder, monkeypatch):
    folder = tmp_path / "runs" / "seed=0" / "arm=A"
    holder = stopped_holder(folder)
    monkeypatch.setattr(resume, "_SAY_AT", (0.3, 0.6))
    monkeypatch.setattr(resume, "_REPEAT_EVERY", 0.3)
    said, waited = [], []
    with pytest.raises(LockTimeout) as e:
        with run_lock(folder, lambda: waited.append(True), timeout=1.5, log=said.append):
            pytest.fail("the lock was taken while its holder still holds it")
    assert waited == [True]
    lock = str(folder / ".lock")
    first = said[0]
    assert lock in first and f"PID {holder.pid} on host {socket.gethostname()}" in first
    assert "stopped" in first and f"kill -CONT {holder.pid}" in first and "lock_timeout=1.5" in first
    again = [s for s in said if s.startswith("still waiting")]
    assert len(again) >= 2 and all(lock in s and " s, held by PID" in s for s in again), said
    msg = str(e.value)
    assert lock in msg and f"PID {holder.pid}" in msg and "stopped" in msg and "lock_timeout=1.5" in msg
    assert "was not run" in msg and "lock_timeout=null" in msg


def test_the_lock_is_taken_once_the_holder_ends_and_then_names_the_new_holder(tmp_path, stopped_holder):
    folder = tmp_path / "f"
    holder = stopped_holder(folder)
    said = []
    holder.kill()  # the kernel releases a dead process's flock: never a stale lock
    holder.wait()
    with run_lock(folder, lambda: said.append("waited"), timeout=30, log=said.append):
        assert resume.holder_of(folder / ".lock").startswith(f"PID {os.getpid()} on host {socket.gethostname()}")
    assert "waited" not in said


@pytest.mark.slow
def test_a_run_waiting_on_a_stopped_holder_says_which_lock_and_who(tmp_path, stopped_holder):
    """Through the CLI (today's call site passes no timeout): the waiting run is not silent."""
    out = tmp_path / "out"
    holder = stopped_holder(out / "runs" / "seed=0" / "arm=A")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    log = tmp_path / "console.txt"
    with open(log, "w") as sink:
        run = subprocess.Popen([sys.executable, "-m", "harness", *FAST, "determinism.threads=1", "seed=0", "arm=A",
                                "repro.certificate=false", f"hydra.run.dir={out}"],
                               cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while "waiting for the lock" not in log.read_text() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        holder.kill()  # ending the holder releases the lock: the waiting run goes on and trains
        holder.wait()
        assert run.wait(timeout=240) == 0, log.read_text()[-3000:]
    line = next(s for s in text.splitlines() if "waiting for the lock" in s)
    assert str(out / "runs" / "seed=0" / "arm=A" / ".lock") in line
    assert f"PID {holder.pid} on host {socket.gethostname()}" in line and "stopped" in line
    assert (out / "runs" / "seed=0" / "arm=A" / "result.json").exists()


@pytest.mark.slow
def test_lock_timeout_bounds_the_wait_of_a_whole_run(tmp_path, stopped_holder):
    """Through the Python API (the CLI's execute): lock_timeout reaches the unit's lock, and the run
    stops with the lock and its holder named instead of waiting for ever."""
    import harness
    from harness import HarnessError

    out = tmp_path / "out"
    holder = stopped_holder(out / "runs" / "seed=0" / "arm=A")
    with pytest.raises(HarnessError) as e:
        harness.run([*FAST, "determinism.threads=1", "seed=0", "arm=A", "repro.certificate=false",
                     "lock_timeout=1.0"], out_dir=out, verbose=False)
    assert f"PID {holder.pid}" in str(e.value) and "lock_timeout=null" in str(e.value)
    assert not (out / "runs" / "seed=0" / "arm=A" / "result.json").exists()

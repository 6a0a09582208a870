"""A killed local-pool sweep leaves nothing behind: its loky workers (harness/experiment/parallel/watchdog.py) and the
resource trackers end when the launching process is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import FAST, REPO

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every live process below ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[1], []).append(int(entry.name))
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            if (st := _stat(pid)) is not None and st[0] != "Z":
                found[pid] = st[2]
                todo.append(pid)
    return found


def _alive(pid: int, started: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z" and st[2] == started  # a zombie or a reused pid is gone


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    except OSError:
        return "?"


def test_killed_pool_sweep_leaves_no_worker_behind(tmp_path):
    sweep = tmp_path / "sweep"
    # long jobs: the workers are mid-training when their launcher dies
    args = [a for a in FAST if not a.startswith("train.max_steps")] + ["train.max_steps=200000"]
    cmd = [sys.executable, "-m", "harness", "-m", *args, "hydra/launcher=local_pool", "seed=0,1,2",
           f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    procs: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and parent.poll() is None:
            procs = _descendants(parent.pid)
            workers = [p for p in procs if "LokyProcess" in _cmdline(p)]
            # both workers have started a job (Hydra made the job's log), i.e. they are training
            if len(workers) == 2 and len(list(sweep.rglob("harness.log"))) >= 2:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the pool sweep never had two jobs running (exit {parent.poll()})")
        time.sleep(0.5)  # let the jobs get past their start-up (not an assertion)
        procs = _descendants(parent.pid)
        assert len(procs) >= 3, {p: _cmdline(p) for p in procs}  # two workers and loky's resource tracker

        parent.send_signal(signal.SIGKILL)
        parent.wait()

        deadline = time.monotonic() + 30
        left = dict(procs)
        while left and time.monotonic() < deadline:
            left = {p: s for p, s in left.items() if _alive(p, s)}
            time.sleep(0.1)
        assert not left, "still running after their launcher was killed: " + "; ".join(
            f"{p}: {_cmdline(p)}" for p in left)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid, started in procs.items():  # never leave our own strays behind, pass or fail
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)

"""Every process a command unit started ends with it: the unit's whole process tree (a wrapper
script whose python is a grandchild, a helper it left in the background), when the unit ends, runs
past its timeout, or the harness is interrupted or killed with SIGKILL, serial and side by side."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness

from .conftest import REPO, TEST_CONF

TOY = REPO / "tests" / "command_scripts" / "toy.py"
WAIT_S = 120  # how long a test waits for a process to reach a state (a bound, not a measurement)
# sh runs python without exec (a command follows it), and leaves a helper running in the background;
# it goes on once the helper has written its pid (on a busy machine a fast unit could end before the
# helper started, and the test would find no helper to check)
WRAPPER = """\
"{py}" -c 'import os, sys, time; p = sys.argv[1]; open(p + ".tmp", "w").write(str(os.getpid())); \\
os.replace(p + ".tmp", p); time.sleep(300)' "$HARNESS_RUN_DIR/helper.pid" &
i=0; while [ ! -f "$HARNESS_RUN_DIR/helper.pid" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done
"{py}" "{toy}" "$@"
echo "the wrapper ends"
"""


def _wrapper(tmp_path: Path) -> Path:
    script = tmp_path / "run.sh"
    script.write_text(WRAPPER.format(py=sys.executable, toy=TOY))
    return script


def _args(tmp_path: Path, *overrides: str) -> list[str]:
    return ["+experiment=command_toy", "logger=none", "progress=false", "determinism.threads=1",
            f"train.cmd=[sh,{_wrapper(tmp_path)}]", "ab.seeds=[0]", *overrides]


def _of_run(out: Path) -> list[int]:
    """The processes whose environment names a unit folder under ``out`` (what a unit started)."""
    marker = f"HARNESS_RUN_DIR={out}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes() and _alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has died
    except (OSError, IndexError):
        return False


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _pid_in(path: Path) -> int | None:
    try:
        return int(json.loads(path.read_text())["pid"]) if path.suffix == ".json" else int(path.read_text())
    except (OSError, ValueError, KeyError):  # not written yet, or half written (the toy writes in place)
        return None


def _running(out: Path, arms=("A", "B")) -> list[int]:
    """Once both grandchildren of each arm's unit run (they wrote their pids): their pids."""
    folders = [out / "runs" / "seed=0" / f"arm={arm}" for arm in arms]
    files = [f / name for f in folders for name in ("seen.json", "helper.pid")]
    _until(lambda: all(_pid_in(f) for f in files), "every unit's python and helper to run")
    pids = [_pid_in(f) for f in files]
    assert all(_alive(p) for p in pids)
    return pids


def _start(args: list[str], out: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "--config-dir", str(TEST_CONF), *args,
                             f"hydra.run.dir={out}"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _end_leftovers(out: Path) -> None:
    for pid in _of_run(out):  # a failed test leaves nothing running either
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_or_interrupted_harness_leaves_no_process_of_any_unit_side_by_side(tmp_path, sig):
    out = tmp_path / "run"
    proc = _start(_args(tmp_path, "workers=2", "ab.arms.A=hang", "ab.arms.B=hang"), out)
    try:
        pids = _running(out)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=WAIT_S)
        _until(lambda: not _of_run(out), "every process the units started to end")
        assert not any(_alive(p) for p in pids)
        if sig == signal.SIGINT:
            assert proc.returncode == 130, err[-2000:]
            assert "harness: interrupted." in err and "Traceback" not in err
    finally:
        proc.kill()
        _end_leftovers(out)


def test_a_unit_that_ends_leaves_nothing_it_started_running(tmp_path):
    out = tmp_path / "run"
    try:
        harness.run(_args(tmp_path, "workers=1"), out_dir=out, config_dir=TEST_CONF,
                    verbose=False)
        helpers = [_pid_in(out / "runs" / "seed=0" / f"arm={arm}" / "helper.pid") for arm in ("A", "B")]
        assert all(helpers)
        _until(lambda: not any(_alive(p) for p in helpers), "the helpers the units left to end")
        assert not _of_run(out)
    finally:
        _end_leftovers(out)


@pytest.mark.slow
def test_a_unit_past_its_timeout_is_ended_with_everything_it_started(tmp_path):
    out = tmp_path / "run"
    try:
        harness.run(_args(tmp_path, "workers=1", "ab.arms.A=hang", "train.timeout_s=10"), out_dir=out,
                    config_dir=TEST_CONF, verbose=False)
        failed = json.loads((out / "runs" / "seed=0" / "arm=A" / "result.json").read_text())
        assert failed["status"] == "failed" and "ran past train.timeout_s=10" in failed["error"]["message"]
        started = [_pid_in(out / "runs" / "seed=0" / "arm=A" / name) for name in ("seen.json", "helper.pid")]
        assert all(started)
        _until(lambda: not _of_run(out), "every process the unit started to end")
    finally:
        _end_leftovers(out)

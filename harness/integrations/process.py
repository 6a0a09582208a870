"""A command arm's child process: its environment, its output files, a timeout, and no orphans.

The child gets its own process group (so the harness can kill it and whatever it started) and, on
Linux, a death signal: if the harness dies (SIGKILL included), the kernel kills the child. Ctrl-C,
a timeout or any other exception in the harness kills the whole group before it goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Mapping, Optional

TAIL_LINES = 20  # the last lines of stderr/stdout a failure shows
ATTACHED_NAME = "attached.json"  # in HARNESS_RUN_DIR: what the script's Run recorded (attach.py)
RUN_ENV = "HARNESS_RUN"


class CommandFailed(RuntimeError):
    """The command exited non-zero, timed out, or its output did not hold a metric."""


def environment(seed: int, arm: str, run_dir: Path, threads: int) -> dict:
    """The parent's environment plus what the harness owns for this unit: the pinned threads (a script
    at its default threads waits at every barrier on a busy machine), cuBLAS's deterministic
    workspace, and who the unit is."""
    from harness import CUBLAS_WORKSPACE_CONFIG

    env = dict(os.environ)
    env.update({
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        "CUBLAS_WORKSPACE_CONFIG": env.get("CUBLAS_WORKSPACE_CONFIG") or CUBLAS_WORKSPACE_CONFIG,
        "HARNESS_SEED": str(seed), "HARNESS_ARM": str(arm), "HARNESS_RUN_DIR": str(run_dir),
        "PYTHONUNBUFFERED": "1",  # the stdout file holds what was printed, even when the child is killed
    })
    return env


def run_settings(device: str, precision: str, determinism: Mapping, stream_seeds: Optional[Mapping],
                 metrics: Optional[Mapping], check_every: int) -> str:
    """HARNESS_RUN's value: what the script's Run must share with the unit's (command.py sets it)."""
    import json

    return json.dumps({"device": device, "precision": precision, "determinism": dict(determinism),
                       "stream_seeds": dict(stream_seeds or {}), "metrics": metrics, "check_every": check_every})


def _die_with_parent(parent: int):
    def setup() -> None:  # runs in the child between fork and exec
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the harness died before the call above
            os._exit(70)

    return setup


def run(argv: list[str], cwd: Path, env: dict, stdout: Path, stderr: Path, timeout_s: Optional[float]) -> int:
    """Run the command to its end; its exit code. Output goes to the two files. Raises CommandFailed
    after killing the group when it runs past ``timeout_s``; any exception (Ctrl-C too) kills it."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(
            argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise CommandFailed(f"it ran past train.timeout_s={timeout_s:g} s and was killed") from None
        except BaseException:
            _kill_group(proc)
            raise


def ending(code: int) -> str:
    """How the command ended, in words, for a failed unit's message. A kill from outside the script
    (SLURM's scancel, preemption or time limit, the OOM killer) is named as such: the unit is marked
    failed, not wrong, and running the same command again (resume) reruns it."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"was ended by signal {-code}"
    outside = {"SIGKILL": "the OOM killer, a scheduler's kill after its grace time, or kill -9",
               "SIGTERM": "a scheduler's scancel, preemption or time limit, or kill",
               "SIGINT": "Ctrl-C", "SIGHUP": "its terminal closed"}.get(name)
    if outside is None:  # SIGSEGV, SIGABRT, SIGBUS...: the process crashed by itself
        return f"crashed ({name})"
    return (f"was killed by {name} from outside the script ({outside}); the unit is marked failed and "
            f"running the same command again reruns it")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of an output file (for a failure's message)."""
    try:
        with open(path, "rb") as f:
            last = deque(f, maxlen=lines)
    except OSError:
        return ""
    return b"".join(last).decode("utf-8", "replace").rstrip()

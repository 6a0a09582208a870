"""A command arm's child process: its environment, its output files, a timeout, and no orphans.

The child gets a session, hence a process group, of its own: the harness kills the whole group, so
whatever the command started ends with it (``sh run.sh`` whose python is a grandchild), when the
command ends, fails, runs past its timeout, or the harness is interrupted (Ctrl-C) or fails. A
terminal's Ctrl-C does not reach the group: the harness, which gets it, ends the group. Should the
harness itself be killed (SIGKILL), a guard process started beside the unit (group_guard.py) kills
the group; on Linux the kernel's death signal ends the direct child too. Processes that left the
group and outlived their parent (a torchrun launcher killed before its ranks, which run in sessions
of their own) are found by the mark each unit run puts in its environment (ranks/proc_tree.py).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Mapping, Optional

from harness import HarnessError
from harness.integrations.ranks import proc_tree
from harness.integrations.interrupts import held, reached

TAIL_LINES = 20  # the last lines of stderr/stdout a failure shows
ATTACHED_NAME = "attached.json"  # in HARNESS_RUN_DIR: what the script's Run recorded (attach.py)
RUN_ENV = "HARNESS_RUN"
GUARD = Path(__file__).with_name("group_guard.py")  # run by path: it imports nothing from harness


class CommandFailed(HarnessError):
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
    when it runs past ``timeout_s``. However this ends (the command's exit, a timeout, Ctrl-C, any
    exception), the command's process group is killed before this returns or raises."""
    mark = f"{os.getpid()}-{secrets.token_hex(8)}"  # this run of this unit's processes, wherever they go
    env = {**env, proc_tree.UNIT_ENV: mark}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = guard = None
        try:
            with held():  # a Ctrl-C while the two start is raised here, once the finally knows both
                proc = subprocess.Popen(
                    argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True,
                    preexec_fn=_die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None)
                reached("unit-started")
                guard = _guard(proc.pid, mark)
            try:
                return proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise CommandFailed(f"it ran past train.timeout_s={timeout_s:g} s and was killed") from None
        finally:
            if proc is not None:
                _kill_group(proc, mark)
            if guard is not None:
                _release(*guard)


def _guard(pgid: int, mark: Optional[str] = None) -> Optional[tuple]:
    """Start group_guard.py for the group ``pgid`` and the processes marked ``mark``: (its process,
    the write end of its stdin)."""
    if not sys.executable:  # an embedded interpreter: no Python to start (the death signal remains)
        return None
    read, write = os.pipe()  # not inherited by any other child (close-on-exec)
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(GUARD), str(pgid), *([mark] if mark else [])],
                                stdin=read, stdout=subprocess.DEVNULL, start_new_session=True)
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return proc, write


def _release(proc: subprocess.Popen, write: int) -> None:
    """Tell the guard that the group was ended here (one byte), and reap it."""
    try:
        os.write(write, b"x")
    except OSError:  # it has ended
        pass
    finally:
        os.close(write)
    proc.wait()


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


def _kill_group(proc: subprocess.Popen, mark: Optional[str] = None) -> None:
    # a launcher's ranks in sessions of their own (torchrun) are out of the group: found by parent,
    # and by the unit's mark once their launcher has died before them
    tree = proc_tree.descendants(proc.pid) if proc.poll() is None else []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc_tree.kill(tree)
    proc.wait()
    if mark:
        proc_tree.kill_marked(mark)


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of an output file (for a failure's message)."""
    try:
        with open(path, "rb") as f:
            last = deque(f, maxlen=lines)
    except OSError:
        return ""
    return b"".join(last).decode("utf-8", "replace").rstrip()

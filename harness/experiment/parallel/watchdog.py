"""End a pool worker when the process that launched the sweep is gone.

A local pool (``hydra/launcher=local_pool``: joblib's loky workers) outlives a launcher killed with
SIGKILL: the workers are reparented and go on training (one was seen 14 minutes later), and loky's
resource tracker waits for them. ``exit_with_parent()`` starts one daemon thread per worker that
checks twice a second whether the launcher is still there, and ends the worker (``os._exit``) when
it is not. Once the workers are gone, the resource tracker's pipe closes and it ends too.

Why a polling thread and not ``prctl(PR_SET_PDEATHSIG)``: the death signal follows the *thread*
that spawned the worker (loky's executor-manager thread), not the launching process, it is
Linux-only, and it misses a parent that died before the call. The launcher is the parent that
spawned the worker (``os.getppid()`` at the first call) and, when the sweep's callback set it, the
pid in ``HARNESS_LAUNCHER_PID``: either one gone (the worker reparented, or the pid no longer
alive) means the launcher is gone.

Results are written atomically (harness/results/), so a worker ended mid-run leaves no half file;
rerunning the sweep's command resumes from the results on disk.
"""

from __future__ import annotations

import os
import sys
import threading
import time

LAUNCHER_ENV = "HARNESS_LAUNCHER_PID"  # set by harness/experiment/callbacks.py in the launching process
EXIT_CODE = 70  # what a worker ended by the watchdog exits with
POLL_S = 0.5

_thread: threading.Thread | None = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    try:  # a zombie (killed, not yet reaped) is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _launcher_pid() -> int | None:
    try:
        return int(os.environ[LAUNCHER_ENV])
    except (KeyError, ValueError):
        return None


def launcher_gone(parent: int, launcher: int | None) -> bool:
    return os.getppid() != parent or (launcher is not None and not _alive(launcher))


def exit_with_parent(poll_s: float = POLL_S) -> None:
    """Start (once per process) the thread that ends this process when its launcher is gone."""
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    parent, launcher = os.getppid(), _launcher_pid()
    if launcher is not None and not _alive(launcher):
        _end(launcher)  # the launcher died before this worker got here
    _thread = threading.Thread(target=_watch, args=(parent, launcher, poll_s), name="harness-watchdog", daemon=True)
    _thread.start()


def _watch(parent: int, launcher: int | None, poll_s: float) -> None:
    while not launcher_gone(parent, launcher):
        time.sleep(poll_s)
    _end(launcher or parent)


def _end(launcher: int) -> None:
    try:
        print(f"harness: the sweep's launcher (pid {launcher}) is gone; ending this pool worker "
              f"(pid {os.getpid()}). Results already written are intact: rerun the sweep's command to "
              "resume.", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - its stderr may be a pipe nobody reads any more
        pass
    os._exit(EXIT_CODE)

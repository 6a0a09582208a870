"""Long-lived worker processes that run (seed, arm) units side by side for one invocation.

``Workers(n)`` starts up to n processes (``python -m harness.experiment.parallel.workers``), each once: torch
(none for command units on the CPU: integrations/command_run.py), the training code and the harness
are imported once per worker, not once per unit. The parent sends
a task (a pickled arm config and the unit), the worker runs it through the very function the serial path
uses (units._unit: the run lock, the resume decision, run_one, the atomic result write) and sends
back the result; its log lines and progress steps travel to the parent, which owns the terminal,
the progress bar, the tracker and the analysis (side_by_side.py).

Why processes and not fork: the parent has imported torch (preflight), and an OpenMP runtime used
before fork() can hang in the child. Why pipes of our own and not multiprocessing's pool: the worker
must not re-run the ``__main__`` of ``python -m harness``, and a dead worker must be noticed as EOF
on its pipe and named by its unit, never as a pool's traceback.

A worker never outlives the parent: it asks the kernel for SIGKILL when its parent dies
(PR_SET_PDEATHSIG, Linux), and polls its parent as well (watchdog.py) where that is not available.
It runs in a session of its own and ignores SIGINT: Ctrl-C is the parent's to handle, which kills its
workers on the way out (a unit in progress leaves nothing: results are written whole or not at all;
a command unit's process group is ended by its guard, integrations/group_guard.py).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Iterator, Optional

import harness
from harness.integrations.interrupts import held, reached

PROGRESS_EVERY_S = 0.2  # a worker's progress messages, at most this often
# CUDA errors after which the process's context is unusable: every later kernel fails the same way
STICKY_CUDA_ERRORS = ("an illegal memory access was encountered", "device-side assert triggered",
                      "unspecified launch failure", "misaligned address", "an illegal instruction was encountered",
                      "uncorrectable ECC error encountered")


def broke_its_context(reply: tuple) -> bool:
    """Whether a unit's reply is a failed result with a sticky CUDA error: its worker must not run
    another unit (it is replaced; the unit's failed result is rerun by resume)."""
    result = reply[1] if len(reply) > 1 and reply[0] == "done" else None
    if not isinstance(result, dict) or result.get("status") != "failed":
        return False
    error = result.get("error") or {}
    text = f"{error.get('message', '')} {error.get('detail', '')}"
    return "CUDA" in text and any(e in text for e in STICKY_CUDA_ERRORS)


@dataclass
class Task:
    """One thing for a worker to do: ("unit", arm_cfg, out_dir, seed, arm, progress, {resume, lock_timeout}),
    ("rerun", arm_cfg, seed, arm), or ("call", module, function, args): a tool's own run, written
    nowhere (harness.tools.noise.noise_sources: the function's return value comes back)."""

    seed: int
    arm: str
    payload: tuple
    index: int = 0  # the caller's order


@dataclass
class _Worker:
    proc: object  # subprocess.Popen
    tasks: Connection
    replies: Connection
    task: Optional[Task] = None
    lines: list = field(default_factory=list)

    def death(self) -> str:
        """How the process ended, in words (it is reaped here)."""
        try:
            code = self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - still running after EOF: end it, it cannot be talked to
            self.proc.kill()
            code = self.proc.wait()
        if code < 0:
            try:
                return f"ended by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"ended by signal {-code}"
        return f"exited with status {code}"


class Workers:
    """Up to ``n`` worker processes, started when first needed and kept for every later ``run``."""

    def __init__(self, n: int, *, grow_to: int = 0, say: Callable[[str], None] = print, gpus: tuple = ()):
        self.gpus = list(gpus)  # CUDA_VISIBLE_DEVICES entries: worker k gets gpus[k % len] (training/gpus.py)
        self.n = max(1, int(n))
        self.grow_to = int(grow_to)  # workers=auto on a GPU: widen up to this, once a unit measured its memory
        if self.grow_to > self.n and len(self.gpus) > 1:  # one first unit alone on each GPU, measured there
            self.n = min(len(self.gpus), self.grow_to)
        self._fits: dict = {}  # arm -> the units its measured memory lets share the GPUs (widen_from)
        self._warm: tuple = ()
        self.say = say
        self._all: list[_Worker] = []

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    @property
    def side_by_side(self) -> bool:
        """Whether units go to workers: more than one now, or a pool that may widen."""
        return self.n > 1 or self.grow_to > self.n

    def widen_from(self, result: dict) -> None:
        """workers=auto on a GPU: size the pool from measurements, per arm. The first completed unit of
        each arm with its memory measured says how many units of that arm fit (threads.gpu_workers);
        the most demanding arm measured so far decides, so an arm with a bigger model or batch shrinks
        the pool when it is measured. A unit that ran out of GPU memory shrinks it by one (the unit is
        a failed unit: resume reruns it)."""
        if self.grow_to <= 1:
            return
        memory = (result.get("timing") or {}).get("gpu_memory")
        head = f"seed={result.get('seed')} arm={result.get('arm')}"
        if result.get("status") == "failed" and "CUDA out of memory" in str((result.get("error") or {}).get("message")):
            self.n = max(1, self.n - 1)
            self.say(f"{head} ran out of GPU memory: {self.n} unit(s) side by side from now on (resume reruns it)")
            return
        if result.get("status") != "completed" or not memory or result.get("arm") in self._fits:
            return
        from harness.training.threads import gpu_workers

        self._fits[result.get("arm")], why = gpu_workers(memory, cap=self.grow_to, devices=max(1, len(self.gpus)))
        n = min(self._fits.values())
        if n != self.n:
            first = len(self._fits) == 1
            self.say(f"{head} {'ran alone' if first else 'measured'}: {why}"
                     + ("" if first else f"; the most demanding arm measured decides: {n}"))
        self.n = n

    def _start(self) -> _Worker:
        import subprocess

        task_r, task_w = os.pipe()
        reply_r, reply_w = os.pipe()
        from harness.training.gpus import worker_env

        env = worker_env(len(self._all), self.gpus, os.environ)  # one GPU per worker, round robin
        # the folder that holds this very harness package, whoever's cwd the worker has (never the
        # package's own folder: its lightning.py and hf.py would hide the real packages)
        root = str(Path(harness.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        # a session of its own: a terminal's Ctrl-C (SIGINT to the foreground group) goes to this
        # process alone, which ends its workers; none prints a traceback of its own while it starts
        with held():  # a Ctrl-C meanwhile is raised below, once close() knows the worker
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.experiment.parallel.workers", str(task_r), str(reply_w), str(os.getpid())],
                    pass_fds=(task_r, reply_w), env=env, stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                os.close(task_r)
                os.close(reply_w)
            worker = _Worker(proc, Connection(task_w, readable=False), Connection(reply_r, writable=False))
            self._all.append(worker)
            reached("worker-started")
            # the training function's modules, as this process sees them
            worker.tasks.send({"path": list(sys.path), "warm": self._warm})
        return worker

    def start(self, units: int, warm: tuple = ()) -> None:
        """Start the workers ``units`` units will use now, so that their imports (torch, and the
        modules named in ``warm``: the training function's, the components') overlap the parent's
        preflight instead of following it."""
        self._warm = tuple(warm)
        while len(self._all) < min(self.n, units):
            self._start()

    def run(self, tasks: list[Task], *, on_log: Callable[[str], None],
            on_progress: Optional[Callable[[Task, tuple], None]] = None) -> Iterator[tuple[Task, str, tuple]]:
        """Run every task; yield (task, kind, body) as each ends: kind "done" (body: the worker's
        answer), "raise" (body: (exception, traceback text)) or "lost" (body: (how the worker ended,)).
        A lost worker is replaced while tasks remain."""
        pending = deque(tasks)
        idle = [w for w in self._all if w.task is None]
        busy: dict[Connection, _Worker] = {}
        while pending or busy:
            while pending and len(busy) < self.n:  # n may shrink (widen_from): the extra workers wait idle
                worker = idle.pop() if idle else self._start()
                task = pending.popleft()
                try:
                    worker.tasks.send(task.payload)
                except OSError:  # it died while idle: name its task as lost, go on with another
                    self._forget(worker)
                    yield task, "lost", (worker.death(),)
                    continue
                worker.task = task
                busy[worker.replies] = worker
            for conn in wait(list(busy)):
                worker = busy[conn]
                task = worker.task
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    del busy[conn]
                    self._forget(worker)
                    yield task, "lost", (worker.death(),)
                    continue
                if message[0] == "log":
                    on_log(message[1])
                    continue
                if message[0] == "progress":
                    if on_progress is not None:
                        on_progress(task, message[1:])
                    continue
                del busy[conn]
                worker.task = None
                if broke_its_context(message):  # it exits by itself; a fresh one takes the next unit
                    self._forget(worker)
                    worker.death()
                    on_log(f"seed={task.seed} arm={task.arm}: a CUDA error broke its worker's CUDA context; "
                           "the worker was replaced, and this failed unit is rerun by resume")
                else:
                    idle.append(worker)
                yield task, message[0], message[1:]

    def _forget(self, worker: _Worker) -> None:
        self._all.remove(worker)
        for conn in (worker.tasks, worker.replies):
            try:
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        """Idle workers are asked to exit; a worker still running a unit is killed (its unit leaves
        nothing on disk: results are written whole or not at all)."""
        for worker in self._all:
            try:
                if worker.task is None:
                    worker.tasks.send(None)
                else:
                    worker.proc.kill()
            except OSError:
                worker.proc.kill()
        deadline = time.monotonic() + 5
        for worker in self._all:
            try:
                worker.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - it did not exit when asked
                worker.proc.kill()
                worker.proc.wait()
            for conn in (worker.tasks, worker.replies):
                try:
                    conn.close()
                except OSError:
                    pass
        self._all = []


# -- the worker's side -----------------------------------------------------------------------------


class _Bar:
    """The progress bar's interface (units._unit calls start/done) as messages to the parent."""

    def __init__(self, replies: Connection, enabled: bool):
        self.replies, self.enabled = replies, enabled

    def start(self, seed: int, arm: str):
        if not self.enabled:
            return None
        last = [0.0]

        def update(step: int, total: int, loss: float) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or step == total:
                last[0] = now
                self.replies.send(("progress", step, total, float(loss)))

        return update

    def done(self) -> None:
        pass


def _do(task: tuple, replies: Connection) -> tuple:
    kind = task[0]
    try:
        if kind == "unit":
            from harness.experiment.units import _unit

            _, arm_cfg, out_dir, seed, arm, progress, how = task
            result, skipped = _unit(arm_cfg, Path(out_dir), seed, arm, lambda m: replies.send(("log", m)),
                                    _Bar(replies, progress), None, **how)
            return ("done", result, skipped)
        if kind == "rerun":  # the certificate's: trained again, written nowhere
            from harness.experiment.runner import run_one

            _, arm_cfg, seed, arm = task
            return ("done", run_one(arm_cfg, seed, arm)[0], False)
        if kind == "call":  # a tool's runs side by side, through this same pool (noise_sources_runs.py)
            import importlib

            _, module, function, args = task
            return ("done", getattr(importlib.import_module(module), function)(*args), False)
        raise ValueError(f"unknown task {kind!r}")
    except Exception as e:  # noqa: BLE001 - the parent raises it as the serial path would
        text = traceback.format_exc(limit=8)
        try:
            pickle.dumps(e)
        except Exception:  # noqa: BLE001 - not picklable: its type and words travel instead
            e = RuntimeError(f"{type(e).__name__}: {e}")
        return ("raise", e, text)


def _plain(value):
    """``value`` with every str subclass as a plain str: a result's ``env.torch`` is torch's
    TorchVersion, and unpickling it would import torch in the parent (seconds), which a parent whose
    units all run in workers never needs. The written result file holds the same text."""
    if isinstance(value, str):
        return str(value) if type(value) is not str else value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if type(value) in (list, tuple) else value
    return value


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the call above
        os._exit(70)
    from harness.experiment.parallel.watchdog import exit_with_parent

    exit_with_parent()  # where PR_SET_PDEATHSIG is not available


def _warm(modules) -> None:
    """Import what every unit will need while the parent runs its preflight (errors: the preflight's)."""
    import importlib

    import harness.experiment.units  # noqa: F401

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the preflight names what cannot be imported
            pass
    if "torch" not in sys.modules:  # command units on the CPU only (plan.modules_of): no torch at all
        return
    try:  # a torch optimizer's first construction imports dynamo: seconds, paid here, not by the first unit
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001 - private; then the first unit pays it
        pass


def main(argv: list[str]) -> int:
    task_fd, reply_fd, parent = map(int, argv[:3])
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tasks, replies = Connection(task_fd, writable=False), Connection(reply_fd, readable=False)
    try:
        init = tasks.recv()
        if init is None:  # the pool closed before this worker's first task (Ctrl-C while it started)
            os._exit(0)
        sys.path[:0] = [p for p in init["path"] if p not in sys.path]
        _warm(init.get("warm", ()))
        while True:
            task = tasks.recv()
            if task is None:  # every result is on disk: no interpreter teardown (torch's takes seconds)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            reply = _do(task, replies)
            replies.send(_plain(reply))
            if broke_its_context(reply):  # nothing more can run on this context
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)
    except (EOFError, BrokenPipeError):  # the parent is gone or closed the pool
        return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

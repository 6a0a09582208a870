"""A SLURM job of several tasks running its units as one process group each: task 0 leads, the others
follow, through files in the sweep's shared folder (slurm_tasks.py says which task is which).

Task 0 runs the job as any job does; each unit's training function is ``train`` here: it posts the
unit (its config, folder, environment, the rendezvous port) as ``unit-K.json`` in the job's exchange
folder and starts rank 0 (``python -m harness.integrations.ranks.nproc_rank``, the rank a
``train.nproc`` unit runs). Every other task (``follow``) waits for the next posted unit, starts its
own rank of it with its SLURM rank, and writes how that rank ended (``unit-K.rank-R.json``). The
ranks' records are then made one unit record as for ``train.nproc`` (nproc_launch.py): rank 0's
steps and metrics, the data order over every shard in rank order, the replicas compared, the world
in the unit's env. A rank that fails fails the unit, named (the first to fail, by when it ended);
the leader then posts ``unit-K.stop`` and every rank still running is ended. Task 0 beats (``beat``)
while it runs and posts ``done`` when its job ends: a follower whose leader stopped beating ends too.
Files, not a collective: the ranks' process groups are the units' own, one per unit.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional

from harness.integrations import process, ranks
from harness.integrations.command import _adopt, _attach_settings, arm_of
from harness.integrations.command_env import ATTACHED_ENV_NAME, read_reported
from harness.integrations.process import ATTACHED_NAME, RUN_ENV, CommandFailed
from harness.integrations.ranks import rank_timeout
from harness.integrations.ranks.nproc_launch import RANK_MODULE, UNIT_CONFIG, _env_of
from harness.integrations.ranks.slurm_tasks import UNITS_ENV, SlurmTasks, rank_env, slurm_tasks

POLL_S = 0.2  # how often a waiting task looks at the exchange folder
BEAT_S = 2.0  # how often task 0 says it is alive
STALLED_S = 300.0  # a leader silent this long has gone (its task died): its followers end
GRACE_S = 120.0  # after rank 0 ended well, how long the other ranks have to say how they ended
STOPPED_S = 30.0  # after rank 0 failed: how long the others have to end and say how


def _write(path: Path, data) -> None:
    """Whole or not at all: a reader on another node never sees half a file."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(json.dumps(data))
    os.replace(part, path)


def _read(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# -- task 0 ---------------------------------------------------------------------------------------

@contextmanager
def leading(tasks: SlurmTasks, sweep_root: Path):
    """Task 0 for the length of its job: the exchange folder, its units routed here (UNITS_ENV, read by
    command_spec.training_fn, inherited by a pool's workers), its beat, and ``done`` at the end."""
    exchange = tasks.exchange(sweep_root)
    exchange.mkdir(parents=True, exist_ok=True)
    os.environ[UNITS_ENV] = str(exchange)
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while not stop.is_set():
            count += 1
            try:
                _write(exchange / "beat", count)
            except OSError:
                pass
            stop.wait(BEAT_S)

    thread = threading.Thread(target=beat, name="harness-slurm-beat", daemon=True)
    thread.start()
    try:
        yield exchange
    finally:
        stop.set()
        _write(exchange / "done", {"ended": time.time()})
        os.environ.pop(UNITS_ENV, None)


def _claim(exchange: Path) -> int:
    """The job's next unit index (units of a pool's workers claim theirs one at a time)."""
    unit = 0
    while True:
        try:
            os.close(os.open(exchange / f"unit-{unit}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return unit
        except FileExistsError:
            unit += 1


def train(cfg, run, **_kwargs) -> dict:
    """The unit's training function on task 0 of a SLURM job of several tasks (the ranks call train.fn
    with train.kwargs). A rerun's folder (the certificate's) is in the exchange folder: every node sees it."""
    tasks = slurm_tasks()
    exchange = Path(os.environ[UNITS_ENV])
    unit = _claim(exchange)
    if run.run_dir is not None:
        return _unit(cfg, run, tasks, exchange, unit, Path(run.run_dir))
    folder = exchange / f"rerun-{unit}"
    try:
        return _unit(cfg, run, tasks, exchange, unit, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _unit(cfg, run, tasks: SlurmTasks, exchange: Path, unit: int, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    who = f"seed {run.seed} arm {arm_of(cfg)}: a unit of {tasks.size} SLURM tasks"
    attached = folder / ATTACHED_NAME
    for left in (attached, folder / ATTACHED_ENV_NAME, *folder.glob("std*.rank-*.txt")):  # an earlier run's
        left.unlink(missing_ok=True)
    ranks.clear(folder)
    config = folder / UNIT_CONFIG
    config.write_bytes(pickle.dumps(cfg))
    env = process.environment(run.seed, arm_of(cfg), folder, int(cfg.determinism.threads))
    env[RUN_ENV] = _attach_settings(cfg, run)
    env.update(rank_timeout.environment(cfg.train))  # the process group's timeout, on every task (nproc_rank.py)
    own = {k: v for k, v in env.items() if os.environ.get(k) != v}  # what the harness sets for the unit
    stop = exchange / f"unit-{unit}.stop"
    _write(exchange / f"unit-{unit}.json", {"unit": unit, "folder": str(folder), "config": str(config),
                                            "cwd": str(Path.cwd()), "env": own})
    timeout = cfg.train.get("timeout_s")
    try:
        first = _supervise(_argv(config), Path.cwd(), {**env, **rank_env(tasks, 0, tasks.local_rank, unit)},
                           folder / "stdout.txt", folder / "stderr.txt", timeout,
                           lambda: _failed_follower(exchange, unit))
        grace = GRACE_S if first["code"] == 0 else STOPPED_S
        if first["code"] != 0:
            stop.touch()  # the other ranks end now rather than at their collective's timeout
        ends = {0: first, **_followers(exchange, unit, tasks.size, grace)}
    finally:
        stop.touch()  # a rank still running (or yet to start) ends
        config.unlink(missing_ok=True)
    failure = _first_failure(ends, tasks.size, folder, timeout, grace)
    if failure:
        raise CommandFailed(f"{who}: {failure}")
    if not attached.exists():
        raise CommandFailed(f"{who}: the ranks ended without rank 0's record ({attached}); last lines of its "
                            f"stderr ({folder / 'stderr.txt'}):\n{process.tail(folder / 'stderr.txt') or '(empty)'}")
    return _adopt(run, attached, {}, who, _env_of(read_reported(folder)))


def _argv(config: Path) -> list[str]:
    return [sys.executable, "-m", RANK_MODULE, str(config)]


def _failed_follower(exchange: Path, unit: int) -> bool:
    """Whether another rank of the unit has ended badly (rank 0 then waits for nothing)."""
    ends = (_read(p) or {} for p in exchange.glob(f"unit-{unit}.rank-*.json"))
    return any(_bad(end) for end in ends)


def _bad(end: dict) -> bool:
    return not end.get("stopped") and (end.get("code") != 0 or bool(end.get("why")))


def _followers(exchange: Path, unit: int, size: int, grace: float) -> dict:
    """How ranks 1.. ended, as each wrote it; a rank silent for ``grace`` seconds is absent."""
    deadline = time.monotonic() + grace
    ends: dict = {}
    while True:
        for rank in range(1, size):
            if rank not in ends:
                found = _read(exchange / f"unit-{unit}.rank-{rank}.json")
                if found is not None:
                    ends[rank] = found
        if len(ends) == size - 1 or time.monotonic() > deadline:
            return ends
        time.sleep(POLL_S)


def _first_failure(ends: dict, size: int, folder: Path, timeout, grace: float) -> Optional[str]:
    """Which rank failed first and how, in words, or None when every rank ended well."""
    failed = {r: e for r, e in ends.items() if _bad(e)}
    if failed:
        rank = min(failed, key=lambda r: failed[r].get("ended") or 0.0)
        end = failed[rank]
        how = end.get("why") or f"it {process.ending(int(end['code']))}"
        if end.get("why") == "timeout":
            how = f"it ran past train.timeout_s={timeout:g} s and was killed"
        raised = _raised(folder, rank)
        err = folder / ("stderr.txt" if rank == 0 else f"stderr.rank-{rank}.txt")
        return (f"rank {rank} failed first: {how}{f'; it raised {raised}' if raised else ''} (the other ranks "
                f"were then ended)\nlast lines of its stderr ({err}):\n{process.tail(err) or '(stderr is empty)'}")
    silent = [r for r in range(size) if r not in ends]
    if silent:
        return (f"rank {', '.join(map(str, silent))} did not say how it ended within {grace:g} s of rank 0's end: "
                "its SLURM task died or never took the unit up (its log is in the job's .submitit folder)")
    return None


def _raised(folder: Path, rank: int) -> str:
    try:
        lines = ranks.rank_error(folder, rank).read_text().strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _supervise(argv: list[str], cwd: Path, env: dict, stdout: Path, stderr: Path, timeout_s,
               should_stop: Callable[[], bool]) -> dict:
    """Run one rank to its end, or until ``should_stop()`` or ``timeout_s``: {code, ended, stopped,
    why}. Its process group is killed whatever happens (process.py: no orphan)."""
    start = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = guard = None
        try:
            proc = subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True,
                                    preexec_fn=process._die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None)
            guard = process._guard(proc.pid)
            while True:
                try:
                    code = proc.wait(timeout=POLL_S)
                    return {"code": code, "ended": time.time(), "stopped": False, "why": None}
                except subprocess.TimeoutExpired:
                    pass
                if timeout_s is not None and time.monotonic() - start > float(timeout_s):
                    return {"code": None, "ended": time.time(), "stopped": False, "why": "timeout"}
                if should_stop():
                    return {"code": None, "ended": time.time(), "stopped": True, "why": None}
        finally:
            if proc is not None:
                process._kill_group(proc)
            if guard is not None:
                process._release(*guard)


# -- tasks 1.. ------------------------------------------------------------------------------------

class _Leader:
    """Whether task 0 still beats, by this task's own clock (no clock is shared between nodes)."""

    def __init__(self, exchange: Path):
        self.path, self.seen, self.since = exchange / "beat", None, time.monotonic()

    def gone(self) -> bool:
        try:
            now = self.path.read_text()
        except OSError:
            now = None
        if now != self.seen:
            self.seen, self.since = now, time.monotonic()
        return time.monotonic() - self.since > STALLED_S


def follow(tasks: SlurmTasks, sweep_root: Path) -> dict:
    """Task ``tasks.rank`` > 0 for the length of its job: each unit task 0 posts, run as this rank, in
    order, until task 0 posts ``done`` (or stops beating). The job's summary, as a sweeper reads it."""
    exchange = tasks.exchange(sweep_root)
    leader = _Leader(exchange)
    unit = 0
    while True:
        request = _read(exchange / f"unit-{unit}.json")
        if request is not None:
            _run_rank(tasks, exchange, unit, request, leader)
            unit += 1
            continue
        if (exchange / "done").exists() and not (exchange / f"unit-{unit}.json").exists():
            return {"slurm_rank": tasks.rank, "units": unit}
        if leader.gone():
            raise ranks.RanksFailed(f"SLURM task {tasks.rank}: task 0 of job {tasks.job_id} has not been heard from "
                                    f"for {STALLED_S:g} s ({exchange / 'beat'}): it died; this task ends too.")
        time.sleep(POLL_S)


def _run_rank(tasks: SlurmTasks, exchange: Path, unit: int, request: dict, leader: _Leader) -> None:
    ended = exchange / f"unit-{unit}.rank-{tasks.rank}.json"
    stop = exchange / f"unit-{unit}.stop"
    if stop.exists():  # rank 0 has ended already: the unit is over
        _write(ended, {"code": None, "ended": time.time(), "stopped": True, "why": None})
        return
    folder = Path(request["folder"])
    env = {**os.environ, **request["env"], **rank_env(tasks, tasks.rank, tasks.local_rank, unit)}
    try:
        end = _supervise(_argv(Path(request["config"])), Path(request["cwd"]), env,
                         folder / f"stdout.rank-{tasks.rank}.txt", folder / f"stderr.rank-{tasks.rank}.txt", None,
                         lambda: stop.exists() or leader.gone())
    except OSError as e:  # the unit's folder cannot be reached from this node
        end = {"code": None, "ended": time.time(), "stopped": False, "why": f"it could not start: {e}"}
    _write(ended, end)

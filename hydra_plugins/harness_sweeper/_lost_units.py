"""A job whose process died (SIGKILL, out of memory, ``scancel``, a node failure) is a failed unit,
not a traceback. Shared by the harness's sweepers: ``launch_surviving`` is what each calls instead of
``launcher.launch`` (the race sweeper can call it the same way).

A launcher reports a dead job by raising for the whole batch: joblib/loky's TerminatedWorkerError
(a pool that loses a worker stops all of its workers and drops what it had queued), submitit's
UncompletedJobError for a SLURM job that ended without a result (and the other jobs of the array go
on in SLURM). Which units it took with it is read from the run locks (harness.experiment.resume.
run_lock): a unit whose lock was taken during this launch, that has no result, and whose lock is
free again (an flock is released when its process dies) was running in a process that is gone. Each
such unit gets a failed result file (error type LostJob, saying how the job died), so the analysis
counts it as failed like any run that failed and a rerun runs it again (resume reruns what is not
completed). The batch's other jobs without a result are launched again: those that had not started
run now (a job of several units is launched again whole: resume skips what it has done).
"""

from __future__ import annotations

import fcntl
import logging
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, List, Optional

log = logging.getLogger("harness")

LOST_TYPE = "LostJob"  # error type of a unit whose job died (results.json "error.type")
_LOST = ("TerminatedWorkerError", "BrokenProcessPool", "UncompletedJobError")
_SLURM_POLL = 2.0  # seconds between squeue calls while the rest of a SLURM array ends


def lost_worker(e: BaseException) -> bool:
    """A job whose process died, not a bug of ours: a pool that lost a worker (joblib/loky's
    TerminatedWorkerError, concurrent.futures' BrokenProcessPool) or a SLURM job that ended without
    a result (submitit's UncompletedJobError: scancel, node failure, time limit, OOM)."""
    return any(c.__name__ in _LOST for c in type(e).__mro__)


def sbatch_refusal(e: BaseException) -> Optional[str]:
    """The one paragraph for a submission sbatch refused (submitit raises FailedJobError with sbatch's
    stderr, which is not a job that died), or None."""
    text = str(e)
    if not any(c.__name__ == "FailedJobError" for c in type(e).__mro__) or "sbatch: error" not in text:
        return None
    quoted = " / ".join(line.strip() for line in text.splitlines() if line.strip())[:600]
    if "Memory specification" in text:
        key = ("hydra.launcher.mem_gb: the memory asked for is more than a node of the partition has (null "
               "asks for none, e.g. on a cluster that configures no memory)")
    else:
        key = ("the launcher's request: hydra.launcher.partition, mem_gb, cpus_per_task, gpus_per_node or "
               "timeout_min")
    return (f"sbatch refused the submission: \"{quoted}\". No job of this batch ran. Change {key}, and run "
            f"the same command again: finished units are kept.")


def _slurm(e: BaseException) -> bool:
    return any(c.__name__ == "UncompletedJobError" for c in type(e).__mro__)


def how_it_died(e: BaseException) -> str:
    """", killed by signal 9 (...)" from loky's "The exit codes of the workers are {SIGKILL(-9)}";
    ", SLURM state CANCELLED by 0" from submitit's "(state: CANCELLED by 0)"."""
    found = re.findall(r"SIG[A-Z]+\((-?\d+)\)", str(e))
    state = re.search(r"state: ([A-Z_]+(?: by \d+)?)", str(e))
    if state and not found:
        return f", SLURM state {state.group(1)}" + (" (no accounting: sacct cannot say more)"
                                                    if state.group(1) == "UNKNOWN" else "")
    return f", killed by signal {-int(found[0])} ({'SIGKILL, e.g. out of memory' if found[0] == '-9' else 'a signal'})" \
        if found else ""


@dataclass
class Launched:
    """What a batch became: the launcher's returns, and the units lost on the way."""

    launched: list = field(default_factory=list)  # (jobs, their JobReturns) per launch that completed
    lost: List[str] = field(default_factory=list)  # "(seed=S, arm=A): the job died, ..."
    not_run: List[str] = field(default_factory=list)  # jobs of several units not launched again (their overrides)
    unrecorded: int = 0  # jobs that died before any run started: no failed result file says so
    next_idx: int = 0

    def message(self) -> str:
        parts = list(self.lost)
        if self.not_run:
            parts.append(f"job(s) of several units that died with a unit above, their other units not all run: "
                         f"{', '.join(self.not_run)}")
        return "; ".join(parts)


def launch_surviving(launcher, jobs: list, idx: int, root: Path, say: Callable[[str], None] = log.warning) -> Launched:
    """``launcher.launch(jobs, idx)``, surviving dead jobs (see the module doc)."""
    out = Launched(next_idx=idx)
    pending = [list(j) for j in jobs]
    while pending:
        started = time.time()
        try:
            results = launcher.launch(pending, initial_job_idx=out.next_idx)
        except Exception as e:  # noqa: BLE001 - a dead job: named below, no traceback
            refused = sbatch_refusal(e)
            if refused:  # no job ran: nothing is lost, the request itself must change
                from harness.experiment.execute import fail

                fail(refused, code=1)
            if not lost_worker(e):
                raise
            out.next_idx += len(pending)
            if _slurm(e):
                _wait_for_array(e, say)
            how = how_it_died(e)
            lost = record_lost_units(root, how, since=started)
            if not lost:  # died before any run took its lock: nothing tells which; do not loop on it
                where = "a SLURM job" if _slurm(e) else "a worker of the pool"
                out.lost.append(f"{where} died{how} before its run started; not run: "
                                f"{', '.join(' '.join(j) for j in pending)}")
                out.unrecorded += len(pending)
                return out
            if len(lost) > 1 and not _slurm(e):
                say("a pool stops all of its workers when one dies: one of these units may have been stopped "
                    "with it rather than have caused it")
            out.lost += [text for _, text in lost]
            hit = [j for j in pending if any(_holds(j, root, lock) for lock, _ in lost)]
            out.not_run += [" ".join(j) for j in hit if len(_units_named(j)) < 2]  # its other units may not have run
            pending = [j for j in pending if j not in hit and not _done(j, root)]
            if pending:
                say(f"{len(lost)} unit(s) lost ({'; '.join(t for _, t in lost)}); launching the batch's "
                    f"{len(pending)} job(s) without a result again (what they have done is skipped)")
            continue
        out.launched.append((pending, results))
        out.next_idx += len(pending)
        break
    return out


# -- which units a dead job took with it --------------------------------------------------------


def record_lost_units(root: Path, how: str, since: float) -> list:
    """[(lock path, "(seed=S, arm=A): the job died...")] for each unit whose run lock was taken at or
    after ``since`` and is free again with no result; each gets a failed result file."""
    from harness.experiment.resume import holder_of
    from harness.results import RESULT_NAME, write_result

    lost = []
    for lock in sorted(root.glob("**/runs/seed=*/arm=*/.lock")):
        result = lock.parent / RESULT_NAME
        try:
            if result.exists() or lock.stat().st_mtime < since - 1.0:  # done, or a lock of an earlier launch
                continue
        except OSError:
            continue
        seed, arm = lock.parent.parent.name.split("=", 1)[1], lock.parent.name.split("=", 1)[1]
        holder = holder_of(lock)
        with open(lock, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process still runs it (a job the pool has not yet stopped): launched again, it waits
            try:
                if result.exists():
                    continue
                text = f"(seed={seed}, arm={arm}): the job died{how} (its process, {holder}, is gone)"
                write_result(result, failed_result(lock.parent.parent.parent.parent, int(seed), arm, text))
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
        lost.append((lock, text))
    return lost


def failed_result(out_dir: Path, seed: int, arm: str, message: str) -> dict:
    """The failed result of a unit whose job died: the envelope its run would have written (from the
    config the job recorded in experiment.json before its first run), so resume and the sequential
    sweeper compare it like any other; a bare one when that file cannot be read."""
    from omegaconf import OmegaConf

    from harness.experiment.arms import arm_configs
    from harness.experiment.runner import new_result
    from harness.results import SCHEMA, read_json

    try:
        described = read_json(out_dir / "experiment.json")
        result = new_result(arm_configs(OmegaConf.create(described["config"]))[arm], seed, arm)
    except Exception:  # noqa: BLE001 - no config to build it from: what is known
        result = {"schema": SCHEMA, "seed": seed, "arm": arm, "status": "failed", "metrics": {},
                  "fingerprints": {}, "curve": {}, "env": {}, "timing": {}}
    result["error"] = {"type": LOST_TYPE, "message": message, "step": None}
    result["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return result


def _units_named(job: list) -> dict:
    return dict(a.split("=", 1) for a in job if a.startswith(("seed=", "arm=")))


def _done(job: list, root: Path) -> bool:
    """A job of one (seed, arm) whose result file is there (a job of several units is launched again:
    resume skips what it has done)."""
    from harness.results import RESULT_NAME

    named = _units_named(job)
    if len(named) < 2:
        return False
    found = root.glob(f"**/runs/seed={named['seed']}/arm={named['arm']}/{RESULT_NAME}")
    return any(_holds(job, root, path) for path in found)


def _holds(job: list, root: Path, lock: Path) -> bool:
    """Whether the job ran the unit of this lock (or result file): the job folder's path (<grid point>/
    seed=S,arm=A/runs/seed=S/arm=A/.lock) agrees with the job's seed, arm and swept overrides."""
    named = _units_named(job)
    seed, arm = lock.parent.parent.name.split("=", 1)[1], lock.parent.name.split("=", 1)[1]
    if named.get("seed", seed) != seed or named.get("arm", arm) != arm:
        return False
    rel = lock.relative_to(root).parts
    grid = rel[:-5]  # above <job folder>/runs/seed=S/arm=A/.lock: the grid point (none in a plain A/B sweep)
    overrides = {re.sub(r"=(True|False)$", lambda m: "=" + m.group(1).lower(), a) for a in job}
    return all(token in overrides for part in grid for token in part.split(","))


def _wait_for_array(e: BaseException, say: Callable[[str], None]) -> None:
    """submitit raised for the first job of an array that ended without a result; the array's other
    jobs still run (or wait) in SLURM and write their results: let them end before reading locks."""
    found = re.search(r"Job (\d+)", str(e))
    if not found or not shutil.which("squeue"):
        return
    said = False
    while True:
        try:
            left = subprocess.run(["squeue", "-h", "-j", found.group(1), "-o", "%i"], capture_output=True,
                                  text=True, timeout=60).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            return
        if not left:
            return
        if not said:
            say(f"SLURM job {found.group(1)}: one of its jobs ended without a result; waiting for its "
                f"{len(left)} other job(s) to end before naming what was lost")
            said = True
        time.sleep(_SLURM_POLL)

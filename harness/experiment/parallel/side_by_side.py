"""An experiment's (seed, arm) units side by side in worker processes (workers.py): the serial
path's contract, units at once.

``run_side_by_side`` is units.run_plan with the units handed to workers: after the same preflight at
the entry (skipped when every unit is done; the workers' imports overlap it), the same
experiment.json, the same per-unit function in each worker (lock, resume decision, atomic write),
results in the serial order (seed by seed, arm by arm),
the pairing checked per seed, the certificate's rerun in a worker. The parent logs each run's line,
draws the progress lines, and hands each result to the tracker. A unit whose worker died is a
failed result naming its (seed, arm) and how the worker ended, written like any failed run (resume
runs it again); a unit that is already done is skipped here without a worker.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Callable, Optional

from harness.experiment import units as serial
from harness.experiment.arms import ExperimentError
from harness.experiment.identity import config_hash
from harness.experiment.plan import Plan
from harness.experiment.resume import decide, run_lock
from harness.experiment.runner import code_of, new_result
from harness.experiment.rerun import rerun_fresh
from harness.experiment.parallel.workers import Task, Workers
from harness.training.threads import uses_gpu
from harness.results import RESULT_NAME, read_result, run_dir, write_json, write_result



class _NoBar:
    def start(self, seed, arm):
        return None

    def done(self):
        pass


_NO_BAR = _NoBar()


def run_side_by_side(plan: Plan, pool: Workers, *, log: Callable[[str], None] = print, tracker=None,
                     stop_on_fatal: bool = True) -> serial.Outcome:
    """units.run_plan, its units run by ``pool``'s workers (the entry's preflight made, the workers
    started to overlap it). Raises what it raises."""
    serial.describe(plan)
    units = [(seed, arm, plan.arms[arm]) for seed in plan.seeds for arm in plan.arm_names]
    outcome = run_units(units, plan, pool, log=log, tracker=tracker, stop_on_fatal=stop_on_fatal)
    if not plan.narrowed:
        serial.set_aside_other_configurations(plan.out_dir, plan.arms, list(plan.seeds), log)
    if plan.certify:
        outcome.certificate, kept = certify_with(pool, plan.arms, outcome.results, plan.certificate_dir, log)
        outcome.certified_now = outcome.certificate is not None and not kept
    return outcome


# What the analysis after the units imports and nothing before it does: scipy.stats (about a second)
# and matplotlib's Agg figure (about as long). A parent whose units run in workers waits on pipes
# meanwhile, its GIL free, so these imports take a core the units leave idle at times instead of
# following the last unit on one core while the other idles. Nothing computed changes.
_ANALYSIS_MODULES = ("scipy.stats", "matplotlib.figure", "matplotlib.backends.backend_agg")


def _preload_analysis() -> threading.Thread:
    """Import _ANALYSIS_MODULES in a daemon thread (an import error is the analysis's to report)."""
    def load() -> None:
        import importlib

        for name in _ANALYSIS_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the analysis imports it again and says what is wrong
                return

    thread = threading.Thread(target=load, name="harness-preload-analysis", daemon=True)
    thread.start()
    return thread


def run_units(units: list[tuple], plan: Plan, pool: Workers, *, log, tracker=None,
              stop_on_fatal: bool = True) -> serial.Outcome:
    """Run ``units`` ((seed, arm, arm_cfg), in the serial order) on the workers, into ``plan``'s
    folder with its resume, lock timeout and progress; skip the ones already done. An Outcome
    without a certificate."""
    from harness.experiment.refused_files import units_begin
    from harness.experiment.progress import RunProgress

    units_begin()  # a refusal from here on deletes nothing (app.refuse)
    out_dir, progress = plan.out_dir, plan.progress
    how = {"resume": plan.resume, "lock_timeout": plan.lock_timeout}
    results: list[Optional[dict]] = [None] * len(units)
    skipped, failed, tasks = [], [], []
    for i, (seed, arm, arm_cfg) in enumerate(units):
        path = run_dir(out_dir, seed, arm) / RESULT_NAME
        if plan.resume and decide(path, config_hash(arm_cfg), code_of(arm_cfg), seed, arm).skip:
            results[i], was_skipped = serial._unit(arm_cfg, out_dir, seed, arm, log, _NO_BAR, tracker, **how)
            if was_skipped:
                skipped.append((seed, arm))
                continue
        if results[i] is None:
            tasks.append(Task(seed, arm, ("unit", arm_cfg, str(out_dir), seed, arm, progress, how), i))
    by_seed: dict[int, list[int]] = {}
    for i, (seed, *_rest) in enumerate(units):
        by_seed.setdefault(seed, []).append(i)

    order = deque(by_seed)

    def paired() -> None:
        """Check the seeds in the serial order, each once its units are in: the first unpaired seed
        named is the one the serial path names, whichever unit finished first."""
        while order and all(results[j] is not None for j in by_seed[order[0]]):
            serial.check_pairing([results[j] for j in by_seed[order.popleft()]])

    paired()  # seeds whose units were all skipped
    # an analysis follows units that ran (a no-op rerun reads its analysis.json: nothing to preload)
    preload = _preload_analysis() if tasks and not plan.narrowed and not plan.multirun else None
    lines: dict[int, tuple] = {}
    with RunProgress(enabled=progress) as bar:
        def on_progress(task: Task, step) -> None:
            if task.index not in lines:
                lines[task.index] = bar.line(task.seed, task.arm) or (None, None)
            if lines[task.index][0] is not None:
                lines[task.index][0](*step)

        for task, kind, body in pool.run(tasks, on_log=log, on_progress=on_progress):
            _, close = lines.pop(task.index, (None, None))
            if close is not None:
                close()
            seed, arm, arm_cfg = units[task.index]
            if kind == "raise":
                raise body[0]
            if kind == "lost":
                result, was_skipped = _lost(arm_cfg, out_dir, seed, arm, body[0], log, plan.lock_timeout), False
            else:
                result, was_skipped = body
            results[task.index] = result
            if was_skipped:  # another process ran it meanwhile
                skipped.append((seed, arm))
            else:
                pool.widen_from(result)  # workers=auto on a GPU: as many as a unit run now measured fits
                if tracker is not None:
                    tracker.log_run(result)
                if result["status"] != "completed":
                    failed.append(result)
                    if stop_on_fatal and result["error"]["type"] in serial.FATAL:
                        raise ExperimentError(result["error"]["message"])
            paired()
    if preload is not None:
        preload.join()  # no import in flight when the caller goes on to the analysis, which imports the same
    return serial.Outcome(out_dir, [r for r in results if r is not None], skipped, failed)


def _lost(arm_cfg, out_dir: Path, seed: int, arm: str, how: str, log, lock_timeout) -> dict:
    """The failed result of a unit whose worker died, written as the serial path writes a failed
    run, unless the worker wrote its result before it died."""
    path = run_dir(out_dir, seed, arm) / RESULT_NAME
    with run_lock(path.parent, lambda: None, timeout=lock_timeout, log=log):
        decision = decide(path, config_hash(arm_cfg), code_of(arm_cfg), seed, arm)
        if decision.skip:
            return read_result(path)
        result = new_result(arm_cfg, seed, arm)
        result["error"] = {
            "type": "WorkerLost", "step": None,
            "message": (f"the worker process running seed={seed} arm={arm} {how} before it wrote a result "
                        "(killed, or out of memory?); run the same command again to run it again"),
        }
        serial.supersede(path)
        write_result(path, result)
    log(serial._run_line(result))
    return result


def certify_with(pool: Workers, arms, results, out_dir: Path, log) -> tuple[Optional[dict], bool]:
    """units._certify, its rerun in a worker: (certificate, kept from disk?)."""
    first = next((r for r in results if r.get("status") == "completed"), None)
    if first is None:
        return None, False
    kept = serial._certificate_still_valid(out_dir / "certificate.json", first)
    if kept is not None:
        log(f"{kept['line']} (certificate.json kept: made for this very result, config and code)")
        return kept, True
    if uses_gpu(arms[first["arm"]]):  # not a worker that ran the unit's shapes: a fresh process (rerun.py)
        again = rerun_fresh(arms[first["arm"]], first["seed"], first["arm"])
    else:
        task = Task(first["seed"], first["arm"], ("rerun", arms[first["arm"]], first["seed"], first["arm"]))
        [(_, kind, body)] = list(pool.run([task], on_log=log))
        if kind == "raise":
            raise body[0]
        again = body[0] if kind == "done" else {"status": "failed", "error": {"message": f"its worker {body[0]}"}}
    cert = serial.certificate(first, again) if again["status"] == "completed" else serial.failed_rerun(first, again)
    cert["config_hash"] = first["config_hash"]
    cert["code_version"] = first.get("code_version")
    cert["final"] = first["fingerprints"]["final"]
    write_json(out_dir / "certificate.json", cert)
    log(cert["line"])
    return cert, False

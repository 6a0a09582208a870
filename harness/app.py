"""One invocation of ``python -m harness``: the Hydra adapter around ``execute``.

``run(cfg)`` reads what only Hydra knows (the output folder, single run or sweep, the launcher) and
calls ``harness.experiment.execute.execute``, the Hydra-free core that the Python API calls too.
Errors a user can fix (a bad key, a factor that does not exist, a missing dataset) print one clear
paragraph and exit with status 2. Failed runs are recorded in their result files; the analysis names
them and the process exits with status 1 after printing everything it could compute.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from harness.experiment.execute import CURRENT, execute, fail, storage_message
from harness.experiment.arms import ExperimentError

log = logging.getLogger("harness")


def run(cfg: DictConfig) -> dict:
    """The Hydra task function's body. Returns a small summary (a sweeper reads it from JobReturn)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from harness.config import factor_override_problem, replace_whole_arms

    hc = HydraConfig.get()
    replace_whole_arms(cfg, hc.overrides.task)
    problem = factor_override_problem(cfg, hc.overrides.task)
    if problem:
        refuse(problem)
    out_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    sweep_root = Path(hc.sweep.dir) if multirun else out_dir
    if multirun:  # a SLURM job of several tasks: each unit runs as one rank per task (integrations/ranks/)
        tasks = _slurm_tasks(cfg)
        if tasks is not None:
            from harness.integrations.ranks.slurm_units import follow, leading

            if tasks.rank != 0:
                return follow(tasks, sweep_root)
            with leading(tasks, sweep_root):
                return _run(cfg, hc, out_dir, sweep_root, multirun)
    return _run(cfg, hc, out_dir, sweep_root, multirun)


def _slurm_tasks(cfg: DictConfig):
    """This SLURM task's place among its job's tasks (None: a job of one task, or not SLURM's); a job
    whose units cannot run as its tasks is refused."""
    from harness.integrations.ranks.slurm_tasks import SlurmEnvError, slurm_tasks, tasks_problem

    try:
        tasks = slurm_tasks()
    except SlurmEnvError as e:
        refuse(str(e))
    if tasks is None:
        return None
    from harness.training.gpus import visible
    from harness.training.threads import uses_gpu

    problem = tasks_problem(cfg, tasks.size, local_size=tasks.local_size, gpus=len(visible()) if uses_gpu(cfg) else None)
    if problem:
        refuse(problem)
    return tasks


def _run(cfg: DictConfig, hc, out_dir: Path, sweep_root: Path, multirun: bool) -> dict:
    from harness.training.determinism import spread_over_gpus
    from harness.experiment.parallel.watchdog import exit_with_parent

    if multirun and "joblib" in str(hc.launcher.get("_target_", "")):
        spread_over_gpus(hc.job.num)  # a local pool on a multi-GPU machine; submitit gets its GPU from SLURM
        exit_with_parent()  # a worker ends when the sweep's launcher is killed (harness/experiment/parallel/watchdog.py)
    CURRENT["folder"] = sweep_root
    adaptive = [k for k in ("sequential", "race") if cfg.ab[k].get("enabled")]
    if multirun and adaptive and not any(
            n in str(hc.sweeper.get("_target_", "")) for n in ("HarnessSequentialSweeper", "HarnessRaceSweeper")):
        log.warning(f"ab.{adaptive[0]}.enabled=true is ignored by this sweeper: each job runs its seed and arm. "
                    f"Run it with -m hydra/sweeper=harness_{adaptive[0]} (or without -m).")
    try:
        done = execute(cfg, out_dir, sweep_root=sweep_root, multirun=multirun)
    except OSError as e:
        fail(storage_message(e, sweep_root), code=1)
    except ExperimentError as e:
        if multirun:
            log.error(f"harness: error: {e}")
            raise  # Hydra records this job as failed; the other jobs go on
        refuse(str(e))
    from harness.analysis.diverged import counted_runs

    counted = counted_runs(done.analysis)  # diverged runs counted as worst are outcomes, not failures
    failed = [r for r in done.outcome.failed if (r["seed"], str(r["arm"])) not in counted]
    if done.analysis_error:
        fail(done.analysis_error, code=1)
    if failed and not multirun:
        names = ", ".join(f"seed={r['seed']} arm={r['arm']}" for r in failed)
        if done.analysis is None:
            fail(f"{len(failed)} run(s) failed: {names}. Their result files say why.", code=1)
        fail(f"{len(failed)} run(s) failed and were left out of the analysis: {names}.", code=1)
    return {"out_dir": str(out_dir), "completed": len(done.outcome.results) - len(failed), "failed": len(failed)}


def refuse(message: str) -> None:
    """Exit 2. A folder this invocation created (precheck.py noted the topmost new one) is removed
    only while it holds nothing but what was written before any unit (.hydra/, the log, the
    declaration): from the first unit on, nothing is deleted and the message says where it is. In a
    folder that existed, a refusal before any unit puts Hydra's files and the log back as they were."""
    import shutil

    from harness.experiment.refused_files import MARKS, put_back, written_before_units

    created, before, began = MARKS.pop("created", None), MARKS.pop("before", None), MARKS.pop("units_began", False)
    kept = created is not None and created.is_dir() and not written_before_units(created)
    if created is not None and created.is_dir() and not kept:
        logging.shutdown()  # the log file's handler: closed before its folder goes
        shutil.rmtree(created, ignore_errors=True)
    elif (began or kept) and CURRENT.get("folder") is not None:
        message += f" Nothing was deleted: the results and files written so far are in {CURRENT['folder']}."
    elif before is not None:  # a folder that existed: Hydra's files and the log as they were
        logging.shutdown()
        put_back(before)
    fail(message)

"""One invocation of ``python -m harness``: the Hydra adapter around ``execute``.

``run(cfg)`` reads what only Hydra knows (the output folder, single run or sweep, the launcher) and
calls ``execute``, the Hydra-free core that the Python API (harness.api) calls too. Errors a user
can fix (a bad key, a factor that does not exist, a missing dataset) print one clear paragraph and
exit with status 2. Failed runs are recorded in their result files; the analysis names them and the
process exits with status 1 after printing everything it could compute.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from .experiment import ExperimentError, Outcome, run_experiment

log = logging.getLogger("harness")

# The folder this process is writing results into (for the message after Ctrl-C).
CURRENT: dict = {}


def _say(msg: str) -> None:
    log.info(msg)


def fail(message: str, code: int = 2) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(code)


@dataclass
class Executed:
    outcome: Outcome
    analysis: Optional[dict]  # None for one unit of a sweep (the sweep is analysed as a whole)
    analysis_error: Optional[str] = None


def execute(cfg: DictConfig, out_dir: Path, *, sweep_root: Optional[Path] = None, multirun: bool = False,
            say: Callable[[str], None] = _say, show_table: bool = True) -> Executed:
    """Run the experiment into ``out_dir``, then (unless narrowed to one unit) analyse, report, track.

    Raises ExperimentError for a misconfigured experiment (nothing, or only recorded failures, on disk).
    """
    from . import tracking
    from .declaration import Declaration, DeclarationError

    sweep_root = sweep_root or out_dir
    narrowed = cfg.seed is not None or cfg.arm is not None
    try:
        declaration = Declaration.from_config(cfg)  # what will be analysed, checked before any run
    except DeclarationError as e:
        raise ExperimentError(f"{e} Nothing was run.") from None
    try:
        tracker = tracking.open_tracker(cfg, out_dir, sweep_root=sweep_root)
    except tracking.TrackingConfigError as e:
        raise ExperimentError(str(e)) from None
    try:
        certify = cfg.repro.certificate and _owns_certificate(cfg)
        if cfg.ab.sequential.enabled and not narrowed and not multirun:
            from .sequential import run_sequential  # seeds in batches until settled (docs/sequential.md)

            return run_sequential(cfg, out_dir, declaration, say=say, tracker=tracker, certify=certify,
                                  show_table=show_table)
        if not multirun:  # a sweep's declaration is written once, by the launching process (callbacks.py)
            declaration.write(out_dir, say=say)
        outcome = run_experiment(
            cfg, out_dir, log=say, tracker=tracker, certify=certify, certificate_dir=sweep_root,
            stop_on_fatal=not multirun,
        )
        if narrowed or multirun:
            # One unit of a sweep: the sweep's callback (or harness.analyze) analyses all of them.
            say(f"results in {out_dir}; analyse a whole tree with: python -m harness.analyze {sweep_root}")
            return Executed(outcome, None)

        from .analysis import AnalysisError, analyze_dir
        from .report import render_table

        try:
            analysis = analyze_dir(out_dir, declaration=declaration)
        except AnalysisError as e:
            return Executed(outcome, None, f"no analysis: {e} The result files are in {out_dir / 'runs'}.")
        if show_table:
            render_table(analysis, tables=bool(cfg.tables))
        tracker.log_analysis(analysis, out_dir)
        say(f"results: {out_dir}  (analysis.json, report.md, analysis.png)")
        return Executed(outcome, analysis)
    finally:
        for w in tracker.close():
            log.warning(w)


def run(cfg: DictConfig) -> dict:
    """The Hydra task function's body. Returns a small summary (a sweeper reads it from JobReturn)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .config import factor_override_problem, replace_whole_arms
    from .determinism import spread_over_gpus
    from .watchdog import exit_with_parent

    hc = HydraConfig.get()
    replace_whole_arms(cfg, hc.overrides.task)
    problem = factor_override_problem(cfg, hc.overrides.task)
    if problem:
        fail(problem)
    out_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    sweep_root = Path(hc.sweep.dir) if multirun else out_dir
    if multirun and "joblib" in str(hc.launcher.get("_target_", "")):
        spread_over_gpus(hc.job.num)  # a local pool on a multi-GPU machine; submitit gets its GPU from SLURM
        exit_with_parent()  # a worker ends when the sweep's launcher is killed (harness/watchdog.py)
    CURRENT["folder"] = sweep_root
    if multirun and cfg.ab.sequential.enabled and "harness_sweeper" not in str(hc.sweeper.get("_target_", "")):
        log.warning("ab.sequential.enabled=true is ignored by this sweeper: each job runs its seed and arm. "
                    "Add seeds until settled with -m hydra/sweeper=harness_sequential (or without -m).")
    try:
        done = execute(cfg, out_dir, sweep_root=sweep_root, multirun=multirun)
    except OSError as e:
        fail(storage_message(e, sweep_root), code=1)
    except ExperimentError as e:
        if multirun:
            log.error(f"harness: error: {e}")
            raise  # Hydra records this job as failed; the other jobs go on
        fail(str(e))
    failed = done.outcome.failed
    if done.analysis_error:
        fail(done.analysis_error, code=1)
    if failed and not multirun:
        names = ", ".join(f"seed={r['seed']} arm={r['arm']}" for r in failed)
        if done.analysis is None:
            fail(f"{len(failed)} run(s) failed: {names}. Their result files say why.", code=1)
        fail(f"{len(failed)} run(s) failed and were left out of the analysis: {names}.", code=1)
    return {"out_dir": str(out_dir), "completed": len(done.outcome.results) - len(failed), "failed": len(failed)}


def resume_command() -> str:
    import shlex

    return "python -m harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _completed_under(folder: Optional[Path]) -> str:
    if folder is None or not Path(folder).exists():
        return "No result was completed yet."
    from .results import load_tree

    try:
        done = [r for r in load_tree(folder).results if r.get("status") == "completed"]
    except Exception:  # noqa: BLE001 - a message, not an analysis
        return f"The results under {folder} are as they were written."
    return (f"The {len(done)} completed result(s) under {folder} are intact (a result file is written whole "
            "or not at all).")


def storage_message(e: OSError, folder: Optional[Path], again: Optional[str] = None) -> str:
    what = {28: "the disk is full", 122: "the disk quota is exceeded", 30: "the file system is read-only",
            13: "permission denied"}.get(e.errno, e.strerror or str(e))
    return (f"could not write {e.filename or 'a file'}: {what}. {_completed_under(folder)} "
            f"Free some space (or choose another output folder) and run the same command again to resume: "
            f"{again or resume_command()}")


def interrupted_message() -> str:
    folder = CURRENT.get("folder")
    return (f"interrupted. {_completed_under(folder)} The run in progress was not saved. Run the same command "
            f"again to resume (completed runs are skipped): {resume_command()}")


def _owns_certificate(cfg: DictConfig) -> bool:
    """Within a sweep, the job that runs the first seed's first arm reruns it for the certificate."""
    first_seed = cfg.ab.seeds[0] if len(cfg.ab.seeds) else None
    first_arm = next(iter(cfg.ab.arms), None)
    return (cfg.seed is None or cfg.seed == first_seed) and (cfg.arm is None or cfg.arm == first_arm)

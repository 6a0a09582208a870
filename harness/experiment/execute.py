"""One invocation, Hydra-free: ``execute`` runs an experiment into a folder and analyses it.

The Hydra adapter (harness/app.py) and the Python API (harness/api.py) both call ``execute``. Here
too: the exits a user sees (``fail``: one paragraph, a status), and the messages after a full disk or
Ctrl-C, which name what is safe on disk and the command that resumes.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from harness.experiment.units import Executed, recorded_threads, run_plan
from harness.experiment.arms import ExperimentError
from harness.integrations.interrupts import reached

log = logging.getLogger("harness")

# The folder this process is writing results into (for the messages after Ctrl-C and a refusal).
CURRENT: dict = {}


def _say(msg: str) -> None:
    log.info(msg)


def fail(message: str, code: int = 2) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(code)


def execute(cfg: DictConfig, out_dir: Path, *, sweep_root: Optional[Path] = None, multirun: bool = False,
            say: Callable[[str], None] = _say, show_table: bool = True, overrides=None, config_dirs=()) -> Executed:
    """Run the experiment into ``out_dir``, then (unless narrowed to one unit) analyse, report, track.

    Raises ExperimentError for a misconfigured experiment (nothing, or only recorded failures, on disk).
    ``overrides`` (and ``config_dirs``): what composed ``cfg``, for ab.conditions (default: Hydra's).
    """
    from harness.tracking import tracker as tracking
    from harness.config.declaration import Declaration
    from harness.config.metric_spec import DeclarationError
    from harness.config.declaration import read as read_declaration

    sweep_root = sweep_root or out_dir
    CURRENT.pop("analysing", None)
    narrowed = cfg.seed is not None or cfg.arm is not None
    from harness.config.preflight import PreflightError, preflight_cheap

    try:  # a bad value is refused before torch, the data, wandb or the declaration's files
        preflight_cheap(cfg)
    except PreflightError as e:
        raise ExperimentError(str(e)) from None
    if cfg.ab.factor == "code" or cfg.get("code") is not None:  # revisions read now (code_arms.py)
        from harness.experiment.code_arms import prepare as prepare_code_arms

        for line in prepare_code_arms(cfg, out_dir, multirun=multirun, sweep_root=sweep_root):
            say(line)
    try:  # (preflight_cheap made it once already: a problem with it was refused there)
        declaration = Declaration.from_config(cfg)  # what will be analysed, checked before any run
    except DeclarationError as e:
        raise ExperimentError(f"{e} Nothing was run.") from None
    from harness.training.threads import measure_load, resolve_threads, workers_problem

    if workers_problem(cfg.get("workers", "auto")):
        raise ExperimentError(workers_problem(cfg.get("workers")))
    # The resolved count is hashed with the config: before anything hashes it (units.pin_threads' rule)
    choice = resolve_threads(cfg, say=say, warn=log.warning if say is _say else say, in_sweep=multirun,
                             recorded=recorded_threads(out_dir), measure=measure_load)
    try:
        tracker = tracking.open_tracker(cfg, out_dir, sweep_root=sweep_root)
    except tracking.TrackingConfigError as e:
        raise ExperimentError(str(e)) from None
    from harness.experiment.plan import Plan, check_unless_done, preflight_or_refuse
    from harness.experiment.parallel.workers import Workers

    # side by side (cfg.workers > 1, resolved with the threads): workers start when the first unit
    # needs one, so a no-op rerun starts none; they end with this invocation, Ctrl-C included
    from harness.training.gpus import visible
    from harness.training.threads import uses_gpu

    pool = Workers(int(cfg.get("workers") or 1), grow_to=choice.gpu_cap, say=say,
                   gpus=visible() if uses_gpu(cfg) else ())  # side by side: spread over the GPUs CUDA sees
    try:
        # the plan (what is run) is read from cfg here, where each way of running first needs its arms;
        # below, only the plan and the declaration travel (an arm's config to the unit runner)
        race = bool(cfg.ab.race.get("enabled", False))
        if (cfg.ab.sequential.enabled or race) and not narrowed and not multirun:
            from harness.experiment.adaptive import in_process  # seeds in batches until settled (docs/sequential.md, racing.md)

            if race and cfg.ab.sequential.enabled:
                raise ExperimentError("ab.sequential.enabled=true and ab.race.enabled=true: a run is either a "
                                      "sequential A/B (seeds until each arm is settled against the baseline) or a "
                                      "race (configurations dropped until the best is left); set one of them to "
                                      "false. Nothing was run.")
            plan = Plan.from_config(cfg, out_dir, sweep_root=sweep_root, multirun=multirun)
            preflight_or_refuse(cfg, plan.arms)
            workers = pool if pool.side_by_side else None
            if race:  # the race records its settled claims in the ledger itself (race_report.analyze_race)
                from omegaconf import OmegaConf

                return in_process.run_race(plan, declaration, OmegaConf.to_container(cfg.ab.race), say=say,
                                           tracker=tracker, pool=workers, ledger=cfg.get("ledger"))
            executed = in_process.run_sequential(plan, declaration, say=say, tracker=tracker, show_table=show_table,
                                                 pool=workers)
            _record(cfg, executed.analysis, out_dir, say)  # the decision at the look that settled it
            return executed
        if declaration.conditions:  # every (condition, seed, arm); the average across them (conditions.py)
            from harness.experiment.conditions import condition_configs, given_overrides, refuse_narrowed, run_conditions

            refuse_narrowed(multirun=multirun, narrowed=narrowed)
            configs = condition_configs(cfg, declaration, given_overrides(overrides), config_dirs)
            return run_conditions(configs, out_dir, declaration, say=say, tracker=tracker,
                                  certify=bool(cfg.repro.certificate), show_table=show_table)
        if multirun and declaration.fdr:  # a job of a sweep: the level is the sweep's, taken by its launcher (ledger/record.py)
            from harness.ledger.record import sweep_level_problem

            problem = sweep_level_problem(sweep_root, declaration)
            if problem:
                raise ExperimentError(problem)
        plan = Plan.from_config(cfg, out_dir, sweep_root=sweep_root, multirun=multirun,
                                certificate_dir=_certificate_dir(out_dir, sweep_root))
        if pool.side_by_side:
            # the workers' imports overlap the preflight; none start when every run is done
            check_unless_done(cfg, plan, say, before_preflight=lambda units: pool.start(units, warm=plan.modules))
        else:
            check_unless_done(cfg, plan, say)
        # The config's refusals are all above: a refused run writes no declaration, reserves no ledger test
        if not multirun:  # a sweep's declaration is written once, by the launching process (callbacks.py)
            declaration = _ledger_level(cfg.get("ledger"), declaration, out_dir)
            declaration.write(out_dir, say=say)
            declaration = read_declaration(out_dir) or declaration  # as written: with when it was declared
        if pool.side_by_side:
            from harness.experiment.parallel.side_by_side import run_side_by_side

            outcome = run_side_by_side(plan, pool, log=say, tracker=tracker, stop_on_fatal=not multirun)
        else:
            outcome = run_plan(plan, log=say, tracker=tracker, stop_on_fatal=not multirun)
        pool.close()  # before the analysis: their memory back, nothing left to run
        if plan.factor == "code":  # did the code change the numerics? every step compared (code_arms.py)
            from harness.experiment.code_arms import steps_compared

            said = steps_compared(outcome.results)
            if said:
                say(said)
        if narrowed or multirun:
            # One unit of a sweep: the sweep's callback (or harness.analyze) analyses all of them.
            say(f"results in {out_dir}; analyse a whole tree with: python -m harness.analyze {shlex.quote(str(sweep_root))}"
                + (" --grid" if _grid_point(out_dir, sweep_root) else ""))
            return Executed(outcome, None)

        from harness.analysis import AnalysisError
        from harness.analysis.render.report import render_table

        CURRENT["analysing"] = True  # a Ctrl-C from here on interrupts no run (interrupted_message)
        reached("analysis")
        try:
            analysis = _analysis(out_dir, declaration, unchanged_inputs=not _ran_anything(outcome))
        except AnalysisError as e:
            return Executed(outcome, None, f"no analysis: {e} The result files are in {out_dir / 'runs'}.")
        _record(cfg, analysis, out_dir, say, declaration)
        if show_table:
            render_table(analysis, tables=plan.tables)
        if analysis.pop("_unchanged", False):
            say("analysis unchanged: analysis.json, report.md, analysis.png and the tracker's analysis kept")
        else:
            tracker.log_analysis(analysis, out_dir)
        say(f"results: {out_dir}  (analysis.json, report.md, analysis.png)")
        return Executed(outcome, analysis)
    finally:
        pool.close()
        for w in tracker.close():
            log.warning(w)


def _grid_point(out_dir: Path, sweep_root: Path) -> bool:
    """A job folder below a grid point (``optim.lr=0.05/seed=2``, experiment/callbacks.py) rather than
    directly in the sweep folder: the tree is then analysed with --grid."""
    try:
        return len(Path(out_dir).resolve().relative_to(Path(sweep_root).resolve()).parts) > 1
    except ValueError:
        return False


def _certificate_dir(out_dir: Path, sweep_root: Path) -> Path:
    """Where a job's certificate goes: a grid point is an A/B of its own, certified in its own folder
    (the parent of its job folders); a sweep of one A/B's seeds and arms, in the sweep folder."""
    return Path(out_dir).parent if _grid_point(out_dir, sweep_root) else Path(sweep_root)


def _ledger_level(settings, declaration, out_dir: Path):
    """The declaration with alpha_t from the ledger (stats.fdr), fixed before any data."""
    if not declaration.fdr:  # no level to take: the ledger's modules (numpy, the FDR rules) not imported
        return declaration
    from harness.ledger.store import LedgerError
    from harness.ledger.record import assign_for_config

    try:
        return assign_for_config(settings, declaration, out_dir)
    except LedgerError as e:
        raise ExperimentError(f"{e} Nothing was run.") from None


def _record(cfg, analysis, out_dir: Path, say, declaration=None) -> None:
    """The declared analysis's claims into the ledger; a failure is a warning (the analysis stands)."""
    from harness.config.declaration import Declaration
    from harness.ledger.record import record_for_config

    if analysis is not None:
        declaration = declaration or Declaration.from_dict(analysis["declaration"])
        record_for_config(cfg.get("ledger"), analysis, out_dir, declaration, warn=lambda w: log.warning(w) if say is _say else say(w))


def _ran_anything(outcome) -> bool:
    return len(outcome.skipped) < len(outcome.results) or outcome.certified_now


def _analysis(out_dir: Path, declaration, *, unchanged_inputs: bool) -> dict:
    """The declared analysis. When nothing ran and it equals the analysis.json on disk (with its report
    and figure beside it), nothing is rewritten: the figure alone costs seconds, and the tracker's
    analysis stays as it is. Marked ``_unchanged`` then (popped by the caller)."""
    from harness.analysis.analyze import analyze_dir, write_outputs
    from harness.results import read_json, write_json

    kept = [out_dir / n for n in ("analysis.json", "report.md", "analysis.png")]
    if not unchanged_inputs or not all(p.is_file() for p in kept):
        return _recorded(analyze_dir(out_dir, declaration=declaration), out_dir)
    digest = inputs_digest(out_dir)
    if _read_text(out_dir / INPUTS_NAME) == digest:
        analysis = _read_or_none(kept[0])  # made from these very files by this very code: not made again
        if isinstance(analysis, dict):
            return {**analysis, "_unchanged": True}
    analysis = analyze_dir(out_dir, declaration=declaration, write=False)
    if analysis.get("departures"):  # not the declared files: let analyze_dir place them
        return _recorded(analyze_dir(out_dir, declaration=declaration), out_dir)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # the JSON exactly as written (NaN -> null, tuples -> lists)
        write_json(Path(tmp) / "a.json", analysis)
        same = read_json(Path(tmp) / "a.json") == _read_or_none(kept[0])
    if not same:
        write_outputs(analysis, out_dir)
        return _recorded(analysis, out_dir)
    return {**_recorded(analysis, out_dir), "_unchanged": True}


# What the declared analysis in a folder was made from: beside analysis.json, so that a no-op rerun
# whose inputs are these very bytes reads the analysis instead of making it again (scipy.stats'
# import alone costs about a second).
INPUTS_NAME = ".analysis_inputs"
_NOT_INPUTS = {"analysis.json", "report.md", "analysis.png", INPUTS_NAME, ".lock"}
_NOT_INPUT_DIRS = {".hydra", "wandb", "alternatives"}  # logs, tracking, the alternative analyses' outputs
_HASHED_BYTES = 16 << 20  # larger files (saved weights) are known by size and time, not read


def inputs_digest(out_dir: Path) -> str:
    """A digest of every file an analysis of ``out_dir`` can read (result files, the declaration, the
    certificate, experiment.json, anything else beside them) and of the harness's own source."""
    import hashlib
    import os
    import stat

    from harness.experiment.identity import _harness_digest

    h = hashlib.sha256(_harness_digest().encode())
    root = str(out_dir)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (folder == root and d in _NOT_INPUT_DIRS))
        for name in sorted(files):
            if name in _NOT_INPUTS or name.endswith((".log", ".tmp")):
                continue
            path = os.path.join(folder, name)
            try:  # never open a FIFO (it blocks) nor read a huge file whole: the analysis does neither
                st = os.stat(path)
                if not stat.S_ISREG(st.st_mode):
                    content = f"not a regular file: {stat.S_IFMT(st.st_mode)}"
                elif st.st_size > _HASHED_BYTES:
                    content = f"size {st.st_size}, modified {st.st_mtime_ns}"
                else:
                    with open(path, "rb") as f:
                        content = hashlib.sha256(f.read()).hexdigest()
            except OSError as e:
                content = f"unreadable: {e.errno}"
            h.update(f"{os.path.relpath(path, root)}\0{content}\n".encode())
    return h.hexdigest()


def _recorded(analysis: dict, out_dir: Path) -> dict:
    """Note what the declared files were made from (best effort: without the note, the next no-op
    rerun makes the analysis again and compares)."""
    from harness.results import atomic_write

    digest = inputs_digest(out_dir).encode()
    try:
        atomic_write(out_dir / INPUTS_NAME, lambda f: f.write(digest))
    except OSError:
        pass
    return analysis


def _read_text(path: Path):
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _read_or_none(path: Path):
    from harness.results import read_json

    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def resume_command() -> str:
    import shlex

    return "python -m harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _completed_under(folder: Optional[Path]) -> str:
    if folder is None or not Path(folder).exists():
        return "No result was completed yet."
    from harness.results import load_tree

    try:
        done = [r for r in load_tree(folder).results if r.get("status") == "completed"]
    except Exception:  # noqa: BLE001 - a message, not an analysis
        return f"The results under {folder} are as they were written."
    return (f"The {len(done)} completed result(s) under {folder} are intact (a result file is written whole "
            "or not at all).")


def storage_message(e: OSError, folder: Optional[Path], again: Optional[str] = None) -> str:
    if type(e).__name__ == "OutputsNotWritten":  # its own sentence says what was (not) replaced
        return f"{e}. Free some space and run the same command again: {again or resume_command()}"
    what = {28: "the disk is full", 122: "the disk quota is exceeded", 30: "the file system is read-only",
            13: "permission denied"}.get(e.errno, e.strerror or str(e))
    return (f"could not write {e.filename or 'a file'}: {what}. {_completed_under(folder)} "
            f"Free some space (or choose another output folder) and run the same command again to resume: "
            f"{again or resume_command()}")


def interrupted_message(finished: bool = False) -> str:
    """What is safe after a Ctrl-C. ``finished``: the invocation ran to its end regardless (the
    interrupt came as it ended)."""
    folder = CURRENT.get("folder")
    what = ("The invocation had run to its end." if finished else "The analysis was not finished."
            if CURRENT.get("analysing") else "The run in progress was not saved.")
    return (f"interrupted. {_completed_under(folder)} {what} Run the same command "
            f"again to resume (completed runs are skipped): {resume_command()}")

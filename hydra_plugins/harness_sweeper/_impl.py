"""The sequential sweeper's loop: launch a batch of (seed, arm) jobs, read the result files, decide.

BasicSweeper's loop (launch a batch, ``initial_job_idx`` growing so job folders never collide) with
the decision between batches taken by harness.experiment.sequential_plan over the result files under the
sweep folder -- the same function, the same looks and the same decisions as the in-process loop
(harness/experiment/sequential.py). A job's status is read, never its return value (which re-raises); a run
that fails inside a job is recorded in its result file. Past ``ab.sequential.max_failures`` failed
runs or jobs the sweep stops with a message and exit status 1.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, flag_override

log = logging.getLogger("harness")

_CHOSEN_BY_SWEEPER = ("seed", "arm", "ab.seeds")


def _fail(message: str, code: int) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(code)


_LOST = ("TerminatedWorkerError", "BrokenProcessPool", "UncompletedJobError")


def _lost_worker(e: BaseException) -> bool:
    """A job whose process died, not a bug of ours: a pool that lost a worker (joblib/loky's
    TerminatedWorkerError, concurrent.futures' BrokenProcessPool) or a SLURM job that ended without
    a result (submitit's UncompletedJobError: scancel, node failure, time limit, OOM)."""
    return any(c.__name__ in _LOST for c in type(e).__mro__)


def _exit_codes(e: BaseException) -> str:
    """", killed by signal 9" from loky's "The exit codes of the workers are {SIGKILL(-9)}"."""
    found = re.findall(r"SIG[A-Z]+\((-?\d+)\)", str(e))
    state = re.search(r"state: ([A-Z_]+(?: by \d+)?)", str(e))  # submitit: "(state: CANCELLED by 0)"
    if state and not found:
        return f", SLURM state {state.group(1)}" + (" (no accounting: sacct cannot say more)"
                                                    if state.group(1) == "UNKNOWN" else "")
    return f", killed by signal {-int(found[0])} ({'SIGKILL, e.g. out of memory' if found[0] == '-9' else 'a signal'})" \
        if found else ""


class SequentialSweeperImpl:
    def __init__(self, max_batch_size: Optional[int]) -> None:
        if max_batch_size is not None and (not isinstance(max_batch_size, int) or max_batch_size < 1):
            _fail(f"hydra.sweeper.max_batch_size={max_batch_size!r} must be an integer >= 1 or null "
                  "(null: launch a whole batch of seeds at once).", 2)
        self.max_batch_size = max_batch_size
        self.config: Optional[DictConfig] = None
        self.launcher = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # -- the loop -------------------------------------------------------------------------------

    def sweep(self, arguments: List[str]) -> Any:
        import harness  # noqa: F401 - CUBLAS_WORKSPACE_CONFIG before torch
        from harness.experiment import sequential_plan as sp
        from harness.experiment.callbacks import track_sweep_analysis
        from harness.experiment.units import ExperimentError
        from harness.results import load_tree
        from harness.experiment.sequential import IdentityWatch, identity_stop, prepare, refresh

        self._check_arguments(arguments)
        cfg = self._task_config()
        root = Path(str(self.config.hydra.sweep.dir))
        from harness.config.declaration import Declaration, DeclarationError

        try:
            declaration = Declaration.from_config(cfg)  # what will be analysed
            design, baseline, arms = prepare(cfg, declaration, root)  # every check, before any job
        except DeclarationError as e:
            _fail(str(e), 2)
        except ExperimentError as e:
            _fail(str(e), 2)
        self.declaration = declaration
        root.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, root / "multirun.yaml")
        refresh(cfg, root, say=log.info)
        watch = IdentityWatch(cfg)  # from here on, a changed config or code stops the sweep
        budget = int(cfg.ab.sequential.max_failures)
        log.info(f"sequential sweeper: looks at {', '.join(map(str, design.looks))} seeds; jobs in {root}")

        idx = self._next_job_idx(root)
        returns, job_failures = [], []
        last = p = None
        while True:
            loaded = load_tree(root).results
            changed = watch.problem(loaded, root)
            if changed:  # no look at results of two identities, no analysis of them
                p = identity_stop(watch, changed, p, design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline,
                                  arms=arms, metric=self.declaration.metric, budget=budget)
                self._write(cfg, root, design, p, baseline, loaded, "stopped")
                track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
                _fail(f"sequential sweep stopped: {changed}", 1)
            p = sp.plan(design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline, arms=arms,
                        metric=self.declaration.metric, max_failures=budget)
            if last is not None and len(loaded) <= last[0] and len(job_failures) == last[1] and not p.done:
                p.stopped = (f"the last batch's jobs completed but left no new result file under {root}; "
                             "check the jobs' logs (a job folder per job).")  # else it would repeat forever
            last = (len(loaded), len(job_failures))
            if not p.stopped and job_failures and len(job_failures) + len(p.failed) > budget:
                p.stopped = (f"{len(job_failures)} job(s) failed before writing a result "
                             f"({'; '.join(job_failures[:3])}) and {len(p.failed)} run(s) failed, more than "
                             f"ab.sequential.max_failures={budget}. Fix the cause and run the same command again.")
            self._write(cfg, root, design, p, baseline, loaded, "running")
            for arm, h in p.history.items():
                if h:
                    x = h[-1]
                    log.info(f"sequential look {x.look}, {arm}: n {x.n}, estimate {x.estimate:+.4g}, interval "
                             f"[{x.interval[0]:+.4g}, {x.interval[1]:+.4g}], decision {x.decision}")
            if p.stopped or p.done:
                break
            have = {(r.get("seed"), str(r.get("arm"))) for r in loaded}
            jobs = [list(arguments) + [f"seed={s}", f"arm={a}"]
                    for s in p.batch_seeds for a in p.batch_arms if (s, a) not in have]
            log.info(f"sequential sweeper: batch of {len(jobs)} job(s), seeds "
                     f"{', '.join(map(str, p.batch_seeds))} for arms {', '.join(p.batch_arms)}")
            step = self.max_batch_size or len(jobs)
            for i in range(0, len(jobs), step):
                chunk = jobs[i: i + step]
                try:
                    results = self.launcher.launch(chunk, initial_job_idx=idx)
                except Exception as e:  # noqa: BLE001 - a pool that lost a worker: named below, no traceback
                    if not _lost_worker(e):
                        raise
                    lost = self._lost_units(root, chunk, e)
                    p.stopped = (f"a job died: {lost}. The runs that completed are kept; run the same command "
                                 "again to resume (only the (seed, arm) without a result run again).")
                    self._write(cfg, root, design, p, baseline, load_tree(root).results, "stopped")
                    track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
                    _fail(f"sequential sweep stopped: {p.stopped}", 1)
                idx += len(chunk)
                returns.append(results)
                for job, r in zip(chunk, results):
                    if r.status != JobStatus.COMPLETED:
                        job_failures.append(f"{' '.join(job[-2:])}: {self._why(r)}")

        block = self._write(cfg, root, design, p, baseline, load_tree(root).results,
                            "stopped" if p.stopped else "settled")
        failed = self._analyse(cfg, root, block)  # its verdict screen leads with the decisions
        if failed:  # no screen: say the decisions here, once
            for arm, a in block["arms"].items():
                log.info(f"sequential decision, {arm} vs {baseline}: {a['sentence']}")
        if p.stopped:
            _fail(f"sequential sweep stopped unsettled: {p.stopped}" + (f" Also, the {failed}" if failed else ""), 1)
        if failed:
            _fail(failed, 1)
        return returns

    # -- helpers --------------------------------------------------------------------------------

    def _check_arguments(self, arguments: List[str]) -> None:
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        for o in parser.parse_overrides(arguments):
            key = o.get_key_element().lstrip("+~")
            if o.is_sweep_override():
                _fail(f"{o.input_line}: the sequential sweeper runs one experiment and chooses its seeds and "
                      f"arms; it does not sweep other values. Run one sweep per value (or use the basic "
                      f"sweeper for a grid).", 2)
            if key in _CHOSEN_BY_SWEEPER:
                _fail(f"{o.input_line}: the sequential sweeper chooses seeds and arms itself (ab.seeds sets the "
                      f"order of seeds, ab.arms the arms); drop this override.", 2)

    def _task_config(self) -> DictConfig:
        """The config a job gets, without the hydra node, as the task function sees it (app.run lets an
        override of ab.arms as a whole replace the arms), in sequential mode: this sweeper is the
        sequential mode, so its declaration carries the design without ab.sequential.enabled=true."""
        import copy

        from harness.config import replace_whole_arms

        cfg = copy.deepcopy(self.config)  # a shallow copy would share (and change) self.config's nodes
        with flag_override(cfg, ["struct", "readonly"], [False, False]):
            del cfg["hydra"]
            cfg.ab.sequential.enabled = True
        replace_whole_arms(cfg, list(self.config.hydra.overrides.task))
        return cfg

    @staticmethod
    def _next_job_idx(root: Path) -> int:
        """Numbered job folders (hydra.sweep.subdir=${hydra.job.num}): continue after the highest one."""
        nums = [int(p.name) for p in root.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name)]
        return max(nums) + 1 if nums else 0

    @staticmethod
    def _lost_units(root: Path, chunk: list, error: BaseException) -> str:
        """Which (seed, arm) of a chunk a dead worker took with it: those without a result file. A
        unit whose run lock names a process that is gone was running in it; the others had not
        started their run (a pool that loses a worker cancels what it had queued; a cancelled SLURM
        array ends its pending tasks too)."""
        from harness.experiment.resume import holder_of
        from harness.results import RESULT_NAME, find_result_files, read_json

        done, running = set(), {}
        for path in find_result_files(root):
            try:
                r = read_json(path)
                done.add((r.get("seed"), str(r.get("arm"))))
            except (OSError, ValueError, AttributeError):
                pass
        for lock in root.glob("**/runs/seed=*/arm=*/.lock"):
            seed, arm = lock.parent.parent.name.split("=", 1)[1], lock.parent.name.split("=", 1)[1]
            if not (lock.parent / RESULT_NAME).exists():
                running[(seed, arm)] = holder_of(lock)
        how = _exit_codes(error)
        died, queued = [], []
        for job in chunk:
            seed, arm = (dict(a.split("=", 1) for a in job if a.startswith(("seed=", "arm="))).get(k) for k in ("seed", "arm"))
            if (int(seed), arm) in done:
                continue
            if (seed, arm) in running:
                died.append(f"(seed={seed}, arm={arm}): the job died{how} (its process, {running[(seed, arm)]}, is gone)")
            else:
                queued.append(f"(seed={seed}, arm={arm})")
        slurm = any(c.__name__ == "UncompletedJobError" for c in type(error).__mro__)
        parts = died or [f"{'a SLURM job' if slurm else 'a worker of the pool'}{how}"]
        if queued:
            parts.append(f"no result either, their runs not started (queued or starting when it broke): "
                         f"{', '.join(queued)}")
        return "; ".join(parts)

    @staticmethod
    def _why(r) -> str:
        try:
            r.return_value  # re-raises the job's exception (status is FAILED)
        except BaseException as e:  # noqa: BLE001 - named in the message
            return f"{type(e).__name__}: {e}"
        return f"status {r.status}"

    def _write(self, cfg, root, design, p, baseline, loaded, status) -> dict:
        from harness.experiment import sequential_plan as sp
        from harness.results import write_json

        block = sp.record(design, p, metric=self.declaration.metric, baseline=baseline, status=status, runs=len(loaded),
                          unit=self.declaration.unit)
        write_json(root / sp.SEQUENTIAL_NAME, block)
        return block

    def _analyse(self, cfg, root: Path, block: dict) -> Optional[str]:
        """Analyse the sweep folder with its looks; the failure's message when the analysis fails."""
        from harness.experiment import sequential_plan as sp
        from harness.analysis.analyze import AnalysisError, analyze_dir
        from harness.analysis.report import render_table
        from harness.analysis.sequential_figure import write_figure
        from harness.experiment.callbacks import sweep_analysis_failed, track_sweep_analysis

        write_figure(block, root / sp.FIGURE_NAME)
        try:
            analysis = analyze_dir(root, declaration=self.declaration, extra={"sequential": block})
        except AnalysisError as e:
            track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
            return sweep_analysis_failed(root, e)
        render_table(analysis, tables=bool(cfg.tables))
        if not track_sweep_analysis(cfg, root, analysis):
            return None
        log.info(f"results: {root}  (analysis.json, report.md, analysis.png, sequential.json, sequential.png)")
        return None

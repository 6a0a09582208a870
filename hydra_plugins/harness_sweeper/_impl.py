"""The sequential sweeper's loop: launch a batch of (seed, arm) jobs, read the result files, decide.

BasicSweeper's loop (launch a batch, ``initial_job_idx`` growing so job folders never collide) with
the decision between batches taken by harness.experiment.adaptive.sequential_plan over the result files under the
sweep folder -- the same function, the same looks and the same decisions as the in-process loop
(harness/experiment/adaptive/sequential.py). A job's status is read, never its return value (which re-raises); a run
that fails inside a job is recorded in its result file. A job that dies (SIGKILL, scancel) is a failed
unit too (_lost_units.py): it counts against ``ab.sequential.max_failures``, the sweep goes on, the
process exits 1 naming it, and the next run of the command runs it again. Past
``ab.sequential.max_failures`` failed runs or jobs the sweep stops with a message and exit status 1.
sequential.json is never left "running": any exit writes it as "stopped" with the reason.
"""

from __future__ import annotations

import logging
import re
import sys
from contextlib import contextmanager
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
        from harness.experiment.adaptive import sequential_plan as sp
        from harness.experiment.callbacks import track_sweep_analysis
        from harness.experiment.arms import ExperimentError
        from harness.results import load_tree
        from harness.experiment.adaptive.sequential import IdentityWatch, identity_stop, prepare, refresh

        from harness.experiment.resume import lock_timeout_problem

        self._check_arguments(arguments)
        cfg = self._task_config()
        if lock_timeout_problem(cfg.get("lock_timeout")):  # before any job (each job would refuse it)
            _fail(lock_timeout_problem(cfg.get("lock_timeout")) + " No job was launched.", 2)
        root = Path(str(self.config.hydra.sweep.dir))
        from harness.config.declaration import Declaration
        from harness.config.metric_spec import DeclarationError

        from harness.experiment.plan import preflight_or_refuse
        from harness.experiment.arms import arm_configs

        try:  # this sweeper is an entry point: the task config is read here, then arm configs travel
            declaration = Declaration.from_config(cfg)  # what will be analysed
            arm_cfgs = arm_configs(cfg)
            preflight_or_refuse(cfg, arm_cfgs)  # every check, before any job
            design, baseline, arms = prepare(declaration, root)
        except DeclarationError as e:
            _fail(str(e), 2)
        except ExperimentError as e:
            _fail(str(e), 2)
        self.declaration = declaration
        root.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, root / "multirun.yaml")
        refresh(arm_cfgs, root, say=log.info)
        self._rerun_lost(root)
        watch = IdentityWatch(arm_cfgs)  # from here on, a changed config or code stops the sweep
        budget = int(cfg.ab.sequential.max_failures)
        log.info(f"sequential sweeper: looks at {', '.join(map(str, design.looks))} seeds; jobs in {root}")

        idx = self._next_job_idx(root)
        returns, job_failures, lost = [], [], []
        last = p = None
        with self._never_left_running(cfg, root, design, baseline, lambda: p):
            while True:
                loaded = load_tree(root).results
                changed = watch.problem(loaded, root)
                if changed:  # no look at results of two identities, no analysis of them
                    p = identity_stop(watch, changed, p, design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline,
                                      arms=arms, metric=self.declaration.metric, budget=budget,
                                      diverged=self.declaration.diverged)
                    self._write(cfg, root, design, p, baseline, loaded, "stopped")
                    track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
                    _fail(f"sequential sweep stopped: {changed}", 1)
                p = sp.plan(design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline, arms=arms,
                            metric=self.declaration.metric, max_failures=budget, diverged=self.declaration.diverged)
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
                idx = self._launch_batch(jobs, idx, root, returns, job_failures, lost)

            block = self._write(cfg, root, design, p, baseline, load_tree(root).results,
                                "stopped" if p.stopped else "settled")
        failed = self._analyse(cfg, root, block)  # its verdict screen leads with the decisions
        if failed:  # no screen: say the decisions here, once
            for arm, a in block["arms"].items():
                log.info(f"sequential decision, {arm} vs {baseline}: {a['sentence']}")
        died = (f"some units failed because their job died: {'; '.join(lost)}. They count as failed runs here; "
                "run the same command again to resume (they run again, and so does every (seed, arm) without a "
                "result).") if lost else ""
        if p.stopped:
            _fail(f"sequential sweep stopped unsettled: {p.stopped}" + (f" Also, the {failed}" if failed else "")
                  + (f" Also, {died}" if died else ""), 1)
        if failed or died:
            _fail(" ".join(x for x in (died, failed) if x), 1)
        return returns

    # -- helpers --------------------------------------------------------------------------------

    def _launch_batch(self, jobs: list, idx: int, root: Path, returns: list, job_failures: list, lost: list) -> int:
        """Launch a batch's jobs (hydra.sweeper.max_batch_size at a time) through launch_surviving:
        a job that died is a failed unit named in ``lost`` (its LostJob result counts in the next
        plan), a job that failed before writing a result is named in ``job_failures``. The next job index."""
        from ._lost_units import launch_surviving

        step = self.max_batch_size or len(jobs)
        for i in range(0, len(jobs), step):
            launched = launch_surviving(self.launcher, jobs[i: i + step], idx, root, say=log.warning)
            idx = launched.next_idx
            if launched.lost:
                lost.append(launched.message())
                if launched.unrecorded:  # died before its run: no result file counts it
                    job_failures.append(launched.lost[-1])
            for ran, results in launched.launched:
                returns.append(results)
                job_failures += [f"{' '.join(j[-2:])}: {self._why(r)}" for j, r in zip(ran, results)
                                 if r.status != JobStatus.COMPLETED]
        return idx

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
    def _rerun_lost(root: Path) -> None:
        """Units whose job died in an earlier sweep (_lost_units.py) run again: set aside, like resume
        reruns them in a plain sweep. A run that failed by itself stays a failure."""
        from harness.experiment.resume import supersede
        from harness.results import MAX_RESULT_BYTES, find_result_files, read_json

        from ._lost_units import LOST_TYPE

        for path in find_result_files(root) if root.exists() else []:
            try:
                r = read_json(path, MAX_RESULT_BYTES)  # a huge file is not read here (the analysis names it)
            except (OSError, ValueError):
                continue
            if r.get("status") == "failed" and (r.get("error") or {}).get("type") == LOST_TYPE:
                dest = supersede(path)
                log.info(f"seed={r.get('seed')} arm={r.get('arm')}: its job died in an earlier sweep; it runs again "
                         f"when its seed is reached (that record moved to {dest})")

    @contextmanager
    def _never_left_running(self, cfg, root, design, baseline, plan):
        """Whatever ends the loop (Ctrl-C, an error, a message), sequential.json says "stopped", why."""
        from harness.results import load_tree

        self._status = None
        try:
            yield
        except BaseException as e:
            p = plan()
            if self._status == "running" and p is not None:
                if not p.stopped:
                    p.stopped = ("interrupted (Ctrl-C or a signal)" if isinstance(e, KeyboardInterrupt) else
                                 f"ended by {type(e).__name__}: {e}")
                try:
                    self._write(cfg, root, design, p, baseline, load_tree(root).results, "stopped", quiet=True)
                except OSError:
                    pass  # the message being raised already says why nothing could be written
            raise

    @staticmethod
    def _why(r) -> str:
        try:
            r.return_value  # re-raises the job's exception (status is FAILED)
        except BaseException as e:  # noqa: BLE001 - named in the message
            return f"{type(e).__name__}: {e}"
        return f"status {r.status}"

    def _write(self, cfg, root, design, p, baseline, loaded, status, quiet=False) -> dict:
        """sequential.json; a full disk or a read-only folder ends the sweep with the storage message."""
        from harness.experiment.adaptive import sequential_plan as sp
        from harness.experiment.execute import storage_message
        from harness.results import write_json

        block = sp.record(design, p, metric=self.declaration.metric, baseline=baseline, status=status, runs=len(loaded),
                          unit=self.declaration.unit)
        try:
            write_json(root / sp.SEQUENTIAL_NAME, block)
        except OSError as e:
            if quiet:
                raise
            message = storage_message(e, root)
            if status == "running":  # one try to leave it "stopped" rather than at the previous look
                p.stopped = p.stopped or message
                try:
                    self._write(cfg, root, design, p, baseline, loaded, "stopped", quiet=True)
                except OSError:
                    pass
            self._status = None  # no further try on the way out
            _fail(message, 1)
        self._status = status
        return block

    def _analyse(self, cfg, root: Path, block: dict) -> Optional[str]:
        """Analyse the sweep folder with its looks; the failure's message when the analysis fails."""
        from harness.experiment.adaptive import sequential_plan as sp
        from harness.analysis.analyze import analyze_dir
        from harness.analysis import AnalysisError
        from harness.analysis.render.report import render_table
        from harness.analysis.render.sequential_figure import write_figure
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

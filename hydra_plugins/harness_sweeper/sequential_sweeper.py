"""The sequential sweeper: the adaptive loop's sequential policy on Hydra's launcher.

``python -m harness -m hydra/sweeper=harness_sequential +experiment=loss_ab stats.margin=0.3``
launches (seed, arm) jobs (overrides ``seed=S arm=A``) in batches through the configured launcher
(basic, ``hydra/launcher=local_pool``, submitit) and decides between batches from the result files,
with the design declared under ``ab.sequential`` (docs/sequential.md): the same loop, looks and
decisions as the in-process mode (harness/experiment/adaptive/). Every Hydra app imports this
module, so it is light: the harness is imported only when the sweeper runs.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from .hydra_launcher import AdaptiveSweeperImpl, fail

_CHOSEN_BY_SWEEPER = ("seed", "arm", "ab.seeds")


@dataclass
class HarnessSequentialSweeperConf:
    _target_: str = "hydra_plugins.harness_sweeper.sequential_sweeper.HarnessSequentialSweeper"
    # jobs handed to the launcher at once; null: a whole batch of seeds (every arm still running)
    max_batch_size: Optional[int] = None


ConfigStore.instance().store(group="hydra/sweeper", name="harness_sequential", node=HarnessSequentialSweeperConf,
                             provider="harness")


class HarnessSequentialSweeper(Sweeper):
    def __init__(self, max_batch_size: Optional[int] = None) -> None:
        self._impl = SequentialSweeperImpl(max_batch_size)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self._impl.sweep(arguments)


class SequentialSweeperImpl(AdaptiveSweeperImpl):
    def sweep(self, arguments: List[str]) -> Any:
        import harness  # noqa: F401 - CUBLAS_WORKSPACE_CONFIG before torch
        from harness.config.declaration import Declaration
        from harness.config.metric_spec import DeclarationError
        from harness.experiment.adaptive.sequential_policy import SequentialPolicy, prepare
        from harness.experiment.callbacks import sweep_analysis_failed, track_sweep_analysis
        from harness.experiment.plan import preflight_or_refuse
        from harness.experiment.resume import lock_timeout_problem
        from harness.experiment.arms import ExperimentError, arm_configs

        self._check_arguments(arguments)
        cfg = self._task_config()
        if lock_timeout_problem(cfg.get("lock_timeout")):  # before any job (each job would refuse it)
            fail(lock_timeout_problem(cfg.get("lock_timeout")) + " No job was launched.", 2)
        root = Path(str(self.config.hydra.sweep.dir))
        try:  # this sweeper is an entry point: the task config is read here, then arm configs travel
            declaration = Declaration.from_config(cfg)  # what will be analysed
            arm_cfgs = arm_configs(cfg)
            preflight_or_refuse(cfg, arm_cfgs)  # every check, before any job
            design, baseline, arms = prepare(declaration, root)
        except (DeclarationError, ExperimentError) as e:
            fail(str(e), 2)
        root.mkdir(parents=True, exist_ok=True)
        policy = SequentialPolicy(design, declaration, root, baseline=baseline, arms=arms, seeds=list(cfg.ab.seeds),
                                  budget=int(cfg.ab.sequential.max_failures))
        log_info(f"sequential sweeper: looks at {', '.join(map(str, design.looks))} seeds; jobs in {root}")
        ended, launcher = self.run(policy, arm_cfgs, root, "sequential sweeper", list(arguments))
        if ended.identity:  # no look at results of two identities, no analysis of them
            track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
            fail(f"sequential sweep stopped: {ended.identity}", 1)

        analysis, error = policy.analyse(ended.block, show_table=True, tables=bool(cfg.tables))
        failed = None
        if error is not None:
            track_sweep_analysis(cfg, root, None)  # close the tracker: the jobs' runs get their sync hint
            failed = sweep_analysis_failed(root, error)
            policy.decisions(ended.block, log_info)  # no screen: say the decisions here, once
        elif track_sweep_analysis(cfg, root, analysis):
            log_info(f"results: {root}  (analysis.json, report.md, analysis.png, sequential.json, sequential.png)")
        died = launcher.died()
        if ended.plan.stopped:
            fail(f"sequential sweep stopped unsettled: {ended.plan.stopped}" + (f" Also, the {failed}" if failed else "")
                 + (f" Also, {died}" if died else ""), 1)
        if failed or died:
            fail(" ".join(x for x in (died, failed) if x), 1)
        return launcher.returns

    def _check_arguments(self, arguments: List[str]) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        for o in parser.parse_overrides(arguments):
            key = o.get_key_element().lstrip("+~")
            if o.is_sweep_override():
                fail(f"{o.input_line}: the sequential sweeper runs one experiment and chooses its seeds and "
                     f"arms; it does not sweep other values. Run one sweep per value (or use the basic "
                     f"sweeper for a grid).", 2)
            if key in _CHOSEN_BY_SWEEPER:
                fail(f"{o.input_line}: the sequential sweeper chooses seeds and arms itself (ab.seeds sets the "
                     f"order of seeds, ab.arms the arms); drop this override.", 2)

    def _task_config(self) -> DictConfig:
        """The config a job gets, without the hydra node, as the task function sees it (app.run lets an
        override of ab.arms as a whole replace the arms), in sequential mode: this sweeper is the
        sequential mode, so its declaration carries the design without ab.sequential.enabled=true."""
        import copy

        from omegaconf import flag_override

        from harness.config import replace_whole_arms

        cfg = copy.deepcopy(self.config)  # a shallow copy would share (and change) self.config's nodes
        with flag_override(cfg, ["struct", "readonly"], [False, False]):
            del cfg["hydra"]
            cfg.ab.sequential.enabled = True
        replace_whole_arms(cfg, list(self.config.hydra.overrides.task))
        return cfg


def log_info(message: str) -> None:
    import logging

    logging.getLogger("harness").info(message)

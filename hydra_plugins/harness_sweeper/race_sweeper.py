"""The race sweeper: the adaptive loop's race policy on Hydra's launcher.

``python -m harness -m hydra/sweeper=harness_race +experiment=loss_ab optim.lr=0.01,0.03,0.1 stats.margin=0.5``
races the configurations (the values of one swept key, or the arms) on the same seeds, in batches
of ``seed=S arm=NAME`` jobs through the configured launcher, dropping after each look those shown
worse than the best by more than stats.margin (Kim & Nelson 2001; docs/racing.md). The design is
``ab.race``; the loop, its rules and the race's bookkeeping are harness/experiment/adaptive/'s, as
in the in-process race (``ab.race.enabled=true`` without ``-m``).

The configurations are the experiment's arms, or the values of ONE swept key
(``optim.lr=0.01,0.03,0.1``), which become arms named ``lr_0.01`` ... placed at that key
(``ab.factor=optim.lr``): every job is then an ordinary harness run ``seed=S arm=NAME`` with the
same bits as in a plain sweep. A job's folder is ``<race folder>/seed=S,arm=NAME``: the race folder
(hydra.sweep.dir) is named by the command's overrides already, so the job's overrides (every
configuration's value among them) are left out of it, and a name is at most 48 characters: long
values or values with slashes make valid folders. At the end, race_report.analyze_race writes
analysis.json, report.md and race.png (what ``python -m harness.analyze`` reproduces) and wandb
gets the table of drops. Every Hydra app imports this module, so it is light: the harness is
imported only when the sweeper runs.
"""

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from .hydra_launcher import AdaptiveSweeperImpl, fail

log = logging.getLogger("harness")

_CHOSEN_BY_SWEEPER = ("seed", "arm", "ab.seeds")


@dataclass
class HarnessRaceSweeperConf:
    _target_: str = "hydra_plugins.harness_sweeper.race_sweeper.HarnessRaceSweeper"
    # jobs handed to the launcher at once; null: a whole batch (every configuration still running)
    max_batch_size: Optional[int] = None


ConfigStore.instance().store(group="hydra/sweeper", name="harness_race", node=HarnessRaceSweeperConf,
                             provider="harness")


class HarnessRaceSweeper(Sweeper):
    def __init__(self, max_batch_size: Optional[int] = None) -> None:
        self._impl = RaceSweeperImpl(max_batch_size)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self._impl.sweep(arguments)


_NAME_MAX = 48  # an arm name names folders (job, runs/seed=S/arm=NAME) and wandb runs


def arm_name(key: str, text: str) -> str:
    """``optim.lr`` and ``0.01`` -> ``lr_0.01`` (an arm name: no '/', '=', ',' or spaces). A value
    changed by that, or too long for a name, ends in 8 hex digits of its text so names stay distinct."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", text.strip())
    name = f"{key.split('.')[-1]}_{clean}"
    if clean == text.strip() and len(name) <= _NAME_MAX:
        return name
    return f"{name[:_NAME_MAX - 9]}_{hashlib.sha1(text.strip().encode()).hexdigest()[:8]}"


class RaceSweeperImpl(AdaptiveSweeperImpl):
    def sweep(self, arguments: List[str]) -> Any:
        import harness  # noqa: F401 - CUBLAS_WORKSPACE_CONFIG before torch
        from omegaconf import OmegaConf

        from harness.config.declaration import Declaration
        from harness.config.metric_spec import DeclarationError
        from harness.config.preflight import PreflightError, preflight
        from harness.experiment.adaptive.race_policy import RaceConfigError, RacePolicy, design_for, prepare
        from harness.experiment.arms import arm_configs

        base, extra = self._configurations(arguments)
        cfg = self._task_config_with(extra)
        root = Path(str(self.config.hydra.sweep.dir))
        try:
            declaration = Declaration.from_config(cfg)
            race = OmegaConf.to_container(cfg.ab.race)
            design_for(declaration, race)  # the race's own problems before the preflight's
            arm_cfgs = arm_configs(cfg)
            preflight(cfg, arm_cfgs)
            design = prepare(declaration, race, root)
        except (DeclarationError, ValueError, PreflightError, RaceConfigError) as e:
            fail(str(e), 2)
        policy = RacePolicy(design, root, seeds=list(cfg.ab.seeds))
        log.info(policy.describe())
        folder = self._job_folder_overrides(base + extra, root)
        ended, launcher = self.run(policy, arm_cfgs, root, "race", base + extra + folder)
        if ended.identity:  # no look at results of two identities: the looks as they stood, no analysis
            fail(f"race stopped: {ended.identity}", 1)
        analysis = policy.analyse(ledger=cfg.get("ledger"))
        self._track(cfg, root, analysis)
        log.info(policy.verdict_words(ended.block, root))
        died = launcher.died()
        if ended.plan.stopped:
            fail(f"race stopped unsettled: {ended.plan.stopped}" + (f" Also, {died}" if died else ""), 1)
        if died:
            fail(died, 1)
        return launcher.returns

    def _job_folder_overrides(self, overrides: List[str], root: Path) -> List[str]:
        """``<race folder>/seed=S,arm=NAME``: every key of the job's overrides is left out of its folder
        name (the arms' override holds every configuration's value), and the race folder is given, not
        interpolated again from each job's overrides."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        keys = list(self.config.hydra.job.config.override_dirname.exclude_keys)
        keys += [o.key_or_group for o in parser.parse_overrides(overrides) if o.key_or_group not in keys]
        return ["hydra.job.config.override_dirname.exclude_keys=[" + ",".join(f"'{k}'" for k in keys) + "]",
                f"hydra.sweep.dir='{root}'"]

    @staticmethod
    def _track(cfg, root: Path, analysis: dict) -> None:
        """The race's table of drops in wandb; closing the tracker prints the sweep's sync hint."""
        from harness.tracking.options import TrackingConfigError
        from harness.tracking.tracker import open_tracker

        try:
            tracker = open_tracker(cfg, root, sweep_root=root)
        except TrackingConfigError as e:
            log.error(f"harness: error: {e}")
            return
        tracker.log_race(analysis, root)
        for w in tracker.close():
            log.warning(w)

    # -- the configurations -------------------------------------------------------------------

    def _configurations(self, arguments: List[str]):
        """(the plain overrides, the overrides that make one swept key the arms)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        plain, swept = [], []
        for o in parser.parse_overrides(arguments):
            key = o.get_key_element().lstrip("+~")
            if key in _CHOSEN_BY_SWEEPER:
                fail(f"{o.input_line}: the race sweeper chooses the seeds and configurations itself (ab.seeds sets "
                      f"the order of seeds; ab.race.* the looks); drop this override.", 2)
            (swept if o.is_sweep_override() else plain).append(o)
        if not swept:
            return [o.input_line for o in plain], []
        if len(swept) > 1:
            fail(f"{', '.join(o.input_line for o in swept)}: the race sweeper races the values of ONE key "
                  f"(optim.lr=0.01,0.03,0.1); for configurations that differ in several keys declare them as "
                  f"arms (ab.factor=<a node>, ab.arms.NAME={{...}}) or race one key at a time.", 2)
        o = swept[0]
        key = o.get_key_element().lstrip("+~")
        clash = [x.input_line for x in plain if x.get_key_element().lstrip("+~").split(".")[:2] in (["ab", "arms"],
                                                                                                 ["ab", "factor"])]
        if clash or o.is_sweep_override() and not o.is_discrete_sweep():
            fail(f"{o.input_line}: the swept values of {key} become the race's configurations "
                  + (f"and replace the arms, so {', '.join(clash)} cannot be given with it; drop it."
                     if clash else "and must be a list of values (a,b,c), not a range or interval."), 2)
        texts = list(o.sweep_string_iterator())
        names = [arm_name(key, t) for t in texts]
        if len(set(names)) != len(names):
            fail(f"{o.input_line}: two values give the same configuration name ({', '.join(names)}); give each "
                  f"value once.", 2)
        arms = "{" + ", ".join(f"{n}: {t}" for n, t in zip(names, texts)) + "}"
        return [x.input_line for x in plain], [f"ab.factor={key}", f"++ab.arms={arms}"]

    def _task_config_with(self, extra: List[str]) -> DictConfig:
        """The config a job gets (without seed and arm), the swept key turned into the arms."""
        import copy

        from omegaconf import flag_override

        from harness.config import replace_whole_arms

        cfg = copy.deepcopy(self.config)
        with flag_override(cfg, ["struct", "readonly"], [False, False]):
            del cfg["hydra"]
            if extra:
                cfg.ab.factor = extra[0].split("=", 1)[1]
        replace_whole_arms(cfg, list(self.config.hydra.overrides.task) + extra[1:])
        return cfg

"""Config and entry class of the race sweeper; every Hydra app imports this module, so it is light.

``python -m harness -m hydra/sweeper=harness_race +experiment=loss_ab optim.lr=0.01,0.03,0.1 stats.margin=0.5``
races the configurations (the values of one swept key, or the arms) on the same seeds, in batches
of ``seed=S arm=NAME`` jobs through the configured launcher, dropping after each look those shown
worse than the best by more than stats.margin (Kim & Nelson 2001; docs/racing.md). The design is
``ab.race``; the work is in race_impl.py.
"""

from dataclasses import dataclass
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class HarnessRaceSweeperConf:
    _target_: str = "hydra_plugins.harness_sweeper.race_sweeper.HarnessRaceSweeper"
    # jobs handed to the launcher at once; null: a whole batch (every configuration still running)
    max_batch_size: Optional[int] = None


ConfigStore.instance().store(group="hydra/sweeper", name="harness_race", node=HarnessRaceSweeperConf,
                             provider="harness")


class HarnessRaceSweeper(Sweeper):
    def __init__(self, max_batch_size: Optional[int] = None) -> None:
        from .race_impl import RaceSweeperImpl  # the harness, torch and scipy: only when used

        self._impl = RaceSweeperImpl(max_batch_size)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self._impl.sweep(arguments)

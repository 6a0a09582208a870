"""Config and entry class of the sequential sweeper; every Hydra app imports this module, so it is light.

``python -m harness -m hydra/sweeper=harness_sequential +experiment=loss_ab stats.margin=0.3``
launches (seed, arm) jobs (overrides ``seed=S arm=A``) in batches through the configured launcher
(basic, ``hydra/launcher=local_pool``, submitit) and decides between batches from the result files,
with the design declared under ``ab.sequential`` (see docs/sequential.md). The work is in _impl.py.
"""

from dataclasses import dataclass
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class HarnessSequentialSweeperConf:
    _target_: str = "hydra_plugins.harness_sweeper.sequential_sweeper.HarnessSequentialSweeper"
    # jobs handed to the launcher at once; null: a whole batch of seeds (every arm still running)
    max_batch_size: Optional[int] = None


ConfigStore.instance().store(group="hydra/sweeper", name="harness_sequential", node=HarnessSequentialSweeperConf,
                             provider="harness")


class HarnessSequentialSweeper(Sweeper):
    def __init__(self, max_batch_size: Optional[int] = None) -> None:
        from ._impl import SequentialSweeperImpl  # torch, scipy and the harness: only when used

        self._impl = SequentialSweeperImpl(max_batch_size)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self._impl.sweep(arguments)

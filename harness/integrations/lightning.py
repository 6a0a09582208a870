"""``harness.lightning.Callback()``: a Lightning Trainer's run recorded through the unit's Run.

Added to a user's own ``Trainer(callbacks=[...])``, as Optuna's pruning callback is, it attaches to
the unit (``harness.attach()`` in a script a command arm starts; or the Run a train.fn was given,
``Callback(run)``) and records what a train.fn records:

- seeds: at fit start the global RNG (dropout, noise) is reseeded from the Run's model stream, and a
  training DataLoader that shuffles from the global RNG (``shuffle=True`` without a generator) gets
  the Run's data_order generator, so the user's ``seed_everything`` cannot pair or unpair the arms;
- determinism: the Trainer may not weaken the harness's mode (``deterministic=False`` under
  determinism.mode=strict is refused, naming both);
- the init fingerprint before the first step (``run.watch(pl_module)``), one step record per
  optimizer step (gradient accumulation counted by ``trainer.global_step``), the data order from
  the content of every training batch consumed, whoever built the loader;
- the logged metrics (``trainer.callback_metrics``) as curve points after each epoch and as the
  final metrics after fit, validate and test (``callback.metrics``; an attached script's record);
- Lightning's log lines printed once: under a root logger that prints, Lightning's own console
  handlers are dropped (``print_once``);
- one wandb run per unit: a ``WandbLogger`` in the Trainer logs into the harness's run of the unit
  (opened before the fit, grouped by seed and arm), or is turned off where the harness logs the unit
  elsewhere; the console says which (wandb_hook.py).

Imports lightning (``pip install "harness[lightning]"``); nothing else in the harness does.
"""

from __future__ import annotations

import logging
import os
import numbers
import warnings
from typing import Optional

import torch

try:
    import lightning.pytorch as pl
except ImportError as e:  # pragma: no cover - the extra is installed with the tests
    raise ImportError('harness.lightning needs Lightning: pip install "harness[lightning]" '
                      f"(or pip install lightning). Importing it said: {e}") from e

from harness import HarnessError
from harness.integrations.attach import AttachedRun, attach
from harness.integrations.ranks.trainer_ranks import rank_aware
from harness.integrations.wandb_hook import share

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
_MODES = {"off": 0, "warn": 1, "strict": 2}


class HarnessLightningError(HarnessError):
    """The Trainer contradicts the harness (e.g. deterministic=False under determinism.mode=strict)."""


class Callback(pl.Callback):
    """Records a Lightning fit through the unit's Run. ``run``: a train.fn's Run; None: attach()."""

    def __init__(self, run=None):
        super().__init__()
        # on its own, the script's seed_everything(S) names the seed (PL_GLOBAL_SEED): the same streams
        # as the harness's unit of seed S, so a run by hand gives that unit's numbers
        self.run = run if run is not None else attach(seed=int(os.environ.get("PL_GLOBAL_SEED", 0)))
        self.mode = _torch_mode()  # the harness's, set before the Trainer exists (it may change it)
        self.metrics: dict = {}
        self._last_step = 0
        self._first_step = 0  # the trainer's global_step when this fit started (a resumed fit counts from there)
        self._loss: Optional[torch.Tensor] = None
        self._watched = False
        print_once()
        harnessed = run is not None or (isinstance(self.run, AttachedRun) and self.run.attached)
        self.wandb = share(self.run.run_dir, harnessed)  # before the Trainer opens its loggers' runs
        if self.wandb.mode != "own":  # Lightning warns that it reuses the open run: that is the point
            warnings.filterwarnings("ignore", message="There is a wandb run already in progress")

    # -- before the first step ------------------------------------------------------------------

    def setup(self, trainer, pl_module, stage: str) -> None:
        trainer_mode = _torch_mode()
        if _MODES[trainer_mode] < _MODES[self.mode]:
            raise HarnessLightningError(
                f"the Trainer set PyTorch's determinism to {trainer_mode!r} (Trainer(deterministic=...)) but the "
                f"harness runs this unit in determinism.mode={self.mode}: its bits would not be reproducible. "
                f"Leave Trainer(deterministic=...) unset (the harness decides), or set determinism.mode={trainer_mode}.")
        _restore(self.mode)  # deterministic=True under mode=warn would otherwise make warn strict
        if isinstance(self.run, AttachedRun):  # strategy="ddp": the ranks the Trainer launched after attach()
            rank_aware(self.run, trainer.global_rank, trainer.world_size, trainer.local_rank)
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                self.wandb.say("harness.lightning", "Lightning's WandbLogger", _project(logger), self.run)
                if self.wandb.mode == "off" and not getattr(logger.experiment, "disabled", True):
                    logging.getLogger("harness.integrations").warning(
                        "harness.lightning: Lightning's WandbLogger opened a wandb run of its own (its mode= or "
                        "offline= argument overrides the harness's WANDB_MODE=disabled): this unit has a second "
                        "wandb run. Leave mode= and offline= out of WandbLogger(...) under the harness.")
        if stage == "fit":
            self.run.streams.seed_model()  # dropout and the like: the model stream, whatever was seeded

    def on_train_start(self, trainer, pl_module) -> None:
        for loader in _loaders(trainer.train_dataloader):
            sampler = getattr(loader, "sampler", None)
            if isinstance(sampler, torch.utils.data.RandomSampler) and sampler.generator is None:
                sampler.generator = self.run.generator("data_order")  # not the global RNG's
        if not self._watched:  # a second fit goes on counting from the first's start
            self.run.watch(pl_module)
            self._watched = True
            self._first_step = trainer.global_step
        self._last_step = trainer.global_step

    # -- every batch and step -------------------------------------------------------------------

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.run.consumed(batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            loss = loss.detach()
            if loss.dtype is not torch.float32:  # .float() of a float32 tensor is still a call (~2 µs a step)
                loss = loss.float()
            self._loss = loss if self._loss is None else self._loss + loss  # accumulated batches: summed
        if trainer.global_step > self._last_step:  # an optimizer step happened in this batch
            self._last_step = trainer.global_step
            self.run.step(self._loss if self._loss is not None else torch.tensor(float("nan")))
            self._loss = None

    # -- metrics --------------------------------------------------------------------------------

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.run.trained(trainer.global_step - self._first_step)  # counted by the trainer, not by run.step
        scalars = _scalars(trainer.callback_metrics)
        if scalars:
            self.run.log(self.run.steps, **scalars)

    def on_train_end(self, trainer, pl_module) -> None:
        self.run.trained(trainer.global_step - self._first_step)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._final(trainer, ended=True)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._final(trainer)

    def on_test_end(self, trainer, pl_module) -> None:
        self._final(trainer)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self.wandb.release()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.wandb.release()

    def _final(self, trainer, ended: bool = False) -> None:
        """The metrics so far. An attached script's record is written when the fit ends (``ended``),
        not at a validation during it; a validate or test after the fit rewrites its metrics."""
        self.metrics.update(_scalars(trainer.callback_metrics))
        if isinstance(self.run, AttachedRun) and self.run.attached and self.run.steps:
            self.run.add_metrics(self.metrics)
            if ended:
                self.run.finish()


def fit(cfg, run, module: dict, datamodule: dict, trainer: Optional[dict] = None) -> dict:
    """A train.fn for a project with a LightningModule and a DataModule and no script of its own:
    ``train.kwargs.module`` and ``train.kwargs.datamodule`` are ``_target_`` nodes, ``train.kwargs.trainer``
    the Trainer's keyword arguments. The module is built inside ``run.init()`` (its initial weights
    from the init stream), the Callback records the fit, and the final metrics are
    ``trainer.callback_metrics`` after fit (and validate, when the DataModule has a val_dataloader).
    Units run in one process: no interpreter, torch or Lightning start per unit; with train.nproc=N,
    as N ranks the harness started, the Trainer runs DDP over them (strategy="ddp", devices=N)."""
    from harness.training.components import instantiate

    world = getattr(run, "world", None)  # a rank of a train.nproc unit: DDP over the unit's ranks
    ddp = {"devices": int(os.environ.get("LOCAL_WORLD_SIZE", world.size)), "strategy": "ddp"} if world and world.spans else {}
    kwargs = {"max_epochs": 1, "accelerator": run.device.type, "devices": 1, "logger": False,
              "enable_progress_bar": False, "enable_checkpointing": False, **ddp, **dict(trainer or {})}
    callbacks = [_built(c, instantiate) for c in kwargs.pop("callbacks", None) or []]
    logger = kwargs["logger"]  # a WandbLogger node logs into the unit's wandb run (the Callback's doing)
    kwargs["logger"] = [_built(lg, instantiate) for lg in logger] if isinstance(logger, list) else _built(logger, instantiate)
    with run.init():
        model = instantiate(module)
    data = instantiate(datamodule)
    callback = Callback(run)
    pl.Trainer(callbacks=[callback, *callbacks], **kwargs).fit(model, datamodule=data)
    if not callback.metrics:
        raise HarnessLightningError(
            "harness.lightning.fit: the fit logged no metric (trainer.callback_metrics is empty): log the metrics "
            "to compare with self.log(...) in the LightningModule's training_step or validation_step.")
    return callback.metrics


def _built(node, instantiate):
    """A ``_target_`` node (a callback, a logger) built; anything else as it is."""
    return instantiate(node) if isinstance(node, dict) and "_target_" in node else node


def print_once() -> None:
    """Lightning's messages go through Python logging, and Lightning gives its loggers ("lightning",
    "lightning.pytorch", ...) handlers of their own when it is imported before logging is set up. Under
    a root logger that prints too (a Hydra app: its console and its job's log file), each line would be
    printed twice: those handlers are dropped and the lines go through the root's, once."""
    if not logging.getLogger().handlers:
        return
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                logger.removeHandler(handler)
        logger.propagate = True


def _project(logger) -> Optional[str]:
    """The project a WandbLogger names (its project= or $WANDB_PROJECT), None for Lightning's default."""
    project = getattr(logger, "_project", None)
    if not project or (project == "lightning_logs" and not os.environ.get("WANDB_PROJECT")):
        return None
    return str(project)


def _torch_mode() -> str:
    if not torch.are_deterministic_algorithms_enabled():
        return "off"
    return "warn" if torch.is_deterministic_algorithms_warn_only_enabled() else "strict"


def _restore(mode: str) -> None:
    if mode == "off":
        torch.use_deterministic_algorithms(False)
    else:
        torch.use_deterministic_algorithms(True, warn_only=mode == "warn")


def _loaders(obj):
    """The DataLoaders in what trainer.train_dataloader returns (one, or a list or dict of them)."""
    if isinstance(obj, torch.utils.data.DataLoader):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _loaders(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _loaders(value)


def _scalars(metrics) -> dict:
    out = {}
    for name, value in dict(metrics).items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            out[str(name)] = float(value.item())
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            out[str(name)] = float(value)
    return out

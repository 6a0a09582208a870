"""A small Lightning project as its users write it (tests/test_lightning.py): an MLP on 256 of
scikit-learn's digits, a DataModule whose training DataLoader shuffles from the global RNG
(``shuffle=True``, no generator), ``seed_everything`` with a fixed seed, and the harness's Callback
added to the Trainer. The arms differ in loss.label_smoothing."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from harness.lightning import Callback


class Digits(pl.LightningDataModule):
    def __init__(self, batch_size: int = 32):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        x, y = digits()
        x, y = torch.tensor(x[:320] / 16, dtype=torch.float32), torch.tensor(y[:320])
        self.train, self.val = TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)  # the global RNG's order

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=64)


def digits():
    """scikit-learn's digits (1797 8x8 images, as load_digits(return_X_y=True) gives them), read from
    the file scikit-learn ships without importing it: that import takes seconds in every fresh
    process (the tests' subprocesses)."""
    import gzip
    import importlib.util
    import os

    import numpy as np

    folder = importlib.util.find_spec("sklearn").submodule_search_locations[0]
    with gzip.open(os.path.join(folder, "datasets", "data", "digits.csv.gz")) as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int)


class MLP(pl.LightningModule):
    def __init__(self, label_smoothing: float = 0.0, dropout: float = 0.1):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                                       torch.nn.Linear(32, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y, label_smoothing=self.label_smoothing)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("test_loss", torch.nn.functional.cross_entropy(logits, y))
        self.log("test_accuracy", 100.0 * (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.2)


def trainer(callback, **kwargs) -> pl.Trainer:
    kwargs = {"logger": False, "max_epochs": 1, **kwargs}
    return pl.Trainer(accelerator="cpu", devices=1, callbacks=[callback], enable_progress_bar=False,
                      enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0, **kwargs)


def fit(cfg, run, accumulate_grad_batches: int = 1) -> dict:
    """A train.fn: the module built inside run.init(), the user's fixed seed_everything after it."""
    with run.init():
        module = MLP(label_smoothing=float(cfg.loss.label_smoothing))
    pl.seed_everything(1234, verbose=False)  # harmless: the Callback reseeds from the harness's streams
    callback = Callback(run)
    trainer(callback, accumulate_grad_batches=accumulate_grad_batches).fit(module, datamodule=Digits())
    return callback.metrics


def fit_with_wandb(cfg, run) -> dict:
    """fit with Lightning's own WandbLogger in the Trainer, as its users add it (a project of its own)."""
    from lightning.pytorch.loggers import WandbLogger

    with run.init():
        module = MLP(label_smoothing=float(cfg.loss.label_smoothing))
    callback = Callback(run)
    trainer(callback, logger=WandbLogger(project="my-lightning-project"), log_every_n_steps=2).fit(module, datamodule=Digits())
    return callback.metrics


def script(seed: int, label_smoothing: float, epochs: int = 1) -> MLP:
    """What a command arm's Lightning script does: its own seed_everything and module, then
    Callback() with no Run (it attaches to the unit the harness launched). Validated every epoch."""
    pl.seed_everything(seed, verbose=False)
    module = MLP(label_smoothing=label_smoothing)
    trainer(Callback(), max_epochs=epochs).fit(module, datamodule=Digits())
    return module


class FirstEpochOnly(Callback):
    """A callback that records the steps of the first epoch only: fewer than the trainer took."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.current_epoch == 0:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

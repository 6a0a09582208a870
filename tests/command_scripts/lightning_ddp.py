"""A Lightning script trained with strategy="ddp" on 2 CPU processes (tests/test_lightning_ddp.py), the
harness's Callback in its Trainer: Lightning's launcher runs this script again for rank 1."""

import argparse

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from harness.lightning import Callback

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--lr", type=float, default=0.1)
args, _ = parser.parse_known_args()


class Tiny(pl.LightningModule):
    def __init__(self, lr: float):
        super().__init__()
        self.lr, self.layer = lr, torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x).flatten(), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


pl.seed_everything(args.seed, verbose=False)
data = TensorDataset(torch.linspace(0, 1, 24).reshape(12, 2), torch.linspace(1, 0, 12))
callback = Callback()
trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, callbacks=[callback], logger=False,
                     enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
trainer.fit(Tiny(args.lr), DataLoader(data, batch_size=2, shuffle=True))
if trainer.global_rank == 0:
    print(f"score {callback.metrics['train_loss']:.6f}")

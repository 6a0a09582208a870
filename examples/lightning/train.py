"""A Lightning project as its users write it: an MLP on scikit-learn's digits, a DataModule, dropout
as a flag, ``seed_everything``, ``Trainer(deterministic=True)``. The question: does dropout 0.3 do
better than 0.1? The one line marked ``# harness`` lets a command arm prove the pairing and the bits
(init, the batches Lightning consumed, every optimizer step); without the harness it changes nothing:

    python examples/lightning/train.py --seed 0 --dropout 0.3
"""

import argparse

import lightning.pytorch as L
import torch
from torch.utils.data import DataLoader, TensorDataset

import harness.lightning


class Digits(L.LightningDataModule):
    def __init__(self, batch_size: int = 32):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        x, y = torch.tensor(x / 16, dtype=torch.float32), torch.tensor(y)
        self.train, self.val = TensorDataset(x[:1200], y[:1200]), TensorDataset(x[1200:], y[1200:])

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=256)


class MLP(L.LightningModule):
    def __init__(self, dropout: float, lr: float):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                                       torch.nn.Linear(128, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y))
        self.log("val_accuracy", 100.0 * (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    L.seed_everything(args.seed)
    model = MLP(args.dropout, args.lr)
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, deterministic=True, logger=False,
                        enable_progress_bar=False, enable_checkpointing=False,
                        callbacks=[harness.lightning.Callback()])  # harness: the unit's proofs
    trainer.fit(model, datamodule=Digits())
    m = trainer.callback_metrics
    print(f"val_loss {m['val_loss']:.6f} val_accuracy {m['val_accuracy']:.2f}")


if __name__ == "__main__":
    main()

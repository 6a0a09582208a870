"""A command arm's Lightning script with a WandbLogger of its own, in a project of its own
(tests/test_lightning_wandb.py): the harness's Callback attaches it to the unit."""

import argparse

from lightning.pytorch.loggers import WandbLogger

from tests import lightning_fns as L

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dropout", type=float, default=0.1)
args, _ = parser.parse_known_args()
L.pl.seed_everything(args.seed, verbose=False)
callback = L.Callback()
L.trainer(callback, logger=WandbLogger(project="userproj")).fit(L.MLP(dropout=args.dropout), datamodule=L.Digits())
print(f"val_loss {callback.metrics['test_loss']:.6f} val_accuracy {callback.metrics['test_accuracy']:.2f}")

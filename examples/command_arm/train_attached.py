"""train.py's question (does standardizing the features lower the test loss?) in PyTorch, with the
lines marked ``# harness`` that let the harness prove the pairing and the bits from inside.

Without them this is a plain script: a logistic regression by minibatch SGD, shuffled batches.
With them, under a command arm, the harness records what a train.fn's unit records: the initial
weights (init), the order of the batches (data_order) and every step's loss and weights, so arms of
one seed are shown to start from the same weights and read the same batches, and a rerun is
compared bit for bit. Run on its own, ``harness.attach`` returns a Run that records nothing:

    python examples/command_arm/train_attached.py --seed 0 --standardize
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import data  # noqa: E402 - the same data as train.py

import harness  # harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--standardize", action="store_true", help="scale each feature to mean 0, sd 1")
    args = parser.parse_args()

    x_train, y_train, x_test, y_test = (torch.tensor(a, dtype=torch.float32) for a in data())
    if args.standardize:
        mean, sd = x_train.mean(0), x_train.std(0)
        x_train, x_test = (x_train - mean) / sd, (x_test - mean) / sd
    run = harness.attach(seed=args.seed)  # harness: the unit's Run (on its own: records nothing)
    with run.init():  # harness: the initial weights come from the seed's init stream
        model = torch.nn.Linear(x_train.shape[1], 1)
    run.watch(model)  # harness: init fingerprint, then the weights at every step
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    # harness: run.loader shuffles from the seed's data_order stream and fingerprints each batch
    # (the plain script's DataLoader(TensorDataset(x, y), shuffle=True) draws from the global RNG)
    batches = run.loader(harness.TensorBatches(x_train, y_train), batch_size=args.batch_size)
    for epoch in range(1, args.epochs + 1):
        for xb, yb in batches:
            loss = loss_fn(model(xb).squeeze(1), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.step(loss)  # harness: the step's loss and weights
        with torch.no_grad():
            logits = model(x_test).squeeze(1)
            test_loss = loss_fn(logits, y_test).item()
        print(f"epoch {epoch} test_loss {test_loss:.6f}", flush=True)
    accuracy = 100.0 * ((logits > 0) == (y_test > 0.5)).float().mean().item()
    print(f"final test_loss {test_loss:.6f} test_accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()

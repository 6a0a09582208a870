"""A training script as researchers already have them: argparse, --seed, prints its metrics.

Logistic regression by minibatch SGD on a fixed synthetic data set (numpy only, so a run takes a
fraction of a second). The batches are read in their order, never shuffled; the seed sets the
initial weights. The question the experiment asks: does standardizing the features (--standardize)
lower the test loss after a few epochs? Run by hand:

    python examples/command_arm/train.py --seed 0 --standardize
"""

import argparse

import numpy as np


def data(n_train=512, n_test=512, features=8):
    """The same data in every run (its own fixed seed): features on very different scales."""
    rng = np.random.default_rng(1234)
    scale = np.logspace(-1, 1.5, features)
    x = rng.normal(size=(n_train + n_test, features)) * scale
    w = rng.normal(size=features) / scale
    y = (x @ w + 0.5 * rng.normal(size=len(x)) > 0).astype(np.float64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def loss_and_grad(w, b, x, y):
    p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
    eps = 1e-12
    loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
    err = (p - y) / len(y)
    return loss, x.T @ err, err.sum(), p


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="initial weights")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--standardize", action="store_true", help="scale each feature to mean 0, sd 1")
    args = parser.parse_args()

    x_train, y_train, x_test, y_test = data()
    if args.standardize:
        mean, sd = x_train.mean(0), x_train.std(0)
        x_train, x_test = (x_train - mean) / sd, (x_test - mean) / sd
    rng = np.random.default_rng(args.seed)
    w, b = rng.normal(scale=0.1, size=x_train.shape[1]), 0.0
    for epoch in range(1, args.epochs + 1):
        for start in range(0, len(x_train), args.batch_size):  # in order: no shuffling
            xb, yb = x_train[start:start + args.batch_size], y_train[start:start + args.batch_size]
            _, gw, gb, _ = loss_and_grad(w, b, xb, yb)
            w, b = w - args.lr * gw, b - args.lr * gb
        test_loss, _, _, p = loss_and_grad(w, b, x_test, y_test)
        print(f"epoch {epoch} test_loss {test_loss:.6f}", flush=True)
    accuracy = 100.0 * np.mean((p > 0.5) == (y_test > 0.5))
    print(f"final test_loss {test_loss:.6f} test_accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()

"""Tabular regression data: scikit-learn's bundled diabetes set (442 patients, 10 features)."""

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Tabular:
    train_x: torch.Tensor  # float32, N x features, standardized with the training split's statistics
    train_y: torch.Tensor  # float32, N, standardized
    test_x: torch.Tensor
    test_y: torch.Tensor
    y_scale: float  # multiply a standardized error by this to get it in the target's own units


def diabetes(test_size: int = 100, split_seed: int = 0) -> Tabular:
    """A fixed split (the same for every seed and arm): the seed varies training, not the test set."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    order = np.random.default_rng(split_seed).permutation(len(y))
    test, train = order[:test_size], order[test_size:]
    mx, sx = x[train].mean(0), x[train].std(0)
    my, sy = y[train].mean(), y[train].std()

    def t(a):
        return torch.tensor(a, dtype=torch.float32)

    return Tabular(t((x[train] - mx) / sx), t((y[train] - my) / sy), t((x[test] - mx) / sx), t((y[test] - my) / sy),
                   float(sy))

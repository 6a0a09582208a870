"""The loss term under test: squared error, optionally with a Huber tail.

huber_delta = null: plain mean squared error. A number: squared below delta, linear above it
(in standardized target units), so a few badly predicted patients pull the fit less.
"""

from typing import Optional

import torch
import torch.nn.functional as F


class RegressionLoss:
    def __init__(self, huber_delta: Optional[float] = None):
        if huber_delta is not None and huber_delta <= 0:
            raise ValueError(f"huber_delta={huber_delta} must be > 0, or null for plain squared error")
        self.huber_delta = huber_delta

    def __call__(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.huber_delta is None:
            return F.mse_loss(pred, target)
        return F.huber_loss(pred, target, delta=self.huber_delta)

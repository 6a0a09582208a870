"""Models for the holdout-op audit's tests, plugged in with model.target=tests.models_for_audit.<Name>.

On CPU almost every op is deterministic; put_(accumulate=False) is the exception (NOTES.md). These
models place it where the CUDA offenders usually sit -- in a backward -- so that the CPU tests can
show that the audit finds backward ops and names the module whose backward called them.
"""

import torch
from torch import nn


class _MaxOverWidth(torch.autograd.Function):
    """max over the last axis; its backward routes each gradient to the arg-max with put_
    (accumulate=False), like a CUDA pooling backward without a deterministic kernel."""

    @staticmethod
    def forward(ctx, x):
        values, idx = x.max(dim=-1)
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return values

    @staticmethod
    def backward(ctx, grad):
        (idx,) = ctx.saved_tensors
        width = ctx.shape[-1]
        flat = idx.reshape(-1) + torch.arange(idx.numel(), device=idx.device) * width
        grad_in = grad.new_zeros(ctx.shape)
        grad_in.put_(flat, grad.reshape(-1), accumulate=False)
        return grad_in


class RowMax(nn.Module):
    def forward(self, x):
        return _MaxOverWidth.apply(x)


class BackwardPutModel(nn.Module):
    """conv -> row max (put_ in its backward only) -> linear."""

    def __init__(self, in_channels: int, num_classes: int, image_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 4, 3, padding=1)
        self.pool = RowMax()
        self.head = nn.Linear(4 * image_size, num_classes)

    def forward(self, x):
        return self.head(self.pool(self.conv(x)).flatten(1))

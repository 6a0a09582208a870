"""Models used by tests through model.target (a user's own model plugs in the same way)."""

import torch
from torch import nn


class PutModel(nn.Module):
    """Calls Tensor.put_(accumulate=False) in forward: no deterministic implementation on CPU."""

    def __init__(self, in_channels: int, num_classes: int, image_size: int):
        super().__init__()
        self.fc = nn.Linear(in_channels * image_size * image_size, num_classes)
        self.scatter = Scatter()

    def forward(self, x):
        return self.scatter(self.fc(x.flatten(1)))


class Scatter(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        out.put_(torch.arange(x.numel()), x.reshape(-1), accumulate=False)
        return out


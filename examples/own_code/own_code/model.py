"""A small MLP whose shape is set by keyword arguments (hidden, depth, dropout)."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_features: int, hidden: int = 64, depth: int = 2, dropout: float = 0.0):
        super().__init__()
        if hidden < 1 or depth < 1:
            raise ValueError(f"hidden={hidden} and depth={depth} must be >= 1")
        layers, width = [], in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

"""Built-in models: a small CNN for digits-sized inputs and torchvision's ResNet18 with a CIFAR stem.

Each is a model ``_target_`` (conf/model/*.yaml). The built-in loop offers ``in_channels``,
``num_classes`` and ``image_size`` from the data; a model takes the ones its signature names.
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """conv3x3 -> ReLU -> conv3x3 -> ReLU -> maxpool2 -> linear -> ReLU -> (dropout) -> linear.

    38k parameters on 1x8x8 digits (width 16, hidden 64); ~98% test accuracy in 15 epochs.
    Max-pool, not adaptive pooling: its backward is deterministic on CUDA, so the default model
    runs in strict mode everywhere.
    """

    def __init__(self, in_channels: int, num_classes: int, image_size: int, width: int = 16,
                 dropout: float = 0.0, hidden: int = 64):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.hidden = nn.Sequential(nn.Linear(2 * width * (image_size // 2) ** 2, hidden), nn.ReLU())
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.hidden(self.features(x).flatten(1))))


class GlobalAvgPool(nn.Module):
    """Mean over H and W. Same numbers as AdaptiveAvgPool2d(1), but its backward is deterministic
    on CUDA (adaptive_avg_pool2d_backward_cuda has no deterministic implementation)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3), keepdim=True)


def resnet18_cifar(in_channels: int, num_classes: int) -> nn.Module:
    """torchvision's ResNet18 with the usual CIFAR stem: 3x3 stride-1 first conv, no max-pool."""
    import torchvision

    model = torchvision.models.resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    model.avgpool = GlobalAvgPool()
    return model

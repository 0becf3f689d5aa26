"""LeNet-5 in the form commonly used for CIFAR-10."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import register


class LeNet(nn.Module):
    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, 84),
            nn.ReLU(inplace=True),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The unpadded 5x5 convs fix the flattened size at 16*5*5 only for 32x32
        # input. LeCun et al. fed 28x28 MNIST digits zero-padded to 32x32, so
        # smaller inputs get the same centred zero border instead of a second
        # classifier shape.
        h, w = x.shape[-2:]
        if h < 32 or w < 32:
            dh, dw = max(32 - h, 0), max(32 - w, 0)
            x = F.pad(x, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2))
        features = self.features(x)
        if features.shape[-1] != 5 or features.shape[-2] != 5:
            # larger inputs (e.g. --image-size 64) are averaged down to the 5x5 grid the
            # classifier was built for, as the other models' adaptive pooling does
            features = F.adaptive_avg_pool2d(features, 5)
        return self.classifier(torch.flatten(features, 1))


@register("lenet")
def lenet(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    return LeNet(in_channels, num_classes)

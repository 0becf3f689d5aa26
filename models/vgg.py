"""VGG with BatchNorm in the CIFAR form (kuangliu/pytorch-cifar): 3x3 convs, one Linear."""

from __future__ import annotations

import torch
import torch.nn as nn

from .registry import register

_CFG: dict[str, list[int | str]] = {
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, cfg: list[int | str], in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for v in cfg:
            if v == "M":
                # ceil_mode so 28x28 survives five halvings (28->14->7->4->2->1)
                # instead of collapsing to 0x0 at the fifth pool.
                layers.append(nn.MaxPool2d(2, ceil_mode=True))
            else:
                # Biased convs (redundant before BN) keep the parameter counts
                # identical to the reference CIFAR implementation.
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def _make(name: str):
    @register(name)
    def ctor(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
        return VGG(_CFG[name], in_channels, num_classes)

    ctor.__name__ = ctor.__qualname__ = name
    return ctor


vgg13 = _make("vgg13")
vgg16 = _make("vgg16")
vgg19 = _make("vgg19")

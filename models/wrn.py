"""Wide residual networks WRN-d-k (Zagoruyko & Komodakis, 2016)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import register


class WideBlock(nn.Module):
    """Pre-activation block: BN-ReLU-conv3x3, BN-ReLU-(dropout)-conv3x3."""

    def __init__(self, in_planes: int, planes: int, stride: int, dropout: float):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.dropout = dropout
        self.shortcut = None
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        # As in the reference code, the projection sees the pre-activated input,
        # while an identity shortcut keeps the raw residual stream.
        skip = x if self.shortcut is None else self.shortcut(o)
        o = self.conv1(o)
        o = F.relu(self.bn2(o))
        if self.dropout > 0:
            o = F.dropout(o, p=self.dropout, training=self.training)
        return self.conv2(o) + skip


class WideResNet(nn.Module):
    def __init__(self, depth: int, widen: int, in_channels: int = 3, num_classes: int = 10, dropout: float = 0.0):
        super().__init__()
        if depth < 10 or (depth - 4) % 6 != 0:
            raise ValueError(f"WRN depth must be 6n+4 with n >= 1 (10, 16, 22, 28, ...), got {depth}")
        if widen < 1:
            raise ValueError(f"WRN widen factor must be >= 1, got {widen}")
        n = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        blocks: list[nn.Module] = []
        in_planes = widths[0]
        for planes, stride in zip(widths[1:], (1, 2, 2)):
            for s in [stride] + [1] * (n - 1):
                blocks.append(WideBlock(in_planes, planes, s, dropout))
                in_planes = planes
        self.blocks = nn.Sequential(*blocks)
        # Pre-activation blocks end on a conv, so the last BN-ReLU lives here.
        self.bn = nn.BatchNorm2d(in_planes)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.blocks(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


def wide_resnet(depth: int, widen: int, in_channels: int = 3, num_classes: int = 10, dropout: float = 0.0) -> nn.Module:
    return WideResNet(depth, widen, in_channels, num_classes, dropout)


def _make(depth: int):
    name = f"wrn{depth}"

    @register(name)
    def ctor(in_channels: int = 3, num_classes: int = 10, widen: int = 8, dropout: float = 0.0) -> nn.Module:
        return WideResNet(depth, widen, in_channels, num_classes, dropout)

    ctor.__name__ = ctor.__qualname__ = name
    return ctor


wrn10 = _make(10)
wrn16 = _make(16)
wrn22 = _make(22)

"""ResNet in the CIFAR form (He et al. 2016; kuangliu/pytorch-cifar layout).

Unlike the ImageNet model, the stem is a single stride-1 3x3 conv with no max-pool,
so 32x32 (or 28x28) inputs are not downsampled to almost nothing by stage 4.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import register


def _shortcut(in_planes: int, out_planes: int, stride: int) -> nn.Module:
    if stride == 1 and in_planes == out_planes:
        return nn.Identity()
    return nn.Sequential(
        nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False),
        nn.BatchNorm2d(out_planes),
    )


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _shortcut(in_planes, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        # Stride on the 3x3 conv (the "ResNet v1.5" placement, as in torchvision).
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = _shortcut(in_planes, out_planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block, num_blocks: list[int], in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, 64, 3, padding=1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
        )
        layers: list[nn.Module] = []
        in_planes = 64
        for planes, n, stride in zip((64, 128, 256, 512), num_blocks, (1, 2, 2, 2)):
            for s in [stride] + [1] * (n - 1):
                layers.append(block(in_planes, planes, s))
                in_planes = planes * block.expansion
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


@register("resnet18")
def resnet18(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    return ResNet(BasicBlock, [2, 2, 2, 2], in_channels, num_classes)


@register("resnet34")
def resnet34(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    return ResNet(BasicBlock, [3, 4, 6, 3], in_channels, num_classes)


@register("resnet50")
def resnet50(in_channels: int = 3, num_classes: int = 10) -> nn.Module:
    return ResNet(Bottleneck, [3, 4, 6, 3], in_channels, num_classes)

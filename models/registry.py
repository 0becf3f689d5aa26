"""The model registry: a name -> constructor map; the package imports every model module."""

from __future__ import annotations

from typing import Callable

import torch.nn as nn

_REGISTRY: dict[str, Callable[..., nn.Module]] = {}


def register(name: str) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    """Decorator registering a constructor ``fn(in_channels, num_classes, **kwargs)``."""

    def deco(fn: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if name in _REGISTRY:
            raise ValueError(f"model '{name}' registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


def list_models() -> list[str]:
    return list(_REGISTRY)


def create(name: str, in_channels: int = 3, num_classes: int = 10, **kwargs) -> nn.Module:
    try:
        ctor = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown model '{name}'; choose one of: {', '.join(list_models())}") from None
    return ctor(in_channels=in_channels, num_classes=num_classes, **kwargs)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

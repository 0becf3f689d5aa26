"""The model registry: a name -> constructor map; the package imports every model module."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
from typing import Callable

import torch.nn as nn

from ..errors import ConfigError

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


def is_factory(name: str) -> bool:
    """'package.module:callable': the user's own model, not one of the zoo's."""
    return ":" in name


def factory(name: str) -> Callable[..., nn.Module]:
    """The callable `name` points to (imported from the working folder too, as `python -m` would);
    ConfigError (a ValueError) in one line when it cannot be."""
    module, _, attr = name.partition(":")
    if not module or not attr.isidentifier():
        raise ConfigError("is not package.module:factory")
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"names no factory that loads ({type(exc).__name__}: {exc})") from None
    finally:
        sys.path.remove(os.getcwd())
    if not callable(fn):
        raise ConfigError("names a factory that is not callable")
    return fn


def _from_factory(name: str, in_channels: int, num_classes: int) -> nn.Module:
    """The factory called with the data's in_channels and num_classes where it takes them."""
    fn = factory(name)
    try:
        takes = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes = {}
    given = {"in_channels": in_channels, "num_classes": num_classes}
    model = fn(**{k: v for k, v in given.items() if k in takes})
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model factory '{name}' returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def shapes_hash(model: nn.Module) -> str:
    """What a user's model is, beside its factory's name: its parameters' names and shapes."""
    text = "\n".join(f"{n}:{tuple(p.shape)}" for n, p in model.named_parameters())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def create(name: str, in_channels: int = 3, num_classes: int = 10, **kwargs) -> nn.Module:
    if is_factory(name):
        return _from_factory(name, in_channels, num_classes)
    try:
        ctor = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown model '{name}'; choose one of: {', '.join(list_models())}") from None
    return ctor(in_channels=in_channels, num_classes=num_classes, **kwargs)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

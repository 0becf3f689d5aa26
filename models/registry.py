"""The model registry: a name -> constructor map; the package imports every model module."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
from typing import Callable

import torch
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


CALLED = "factory(in_channels, num_classes)"  # how a user's factory is called (the docs' promise)


def factory(name: str) -> Callable[..., nn.Module]:
    """The callable `name` points to (imported from the working folder too, as `python -m` would),
    checked to be callable as CALLED; ConfigError (a ValueError) in one line when it is not."""
    module, _, attr = name.partition(":")
    if not module or not attr.isidentifier():
        raise ConfigError("is not package.module:factory")
    sys.path.insert(0, os.getcwd())
    # no __pycache__ left in the user's folder (Python writes one beside a module it imports): a
    # command refused for its factory writes nothing, whatever PYTHONDONTWRITEBYTECODE says
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"names no factory that loads ({type(exc).__name__}: {first_line(exc)})") from None
    except (Exception, SystemExit) as exc:  # the user's module itself failed (or exited) as it ran
        raise ConfigError(f"names module {module}, which raised {type(exc).__name__} as it was imported: "
                          f"{first_line(exc)}") from None  # fmt: skip
    finally:
        sys.path.remove(os.getcwd())
        sys.dont_write_bytecode = writes
    if not callable(fn):
        raise ConfigError("names a factory that is not callable")
    arguments(fn, 3, 10)
    return fn


def first_line(exc: BaseException) -> str:
    """An exception's message, its first line only (a report's error is one line)."""
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else "(no message)"


def arguments(fn: Callable[..., nn.Module], in_channels: int, num_classes: int) -> tuple[list, dict]:
    """How `fn` is called: given in_channels and num_classes where it names them (by position where
    it takes them only so), nothing else; a factory that needs anything more is refused."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: called with none
        return [], {}
    given = {"in_channels": in_channels, "num_classes": num_classes}
    args: list[int] = []
    kwargs: dict[str, int] = {}
    unmet = []
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in given and p.kind is p.POSITIONAL_ONLY and len(args) == i:
            args.append(given[p.name])
        elif p.name in given and p.kind is not p.POSITIONAL_ONLY:
            kwargs[p.name] = given[p.name]
        elif p.default is p.empty:
            unmet.append(p.name)
    if unmet:
        raise ConfigError(
            f"names a factory that needs {', '.join(unmet)}, which it cannot be given: it is called as "
            f"{CALLED}, with those of the two it names, or with none"
        )
    return args, kwargs


def _from_factory(name: str, in_channels: int, num_classes: int) -> nn.Module:
    """The factory called as CALLED; what it raises, or a return that is not a model, is one line."""
    fn = factory(name)
    args, kwargs = arguments(fn, in_channels, num_classes)
    try:
        model = fn(*args, **kwargs)
    except (Exception, SystemExit) as exc:  # the user's code: its failure is theirs to read, in one line
        raise ConfigError(f"model factory '{name}' raised {type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model factory '{name}' returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def check_outputs(model: nn.Module, name: str, images: torch.Tensor, num_classes: int) -> None:
    """One forward of a tiny batch before training (eval mode, no gradient, the RNG untouched): a
    user's model that has nothing to train, fails on the data or gives other than one logit per
    class is refused in one line, not a traceback mid-epoch or accuracies of other classes."""
    if not any(p.requires_grad for p in model.parameters()):
        raise ConfigError(f"model factory '{name}' gives a model with no trainable parameters")
    n, want, was = images.shape[0], (images.shape[0], num_classes), model.training
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = model(images)
    except Exception as exc:
        raise ConfigError(
            f"model factory '{name}': its model raised {type(exc).__name__} on a batch of {n} images of "
            f"{' x '.join(map(str, images.shape[1:]))}: {first_line(exc)}"
        ) from None
    finally:
        model.train(was)
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else f"a {type(out).__name__}"
    if got != want:
        raise ConfigError(
            f"model factory '{name}': its model gives {got} for a batch of {n} images; the data has "
            f"{num_classes} classes: expected a tensor of shape {want}, one logit per class"
        )


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

"""The policy registry: names to policy classes, like the model zoo's.

A policy module registers its class with `@register`; the first question to the registry
(`list_policies`, `get`) imports every module of `pruning/policies/`, so the registry is full
before anything can ask it, and no earlier: the policies need torch, the settings do not."""

from __future__ import annotations

from typing import Any

_REGISTRY: dict[str, Any] = {}
ALIASES = {"none": "regular"}
_LOADED: list[bool] = []


def _load() -> None:
    if not _LOADED:
        _LOADED.append(True)  # first: the policy modules import this one while they load
        from . import policies  # noqa: F401


def register(cls: Any) -> Any:
    """Class decorator: make a policy available by its `name`."""
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"policy name {cls.name!r} is empty or registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def list_policies() -> list[str]:
    _load()
    return sorted(_REGISTRY, key=lambda name: (_REGISTRY[name].order, name))


def get(name: str) -> Any:
    _load()
    try:
        return _REGISTRY[ALIASES.get(name, name)]
    except KeyError:
        raise ValueError(f"unknown pruning policy '{name}'; choose one of: {', '.join(list_policies())}") from None

"""The policy registry: names to policy classes (the shape of every axis: `fineprune_cli.registry`).

A policy module of `pruning/policies/` registers its class with `@register`; the first question
to the registry (`list_policies`, `get`) imports every module of that folder, so the registry is
full before anything can ask it, and no earlier: the policies need torch, the settings do not."""

from __future__ import annotations

from typing import Any

from ..registry import Registry

POLICIES: Registry[Any] = Registry(__package__ + ".policies", order=lambda cls: (cls.order, cls.name))
ALIASES = {"none": "regular"}
register = POLICIES.register  # a class decorator: the policy by its `name`


def list_policies() -> list[str]:
    return POLICIES.names()


def get(name: str) -> Any:
    found = POLICIES.get(ALIASES.get(name, name))
    if found is None:
        raise ValueError(f"unknown pruning policy '{name}'; choose one of: {', '.join(list_policies())}")
    return found

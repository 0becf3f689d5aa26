"""The executors `compare --executor` takes, by name: the only place a name is looked up.

Each executor is one module of `executors/kinds/` whose `Kind` registers itself with
`@EXECUTORS.register` (the shape of every axis: `fineprune_cli.registry`); the folder is
imported on the first lookup, so adding one is adding that file."""

from __future__ import annotations

from ...errors import ConfigError
from ...registry import Registry
from .contract import Kind

DEFAULT = "local"
EXECUTORS: Registry[Kind] = Registry(__package__ + ".kinds", DEFAULT)


def names() -> list[str]:
    return EXECUTORS.names()


def problem(name: str) -> str | None:
    """For the --executor setting's check."""
    return EXECUTORS.problem(name)


def kind(name: str) -> Kind:
    found = EXECUTORS.get(name)
    if found is None:
        raise ConfigError(f"--executor {problem(name)}; got '{name}'")
    return found


def with_settings() -> list[Kind]:
    """The kinds with a settings section of their own (compare.<name>)."""
    return [k for k in EXECUTORS.values() if k.settings is not None]

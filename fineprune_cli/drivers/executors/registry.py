"""The executors `compare --executor` takes, by name: the only place a name is looked up.

Adding one is a module with a `Kind` (contract.py) and one line below; a test adds its own with
`register()`."""

from __future__ import annotations

from ...errors import ConfigError
from . import local, slurm
from .contract import Kind

KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


register(local.KIND)  # the first is the default
register(slurm.KIND)

DEFAULT = next(iter(KINDS))


def names() -> list[str]:
    return list(KINDS)


def problem(name: str) -> str | None:
    """For the --executor setting's check."""
    return None if name in KINDS else f"must be one of: {', '.join(KINDS)}"


def kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"--executor {problem(name)}; got '{name}'") from None


def with_settings() -> list[Kind]:
    """The kinds with a settings section of their own (compare.<name>)."""
    return [k for k in KINDS.values() if k.settings is not None]

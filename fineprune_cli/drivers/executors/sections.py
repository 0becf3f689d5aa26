"""Each executor's own settings section inside `compare` (compare.slurm), read from YAML, --set
and its flags alike, and kept for the executor chosen; another's, given, is a mistake."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ...settings import check_section, fields, flag_of, short_repr
from . import registry

Found = dict[str, tuple[dict[str, Any], str]]  # executor -> (its values, where the last came from)


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """'slurm.partition' (an executor's flag) -> {'slurm': {'partition': ...}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        head, dot, rest = key.partition(".")
        if dot:
            out.setdefault(head, {})[rest] = value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def take(values: Any, sections: Found, source: str, own: list[str]) -> Any:
    """`values` less the executors' sections, which go to `sections`; a key that moved into one
    (compare.slurm_partition, compare.detach) is named where it went."""
    if not isinstance(values, dict):
        return values
    rest = {}
    for key, value in values.items():
        kind = registry.EXECUTORS.get(str(key))
        if kind is not None and kind.settings is not None:
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{source}: compare.{key}: expected a mapping of --executor {key}'s settings, got {short_repr(value)}"
                )
            sections[key] = ({**sections.get(key, ({}, ""))[0], **value}, source)
            continue
        for k in registry.with_settings():
            names = [f.name for f in fields(k.settings)]
            moved = str(key)[len(k.name) + 1 :] if str(key).startswith(k.name + "_") else str(key)
            if moved in names and str(key) not in own:
                raise ConfigError(f"{source}: compare.{key} is compare.{k.name}.{moved} now")
        rest[key] = value
    return rest


def chosen(executor: str, sections: Found) -> Any:
    """The chosen executor's section, read; another's, given, is a mistake."""
    for name, (values, source) in sections.items():
        if name != executor and values:
            declared = {f.name: f for f in fields(registry.kind(name).settings)}
            first = next(iter(values))
            flag = flag_of(declared[first]) if first in declared else ""
            what = flag.split()[0] if flag and source == "command line" else f"compare.{name}"
            raise ConfigError(f"{what} needs --executor {name}")
    kind = registry.kind(executor)
    if kind.settings is None:
        return None
    values, source = sections.get(executor, ({}, "defaults"))
    section = kind.read(values, source)
    check_section(section, f"compare.{executor}.")
    return section

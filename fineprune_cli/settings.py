"""Settings declared once: each field carries its default, help, flag and check.

A settings section is a dataclass whose fields come from `option(...)`. The same declaration
fills it from YAML (`apply_mapping`), checks it (`check_section`) and gives the CLI its flags
(fineprune_cli.cli reads `field.metadata`). Unknown keys are errors; every failure is a
`ConfigError` (a ValueError) with one line that names the setting.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import reprlib
import typing
from typing import Any, Callable, Collection

from .errors import ConfigError

Check = Callable[[Any], "str | None"]  # returns what is wrong, or None


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    check: Check | None = None,
    flag: str | None = None,
    choices: Collection[str] | None = None,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A settings field. `flag`: the CLI flag ('' = none; default --key-with-dashes);
    `choices`: the allowed strings; `check(value)`: a message when the value is wrong."""
    metadata = {"help": help, "check": check, "flag": flag, "choices": choices}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def fields(section: Any) -> list[dataclasses.Field]:
    """The settings of a section (a field marked `section`, another section held inside it, is none)."""
    return [f for f in dataclasses.fields(section) if not f.metadata.get("section")]


def flag_of(f: dataclasses.Field) -> str:
    flag = f.metadata.get("flag")
    return ("--" + f.name.replace("_", "-")) if flag is None else flag


def flag_name(f: dataclasses.Field, prefix: str = "") -> str:
    """How an error names the field: its main flag, or section.key when it has none."""
    flag = flag_of(f)
    return flag.split()[0].split("/")[0] if flag else prefix + f.name


@functools.lru_cache(maxsize=None)  # get_type_hints evaluates every annotation: 2 s a report of 97 runs
def _hints(section_type: type) -> dict[str, Any]:
    return typing.get_type_hints(section_type)


def type_of(section_type: type, name: str) -> Any:
    return _hints(section_type)[name]


# --- value checks, shared by the fields that need them --------------------------------------


def positive(value: Any) -> str | None:
    return None if value > 0 else "must be positive"


def between(low: int, high: int) -> Check:
    """Whole numbers in [low, high]: a bound on every count, so no input asks for unbounded work."""
    return lambda v: None if low <= v <= high else f"must be between {low:,} and {high:,}"


def at_least(low: float) -> Check:
    return lambda v: None if v >= low else f"must be >= {low:g}"


def in_range(low: float, high: float, closed_high: bool = False) -> Check:
    def check(v: Any) -> str | None:
        ok = low <= v <= high if closed_high else low <= v < high
        return None if ok else f"must be in [{low:g}, {high:g}{']' if closed_high else ')'}"

    return check


def optional(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


# --- filling and checking ----------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check a YAML or flag value against a field's type (YAML already gives native types)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return coerce(value, inner, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {short_repr(value)}")
        return [coerce(v, args[0], where) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {short_repr(value)}")
        return {str(k): v for k, v in value.items()}
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if annotation is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigError(f"{where}: must be a finite number, got {value}")
        return float(value)
    if annotation is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(f"{where}: expected {_type_name(annotation)}, got {short_repr(value)}")


_REPR = reprlib.Repr()  # keyword arguments only from Python 3.12
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 4, 4, 60, 60


def short_repr(value: Any, limit: int = 80) -> str:
    """A value for an error line: bounded work and length whatever the value (a YAML alias
    bomb expands to billions of elements; a full repr() of it would never end)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def apply_values(section: Any, values: Any, source: str, name: str) -> None:
    """Set fields of section `name` from a mapping; unknown keys are errors."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: section '{name}' must be a mapping")
    names = [f.name for f in fields(section)]
    for key, value in values.items():
        if key not in names:
            raise ConfigError(f"{source}: unknown key '{name}.{str(key)[:40]}' (valid: {', '.join(names)})")
        setattr(section, key, coerce(value, type_of(type(section), key), f"{source}: {name}.{key}"))


def check_section(section: Any, prefix: str) -> None:
    """Each field's own check; cross-field checks live in the section's `check()` method."""
    for f in fields(section):
        value = getattr(section, f.name)
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{flag_name(f, prefix)} must be one of: {', '.join(choices)}; got {short_repr(value)}")
        check = f.metadata.get("check")
        problem = check(value) if check is not None else None
        if problem:
            raise ConfigError(f"{flag_name(f, prefix)} {problem}, got {short_repr(value)}")
    extra = getattr(section, "check", None)
    if callable(extra):
        extra()

"""CLI flags generated from the settings' declarations, so each is declared once.

`with_settings(...)` appends one option per chosen settings field to a Typer command and
hands the command `settings`: {'section.key': value or None (not given)}. `--set
section.key=value` reaches every field, flagged or not.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Annotated, Any, Callable, Optional

import typer

from ..drivers.executors import registry
from ..engine.setup.yamlvalues import setting_value
from ..errors import ConfigError
from ..settings import fields, flag_of, type_of

Spec = tuple[str, type, tuple[str, ...]]  # (section name, settings class, field names; () = all flagged)


def _parser(annotation: Any, flag: str) -> tuple[Any, Callable[[Any], Any]]:
    """The type Typer parses and how its value becomes the field's value."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    inner = (
        args[0]
        if typing.get_origin(annotation) is typing.Union
        or str(typing.get_origin(annotation)) == "<class 'types.UnionType'>"
        else annotation
    )
    if typing.get_origin(inner) is list:
        item = typing.get_args(inner)[0]

        def parse(text: str) -> list[Any]:
            try:
                # '' is the empty list (no milestones); an empty item ('1,,2') is a typo
                return [item(part.strip()) for part in text.split(",")] if text.strip() else []
            except ValueError:
                kind = {"int": "integers", "float": "numbers"}.get(item.__name__, "values")
                raise ConfigError(f"{flag} must be comma-separated {kind}, got '{text}'") from None

        return str, parse
    return inner, lambda value: value


REQUIRED = " \\[required: this flag or {key} in --config]"  # \\[: a bracket, not rich markup


def with_settings(*specs: Spec, required: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`required`: the fields ('section.key') a command cannot run without; their help says so
    (not click's required=True: the --config file may give them instead)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        extra, parsers = [], {}
        for section, cls, names in specs:
            for f in fields(cls):
                flag = flag_of(f)
                if not flag or (names and f.name not in names):
                    continue
                cli_type, parse = _parser(type_of(cls, f.name), flag.split()[0])
                name = f"{section}__{f.name}".replace(".", "__")  # compare.slurm: a Python name
                dotted = f"{section}.{f.name}"
                mark = REQUIRED.format(key=dotted) if dotted in required else ""
                # \[: a bracket is rich markup in help ('fineprune[tensorboard]' printed as 'fineprune')
                option = typer.Option(*flag.split(), help=f.metadata["help"].replace("[", "\\[") + mark)
                extra.append(
                    inspect.Parameter(
                        name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=None,
                        annotation=Annotated[Optional[cli_type], option],
                    )
                )
                parsers[name] = (dotted, parse)
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "settings"]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            settings = {}
            for name, (dotted, parse) in parsers.items():
                value = kwargs.pop(name)
                settings[dotted] = None if value is None else parse(value)
            return fn(settings=settings, **kwargs)

        command.__signature__ = inspect.Signature(own + extra)  # type: ignore[attr-defined]
        command.__annotations__ = {}
        del command.__wrapped__  # Typer must read the new signature, not fn's
        return command

    return deco


SetOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set", help="Any setting as section.key=value (YAML value), e.g. --set train.momentum=0.8; repeatable."
    ),
]


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set section.key=value pairs; the value is read as YAML (numbers as Python reads them,
    lists, true/false); a value YAML would cut at a comment or read as another number is refused."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if sep and key.startswith(mappings()) and key.count(".") == 2:  # compare.slurm.mem_gb=32
            mapping, _, name = key.rpartition(".")
            out.setdefault(mapping, {})[name] = setting_value(key, text)
            continue
        if not sep or key.count(".") != 1:
            raise ConfigError(f"--set takes section.key=value, got '{item}'")
        out[key] = setting_value(key, text)
    return out


def mappings() -> tuple[str, ...]:
    """The sections inside a section, an executor's own (compare.slurm): --set section.key.name=value fills one name."""
    return tuple(f"compare.{kind.name}." for kind in registry.with_settings())

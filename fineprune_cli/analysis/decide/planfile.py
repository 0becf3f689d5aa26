"""plan.json read strictly: a plan is what a report's error rate rests on, so a file that is not
one (looks [0, -5], a margin of -1, seeds repeated, a key no version wrote) is refused in one
line naming it, never judged by. Keys written by earlier versions may be missing: a plan without
its family, seeds or allocation was recorded before those existed, and reads as it did then; one
without its shape or failure threshold is judged by this version's (`plan.Plan.unrecorded`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ...errors import ConfigError
from ...settings import short_repr
from .judging import EARLIER_ALLOCATION, FIELDS

KEYS = ("judging", "looks", "seeds", "family", "variance", "recorded", "runs_before", "note")
JUDGING = ("margin", "min_gain", "alpha", "family", "allocation", "shape", "failure")  # Judging.decisive()
LATER = ("shape", "failure")  # judging keys added by issue 56: a plan recorded before has neither
FAMILY = ("policies", "models", "datasets")


def checked(data: Any, where: str) -> dict[str, Any]:
    """The plan's fields, each checked (defaults for those an earlier version did not write);
    ConfigError '<where>: not a judging plan: ...' naming the first that is wrong."""
    try:
        fields = _mapping(data, KEYS, "the plan")
        return {
            "judging": _judging(fields.get("judging")),
            "looks": _looks(fields.get("looks", [])),
            "seeds": _seeds(fields.get("seeds") or []),
            "family": _family(fields.get("family")),
            "variance": _text(fields, "variance", None),
            "recorded": _text(fields, "recorded", ""),
            "runs_before": _count(fields.get("runs_before", 0)),
            "note": _text(fields, "note", ""),
        }
    except ConfigError as exc:
        raise ConfigError(f"{where}: not a judging plan: {exc}") from None


def _mapping(data: Any, keys: tuple[str, ...], what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must be a JSON object, got {short_repr(data)}")
    unknown = [str(k) for k in data if k not in keys]
    if unknown:
        raise ConfigError(f"unknown key '{unknown[0][:40]}' in {what} (valid: {', '.join(keys)})")
    return data


def _judging(data: Any) -> dict[str, Any]:
    """m, δ, alpha, the correction and the allocation, each within what `Judging` allows."""
    judging = dict(_mapping(data, JUDGING, "judging"))
    missing = [k for k in JUDGING[:4] if k not in judging]
    if missing:
        raise ConfigError(f"judging lacks {', '.join(missing)}")
    judging.setdefault("allocation", EARLIER_ALLOCATION)  # recorded before allocations were named
    for key, value in judging.items():
        f = FIELDS[key]
        if key in ("margin", "min_gain", "alpha", "failure"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            problem = None if ok else "must be a finite number"
            problem = problem or f.metadata["check"](value)
        else:
            problem = None if value in f.metadata["choices"] else f"must be one of: {', '.join(f.metadata['choices'])}"
        if problem:
            raise ConfigError(f"judging.{key} {problem}, got {short_repr(value)}")
    return judging


def _integers(value: Any, key: str, ok: Callable[[list[int]], bool], rule: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        raise ConfigError(f"{key} must be a list of whole numbers, got {short_repr(value)}")
    if not ok(value):
        raise ConfigError(f"{key} {rule}, got {short_repr(value)}")
    return value


def _looks(value: Any) -> list[int]:
    rising = lambda ns: all(n >= 2 for n in ns) and all(a < b for a, b in zip(ns, ns[1:]))  # noqa: E731
    return _integers(value, "looks", rising, "must rise, each at least 2 seeds (a paired t needs two)")


def _seeds(value: Any) -> list[int]:
    distinct = lambda ns: all(n >= 0 for n in ns) and len(set(ns)) == len(ns)  # noqa: E731
    return _integers(value, "seeds", distinct, "must be distinct and not negative")


def _family(data: Any) -> dict[str, list[str]] | None:
    """None: a plan recorded before plans held their family. The policies may be none (a compare
    of baselines only decides nothing); the models and datasets are named."""
    if data is None:
        return None
    family = _mapping(data, FAMILY, "family")
    for key in FAMILY:
        names = family.get(key)
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"family.{key} must be a list of names, got {short_repr(names)}")
        if key != "policies" and not names:
            raise ConfigError(f"family.{key} names none")
    return {key: list(family[key]) for key in FAMILY}


def _text(fields: dict[str, Any], key: str, default: str | None) -> str | None:
    value = fields.get(key, default)
    if value is not default and not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, got {short_repr(value)}")
    return value


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"runs_before must be a whole number of runs, got {short_repr(value)}")
    return value

"""How a report judges: the judging plan's settings, declared once, and the family correction.

`Judging` is an experiment file's `judging:` section and the judging flags of `compare` and
`report` (`--margin`, `--min-gain`, `--alpha`, `--family`, `--target`). The correction that
holds the report's family-wise error is one entry of `FAMILIES`, each variance model one of
`VARIANCES` and each shape one of `SHAPES` (`procedures.py`; each entry a module of its own in
`families/`, `variances/`, `shapes/`): their arithmetic and the words a report and the flags'
help print for them, so no sentence names one on its own.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...engine.setup.config import load_yaml
from ...errors import ConfigError
from ...settings import check_section, coerce, fields, flag_name, in_range, option, optional, type_of
from .procedures import (
    DEFAULT_FAMILY,
    DEFAULT_SHAPE,
    DEFAULT_VARIANCE,
    FAMILIES,
    SHAPES,
    VARIANCES,
    Correction,
    ShapeModel,
    VarianceModel,
)

POINTS = 100.0  # accuracy points: no margin, gain or target beyond the whole scale


def variance_key(name: str) -> str | None:
    """The `--variance` value of the model a plan names by its label (None: no such model in this version)."""
    return next((key for key, model in VARIANCES.items() if model.label == name), None)


@dataclass(frozen=True)
class Allocation:
    """How a policy's alpha / k is split over the planned looks: `shares` maps the looks' seed
    counts to each look's part (positive, summing to 1, fixed by the plan before any run), so
    the union bound over looks still sums to alpha / k per policy."""

    name: str
    description: str  # for --allocation's help and the report's sentence
    shares: Callable[[tuple[int, ...]], tuple[float, ...]]


def _proportional(power: float) -> Callable[[tuple[int, ...]], tuple[float, ...]]:
    def shares(looks: tuple[int, ...]) -> tuple[float, ...]:
        weights = [float(n) ** power for n in looks]
        return tuple(w / sum(weights) for w in weights)

    return shares


DEFAULT_FAILURE = 1.0  # points below its arm's median: what counts as a failed run, if also an outlier
EARLIER_FAILURE = 0.0  # before issue 56 no run was set aside

DEFAULT_ALLOCATION = "late"
ALLOCATIONS = {
    # a look of 3 seeds has 2 df: what it spends there buys few decisions, and the same alpha
    # at the last look buys many (docs/decisions.md has the power table measured for each)
    DEFAULT_ALLOCATION: Allocation("late", "each look's part in proportion to its seeds cubed", _proportional(3.0)),
    "equal": Allocation("equal", "the same part at every look", _proportional(0.0)),
}
EARLIER_ALLOCATION = "equal"  # what a plan recorded before allocations were named was judged by


def shares(judging: "Judging", looks: tuple[int, ...]) -> tuple[float, ...]:
    """Each planned look's part of a policy's alpha / k ((1.0,) without planned looks)."""
    return ALLOCATIONS[judging.allocation].shares(looks) if looks else (1.0,)


def _allocations_help() -> str:
    listed = "; ".join(f"{key} ({a.description})" for key, a in ALLOCATIONS.items())
    return f"How each policy's alpha / policies is split over planned --looks: {listed}. (default {DEFAULT_ALLOCATION})"


def _points(low: float, closed_low: bool) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = (low <= v if closed_low else low < v) and v <= POINTS and math.isfinite(v)
        return None if ok else f"must be a number of accuracy points in {'[' if closed_low else '('}{low:g}, 100]"

    return check


@dataclass(frozen=True)
class Judging:
    """The judging plan's settings (the margin m, the minimum gain δ, the family-wise error and
    its correction), and the time-to-accuracy target, which describes and decides nothing."""

    margin: float = option(
        0.3,
        check=_points(0.0, closed_low=False),
        help="The margin m in accuracy points: 'worth it' needs the policy shown not worse than "
        "regular by more than m; 'not worth it' follows from worse by m or more. (default 0.3)",
    )
    min_gain: float | None = option(
        None,
        check=optional(_points(0.0, closed_low=True)),
        help="The minimum gain δ over the cheap alternative (points): a policy shown not to beat "
        "it by more than δ is 'not worth it'. (default: the margin)",
    )
    alpha: float = option(
        0.05,
        check=in_range(0.0001, 0.5, closed_high=True),
        help="The chance of any wrong 'worth it' or 'not worth it' in the report (over all planned looks). (default 0.05)",
    )
    family: str = option(
        DEFAULT_FAMILY, choices=FAMILIES, help=FAMILIES.help("How the family of policies shares alpha")
    )
    allocation: str = option(DEFAULT_ALLOCATION, choices=tuple(ALLOCATIONS), help=_allocations_help())
    variance: str = option(
        DEFAULT_VARIANCE, choices=VARIANCES, help=VARIANCES.help("How each comparison's standard error is found")
    )
    shape: str = option(
        DEFAULT_SHAPE,
        choices=SHAPES,
        help=SHAPES.help("The shape of the per-seed differences each test holds its level for"),
    )
    failure: float = option(
        DEFAULT_FAILURE,
        check=_points(0.0, closed_low=True),
        help="A run that ends more than this many points below its arm's median, and is an outlier of "
        "its arm (Rosner's test at 1%), failed: it is set aside from the comparisons it enters and "
        "named, and a policy that failed more runs than regular or C(p) is not called worth it. "
        f"0 turns the rule off. (default {DEFAULT_FAILURE:g})",
    )
    target: float | None = option(
        None,
        check=optional(_points(0.0, closed_low=False)),
        help="Test accuracy (%) for time-to-accuracy, which describes and decides nothing. "
        "(default: regular's mean final accuracy − 0.5 pt, per model and dataset)",
    )

    @property
    def gain(self) -> float:
        return self.margin if self.min_gain is None else self.min_gain

    @property
    def correction(self) -> Correction:
        return FAMILIES[self.family]

    @property
    def variance_model(self) -> VarianceModel:
        return VARIANCES[self.variance]

    @property
    def shape_model(self) -> ShapeModel:
        return SHAPES[self.shape]

    def decisive(self) -> dict[str, Any]:
        """The settings that change a decision (the target does not), as a plan records them."""
        return {
            "margin": self.margin,
            "min_gain": self.gain,
            "alpha": self.alpha,
            "family": self.family,
            "allocation": self.allocation,
            "shape": self.shape,
            "failure": self.failure,
        }


SECTION = "judging"
FIELDS = {f.name: f for f in fields(Judging)}
NAMES = tuple(FIELDS)


def load_judging(config_file: str | Path | None, overrides: dict[str, Any], base: Judging | None = None) -> Judging:
    """`base` (default: the defaults), then the experiment file's `judging` section, then the
    flags ('judging.key' -> value; None = not given); checked, unknown keys refused."""
    values: dict[str, Any] = {}
    if config_file is not None:
        section = load_yaml(config_file).get(SECTION) or {}
        values.update(_read(section, str(config_file)))
    values.update(_read({k.split(".", 1)[1]: v for k, v in overrides.items() if v is not None}, "command line"))
    judging = dataclasses.replace(base or Judging(), **values)
    check_section(judging, SECTION + ".")
    return judging


def _read(section: Any, source: str) -> dict[str, Any]:
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: section '{SECTION}' must be a mapping")
    out = {}
    for key, value in section.items():
        if key not in NAMES:
            raise ConfigError(f"{source}: unknown key '{SECTION}.{str(key)[:40]}' (valid: {', '.join(NAMES)})")
        where = flag_name(FIELDS[key]) if source == "command line" else f"{source}: {SECTION}.{key}"
        out[key] = coerce(value, type_of(Judging, key), where)
    return out

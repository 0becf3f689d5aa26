"""How a report judges: the judging plan's settings, declared once, and the family correction.

`Judging` is an experiment file's `judging:` section and the judging flags of `compare` and
`report` (`--margin`, `--min-gain`, `--alpha`, `--family`, `--target`). The correction that
holds the report's family-wise error is one entry of `FAMILIES`: its arithmetic and the words a
report and `--family`'s help print for it, so no sentence names it on its own; `register_family`
adds one (a module of its own, or a test's).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from ...engine.setup.config import load_yaml
from ...errors import ConfigError
from ...settings import check_section, coerce, fields, flag_name, in_range, optional, option, type_of

T = TypeVar("T")
POINTS = 100.0  # accuracy points: no margin, gain or target beyond the whole scale


@dataclass(frozen=True)
class Claim:
    """One claim a report tests (a policy's *worth it* or *not worth it*): its raw p-value, the
    part of its policy's alpha / k that its look spends (1 at a single look) and its look (1-based;
    0 outside planned looks)."""

    p: float
    share: float = 1.0
    look: int = 0


@dataclass(frozen=True)
class Correction:
    """A family procedure: its name as reports print it, the sentence a report says it in, what
    `--family`'s help says of it, the adjusted p-values of a look's claims given all of them at
    once (two per policy, k policies in the family: so a step-down or a spending rule fits), each
    compared with alpha, and the level each policy's claims are tested at (the bounds a decision
    prints). A single policy's what-if (its word at another minimum gain) hands it its own two
    claims."""

    name: str
    rule: str  # the sentence that says how, with {policies}, {looks_text} and {level} filled in
    description: str  # a few words for the help: how each policy's share of alpha is found
    adjust: Callable[[Sequence[Claim], int], list[float]]
    level: Callable[[float, int, float], float]  # (alpha, k, share) -> a


class Registry(dict[str, T]):
    """Entries by the value a setting takes. As a setting's choices it is read when checked, so an
    entry registered later (a test's, a plug-in's) is a valid value."""

    def register(self, key: str, entry: T) -> T:
        self[key] = entry
        return entry


def _bonferroni(claims: Sequence[Claim], k: int) -> list[float]:
    return [min(1.0, c.p * k / c.share) for c in claims]


DEFAULT_FAMILY = "bonferroni"  # the correction a plan uses unless --family names another
FAMILIES: Registry[Correction] = Registry()
register_family = FAMILIES.register  # a value of --family (and of a plan's judging.family)


register_family(
    DEFAULT_FAMILY,
    Correction(
        "Bonferroni",
        "Bonferroni over {policies}{looks_text}: each policy's claims are tested at {level}",
        "each policy's claims at alpha / policies, split over the planned looks by --allocation",
        _bonferroni,
        lambda alpha, k, share: alpha * share / k,
    ),
)


@dataclass(frozen=True)
class VarianceModel:
    """How a comparison's standard error is found from its per-seed paired differences: the name
    plans and reports print, a few words for `--variance`'s help, and the estimate (a
    paired.Paired, points per test image) -> stats.Estimate, or None where there is too little
    spread to judge by."""

    name: str
    description: str
    estimate: Callable[[Any, float], Any]


def _own_paired_t(comparison: Any, quantum: float) -> Any:
    from .stats import paired_estimate  # scipy loads when a report decides, not for --help

    return paired_estimate(comparison.values(), quantum)


DEFAULT_VARIANCE = "paired"
VARIANCES: Registry[VarianceModel] = Registry()
register_variance = VARIANCES.register  # a value of --variance; a plan records the model's name


register_variance(
    DEFAULT_VARIANCE,
    VarianceModel(
        "own paired t",
        "each comparison's own spread over the seeds it pairs, n - 1 df: no arm assumed as noisy as another",
        _own_paired_t,
    ),
)


@dataclass(frozen=True)
class ShapeModel:
    """The shape of the per-seed differences a decision's one-sided tests hold their level for:
    the name plans and reports print, a few words for `--shape`'s help, the condition a report
    states beside its error rate, and the reference its tests read (a stats.Shape, loaded when a
    report decides)."""

    name: str
    description: str
    condition: str
    reference: Callable[[], Any]


def _student() -> Any:
    from .stats import STUDENT

    return STUDENT


def _skewed() -> Any:
    from .shape import SKEWED

    return SKEWED


DEFAULT_SHAPE = "skewed"
EARLIER_SHAPE = "normal"  # what decisions were judged by before issue 56: Student's t
SHAPES: Registry[ShapeModel] = Registry()
register_shape = SHAPES.register  # a value of --shape; a plan records the key
register_shape(
    DEFAULT_SHAPE,
    ShapeModel(
        "skew-robust t",
        "critical values that hold when the differences are skewed toward a test's tail by up to 0.71 "
        "(the worst of five unimodal shapes), never below Student's",
        "each comparison's per-seed differences normal or skewed by up to 0.71 toward a test's tail "
        "(unimodal: gamma, lognormal, inverse Gaussian, skew-normal or Weibull, alone or less a normal arm)",
        _skewed,
    ),
)
register_shape(
    EARLIER_SHAPE,
    ShapeModel(
        "Student's t",
        "Student's t: holds for normal differences only (the rule before issue 56)",
        "each comparison's per-seed differences normal",
        _student,
    ),
)


def variance_key(name: str) -> str | None:
    """The `--variance` value of the model a plan names (None: no such model in this version)."""
    return next((key for key, model in VARIANCES.items() if model.name == name), None)


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


def _families_help() -> str:
    """`--family`'s help, from the entries of FAMILIES: a new correction is listed by adding it."""
    listed = "; ".join(f"{key} ({c.description})" for key, c in FAMILIES.items())
    return f"How the family of policies shares alpha: {listed}. (default {DEFAULT_FAMILY})"


def _variances_help() -> str:
    listed = "; ".join(f"{key} ({m.description})" for key, m in VARIANCES.items())
    return f"How each comparison's standard error is found: {listed}. (default {DEFAULT_VARIANCE})"


def _shapes_help() -> str:
    listed = "; ".join(f"{key} ({m.description})" for key, m in SHAPES.items())
    return f"The shape of the per-seed differences each test holds its level for: {listed}. (default {DEFAULT_SHAPE})"


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
    family: str = option(DEFAULT_FAMILY, choices=FAMILIES, help=_families_help())
    allocation: str = option(DEFAULT_ALLOCATION, choices=tuple(ALLOCATIONS), help=_allocations_help())
    variance: str = option(DEFAULT_VARIANCE, choices=VARIANCES, help=_variances_help())
    shape: str = option(DEFAULT_SHAPE, choices=SHAPES, help=_shapes_help())
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

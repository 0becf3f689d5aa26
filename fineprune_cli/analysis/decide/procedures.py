"""The three registries of how a report judges, and their entries' types: the family procedure
that holds the report's family-wise error (`FAMILIES`, `--family`), the variance model of each
comparison's standard error (`VARIANCES`, `--variance`) and the shape of the differences each
test holds its level for (`SHAPES`, `--shape`).

Each entry is one module of its folder (`families/`, `variances/`, `shapes/`), found on the first
lookup (`fineprune_cli.registry`). This module imports none of them, and they import only this
one, so `judging.py`, which lists them in its settings' help, imports no entry and no entry
imports it: no cycle, whichever is imported first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...registry import Registry

DEFAULT_FAMILY = "bonferroni"  # the correction a plan uses unless --family names another
DEFAULT_VARIANCE = "paired"
DEFAULT_SHAPE = "skewed"
EARLIER_SHAPE = "normal"  # what decisions were judged by before issue 56: Student's t


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
    """A family procedure: its `name` (the value of `--family`), its `label` as reports print it,
    what `--family`'s help says of it, the sentence a report says it in, the adjusted p-values of a
    look's claims given all of them at once (two per policy, k policies in the family: so a
    step-down or a spending rule fits), each compared with alpha, and the level each policy's
    claims are tested at (the bounds a decision prints). A single policy's what-if (its word at
    another minimum gain) hands it its own two claims."""

    name: str
    label: str
    help: str  # a few words: how each policy's share of alpha is found
    rule: str  # the sentence that says how, with {policies}, {looks_text} and {level} filled in
    adjust: Callable[[Sequence[Claim], int], list[float]]
    level: Callable[[float, int, float], float]  # (alpha, k, share) -> a


@dataclass(frozen=True)
class VarianceModel:
    """How a comparison's standard error is found from its per-seed paired differences: its
    `name` (the value of `--variance`), its `label` as plans record it and reports print it, a few
    words for the help, and the estimate (a paired.Paired, points per test image) ->
    stats.Estimate, or None where there is too little spread to judge by."""

    name: str
    label: str
    help: str
    estimate: Callable[[Any, float], Any]


@dataclass(frozen=True)
class ShapeModel:
    """The shape of the per-seed differences a decision's one-sided tests hold their level for:
    its `name` (the value of `--shape`, recorded in plans), its `label` as reports print it, a few
    words for the help, the condition a report states beside its error rate, and the reference
    its tests read (a stats.Shape, loaded when a report decides)."""

    name: str
    label: str
    help: str
    condition: str
    reference: Callable[[], Any]


FAMILIES: Registry[Correction] = Registry(__package__ + ".families", DEFAULT_FAMILY)
VARIANCES: Registry[VarianceModel] = Registry(__package__ + ".variances", DEFAULT_VARIANCE)
SHAPES: Registry[ShapeModel] = Registry(__package__ + ".shapes", DEFAULT_SHAPE)
register_family = FAMILIES.register  # a value of --family (and of a plan's judging.family)
register_variance = VARIANCES.register  # a value of --variance; a plan records the model's label
register_shape = SHAPES.register  # a value of --shape; a plan records the name

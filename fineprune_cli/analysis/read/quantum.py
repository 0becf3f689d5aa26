"""The test set's grid: points per test image (100 / its size), read off the accuracies the runs
recorded. A read-stage fact about the run folders, so that grouping (each row's time-to-accuracy
target lies on this grid) and deciding (a difference below one image is no difference) both
read it from below."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache, reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # runs.py imports torch; the grid needs only the recorded accuracies
    from .runs import Run

DEFAULT_QUANTUM = 0.01  # points per test image when the test set's size is unknown (10,000 images)


def quantum(runs: list[Run]) -> float:
    """Points per test image: 100 / the test set's size, read off the accuracies the runs
    recorded (the finest grid they all lie on); DEFAULT_QUANTUM when they do not tell."""
    values = {r.test_accuracy for run in runs for r in run.metrics}  # each distinct value read once
    denominators = [_denominator(v) for v in values]
    if not denominators:
        return DEFAULT_QUANTUM
    size = reduce(math.lcm, denominators)
    return 100.0 / size if size <= 1_000_000 else DEFAULT_QUANTUM


@lru_cache(maxsize=65536)  # a report's looks, and a simulation's reports, read the same values again
def _denominator(accuracy: float) -> int:
    return Fraction(accuracy / 100).limit_denominator(100_000).denominator


def quantum_of(by_policy: dict[str, dict[int, Run]]) -> float:
    return quantum([run for seeds in by_policy.values() for run in seeds.values()])

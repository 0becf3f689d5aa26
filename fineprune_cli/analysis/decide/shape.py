"""The skew-robust reference of a decision's one-sided tests (`--shape skewed`, the default).

A one-sided t test on a few per-seed differences rejects more often than its level when the
differences are skewed toward its tail: the samples that miss the long tail have a small mean
and a small spread together, so their t runs far out. At skewness 0.71, 8 seeds and a level of
0.001 a gamma-shaped difference is rejected 3.4 times as often as the level says, a Weibull-shaped
one 4.3 times (results/decisions/shape.md). So each test here reads its p-value and its critical value off the t statistic of
n draws from the worst of five unimodal right-skewed families with skewness 0.71 (gamma,
lognormal, inverse Gaussian, skew-normal, Weibull), level by level, never below Student's t:
its level then holds for normal differences and for differences skewed up to 0.71 toward the
tail it tests in any of those shapes, or the difference of such an arm and a normal one. It does
not hold for every shape of that skewness: a difference that jumps by a fixed amount in a third
of the seeds (a two-point mixture) is a failure, which the failure rule sets aside
(`analysis.group.failures`). The table is `experiments/decisions/shape.py`'s simulation
(`shape_reference.json`); between its seed counts the quantiles are interpolated in 1 / sqrt(n),
below its smallest level extrapolated along the last decade's slope in log |t| against log level.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ..group.failures import outliers
from .stats import STUDENT, Shape, t_quantile

TABLE = "shape_reference.json"


@lru_cache(maxsize=1)
def _table() -> tuple[float, tuple[int, ...], tuple[float, ...], tuple[tuple[float, ...], ...]]:
    data = json.loads(resources.files(__package__).joinpath(TABLE).read_text())
    logs = tuple(math.log(a) for a in data["levels"])
    return float(data["skew"]), tuple(data["sizes"]), logs, tuple(tuple(q) for q in data["quantiles"])


@lru_cache(maxsize=512)
def _row(n: int) -> tuple[float, ...]:
    """The reference's lower quantiles at the table's levels for `n` seeds (negative numbers)."""
    _, sizes, logs, quantiles = _table()
    if n >= sizes[-1]:  # beyond the table, its last row in proportion to Student's quantiles
        last = sizes[-1]
        return tuple(q * _ratio(math.exp(lg), n, last) for q, lg in zip(quantiles[-1], logs))
    if n in sizes:
        return quantiles[sizes.index(n)]
    j = bisect.bisect(sizes, n)
    n0, n1 = sizes[j - 1], sizes[j]
    w = (n**-0.5 - n0**-0.5) / (n1**-0.5 - n0**-0.5)
    return tuple((1 - w) * a + w * b for a, b in zip(quantiles[j - 1], quantiles[j]))


def _ratio(a: float, n: int, last: int) -> float:
    """Student's lower quantile at `a` for n seeds over that for `last` (1 at the median)."""
    there = t_quantile(a, last - 1)
    return t_quantile(a, n - 1) / there if abs(there) > 1e-9 else 1.0


def _critical(a: float, n: int, df: float) -> float:
    student = t_quantile(1 - a, df)
    if n < 2 or a >= 0.5:
        return student
    _, _, logs, _ = _table()
    row, la = _row(n), math.log(a)
    if la < logs[0]:  # below the table: along the last decade's slope in log |t| against log a
        k = _decade(logs)
        slope = (math.log(-row[0]) - math.log(-row[k])) / (logs[0] - logs[k])
        ref = -math.exp(math.log(-row[0]) + slope * (la - logs[0]))
    else:
        i = min(bisect.bisect(logs, la), len(logs) - 1)
        w = (la - logs[i - 1]) / (logs[i] - logs[i - 1])
        ref = (1 - w) * row[i - 1] + w * row[i]
    return max(student, -ref)


def _tail(t: float, n: int, df: float) -> float:
    student = STUDENT.tail(t, n, df)
    if n < 2 or t >= 0:
        return student
    _, _, logs, _ = _table()
    row = _row(n)
    if t < row[0]:
        k = _decade(logs)
        slope = (math.log(-row[0]) - math.log(-row[k])) / (logs[0] - logs[k])
        ref = math.exp(logs[0] + (math.log(-t) - math.log(-row[0])) / slope)
    elif t >= row[-1]:
        return student
    else:
        i = bisect.bisect(row, t)
        w = (t - row[i - 1]) / (row[i] - row[i - 1])
        ref = math.exp((1 - w) * logs[i - 1] + w * logs[i])
    return max(student, ref)


def _decade(logs: tuple[float, ...]) -> int:
    """The index one decade of levels above the table's smallest."""
    return next(i for i, lg in enumerate(logs) if lg >= logs[0] + math.log(10))


def skew() -> float:
    """The skewness toward a test's tail that the reference holds for."""
    return _table()[0]


SKEWED = Shape("skewed", _tail, _critical)


@dataclass(frozen=True)
class Measured:
    """The shape the study's own differences show: their pooled skewness (each comparison's
    adjusted sample skewness G1, weighted by its precision under normal differences) with its
    standard error were they normal and the comparisons independent, and the differences that
    are outliers of their comparison (Rosner's generalized ESD test at 1%, either side)."""

    comparisons: int
    differences: int
    skewness: float
    se: float
    outlying: tuple[tuple[str, int, float], ...]  # (comparison, seed, difference)


def measured(named: list[tuple[str, list[tuple[int, float]]]]) -> Measured | None:
    """The shape of the comparisons `named` ((name, [(seed, difference)])), those of 3 seeds or
    more; None when there are none."""
    weights, values, count, outlying = [], [], 0, []
    for name, pairs in named:
        n = len(pairs)
        if n < 3:
            continue
        diffs = [d for _, d in pairs]
        g = _g1(diffs)
        if g is None:
            continue
        w = (n - 2) * (n + 1) * (n + 3) / (6 * n * (n - 1))  # 1 / var(G1) for normal data
        weights.append(w)
        values.append(g)
        count += n
        outlying += [(name, pairs[i][0], pairs[i][1]) for i in outliers(diffs, side=0)]
    if not weights:
        return None
    pooled = sum(w * g for w, g in zip(weights, values)) / sum(weights)
    return Measured(len(weights), count, pooled, 1 / math.sqrt(sum(weights)), tuple(outlying))


def _g1(xs: list[float]) -> float | None:
    """The adjusted Fisher-Pearson sample skewness (scipy's, bias-corrected); None without spread."""
    n = len(xs)
    mean = math.fsum(xs) / n
    m2 = math.fsum((x - mean) ** 2 for x in xs) / n
    if m2 <= 1e-12:
        return None
    m3 = math.fsum((x - mean) ** 3 for x in xs) / n
    return math.sqrt(n * (n - 1)) / (n - 2) * m3 / m2**1.5

"""Paired statistics over seeds: a 95% interval for a mean difference, and the word it earns.

Pure numbers, no runs: `analysis.paired` supplies the per-seed differences. The Student t
quantiles are a small table (scipy is not a dependency); between two tabled degrees of
freedom the smaller one's quantile is used, so an interval is never narrower than it should be.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from itertools import combinations_with_replacement

# two-sided 95%: the 0.975 quantile of Student's t by degrees of freedom
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
Z975 = 1.960
BOOTSTRAP_MIN_SEEDS = 5   # below this a bootstrap has too few distinct resamples to mean anything
EXACT_BOOTSTRAP_MAX = 10  # up to here every resample is enumerated: no random numbers, exact
MAX_SEEDS_ESTIMATE = 200

BETTER, WORSE, EQUIVALENT, UNRESOLVED = "better", "worse", "equivalent", "unresolved"


def t975(df: int) -> float:
    if df < 1:
        raise ValueError("a t interval needs at least one degree of freedom (two seeds)")
    return T975[max(k for k in T975 if k <= df)] if df <= max(T975) else Z975


@dataclass(frozen=True)
class Interval:
    """Mean of paired differences with its 95% t interval; the percentile bootstrap's as well
    when there are enough seeds (else None)."""
    n: int
    mean: float
    std: float
    low: float
    high: float
    boot: tuple[float, float] | None = None

    def fmt(self, digits: int = 2, signed: bool = True) -> str:
        """'+0.11 [-1.93, +2.16]': a difference is signed (an unsigned 0.11 read as a mean)."""
        return f"{self.mean:{'+' if signed else ''}.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def interval(values: list[float]) -> Interval | None:
    """None for fewer than two values: one seed has no spread, so no interval."""
    n = len(values)
    if n < 2:
        return None
    mean, std = statistics.fmean(values), statistics.stdev(values)
    half = t975(n - 1) * std / math.sqrt(n)
    boot = bootstrap(values) if n >= BOOTSTRAP_MIN_SEEDS else None
    return Interval(n, mean, std, mean - half, mean + half, boot)


def bootstrap(values: list[float]) -> tuple[float, float]:
    """Percentile bootstrap of the mean: the 2.5% and 97.5% points of the means of resamples
    with replacement. Small samples enumerate every resample (each multiset with its
    multinomial weight); larger ones draw 20,000 with a fixed seed, so a report is repeatable."""
    n = len(values)
    if n <= EXACT_BOOTSTRAP_MAX:
        weighted = [(statistics.fmean(pick), _multinomial(pick, n))
                    for pick in combinations_with_replacement(sorted(values), n)]
    else:
        rng = random.Random(0)
        weighted = [(statistics.fmean(rng.choices(values, k=n)), 1) for _ in range(20_000)]
    return _percentile(weighted, 0.025), _percentile(weighted, 0.975)


def _multinomial(pick: tuple[float, ...], n: int) -> int:
    ways = math.factorial(n)
    for value in set(pick):
        ways //= math.factorial(pick.count(value))
    return ways


def _percentile(weighted: list[tuple[float, int]], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total."""
    weighted = sorted(weighted)
    total, seen = sum(w for _, w in weighted), 0
    for value, w in weighted:
        seen += w
        if seen >= q * total - 1e-9 * total:
            return value
    return weighted[-1][0]


def word(iv: Interval, margin: float) -> str:
    """'better'/'worse' when the interval excludes 0; 'equivalent' when it lies inside ±margin;
    else 'unresolved'."""
    if iv.low > 0:
        return BETTER
    if iv.high < 0:
        return WORSE
    return EQUIVALENT if within(iv, margin) else UNRESOLVED


def within(iv: Interval, margin: float) -> bool:
    return -margin <= iv.low and iv.high <= margin


def seeds_needed(mean: float, std: float, margin: float) -> int | None:
    """Seeds at which an interval with this mean and paired std would earn a word other than
    'unresolved' (exclude 0, or fit inside ±margin); None beyond MAX_SEEDS_ESTIMATE."""
    for n in range(2, MAX_SEEDS_ESTIMATE + 1):
        half = t975(n - 1) * std / math.sqrt(n)
        if half < abs(mean) or half <= margin - abs(mean):
            return n
    return None

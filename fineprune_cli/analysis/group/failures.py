"""Failed runs, by the rule a plan fixes (`judging.failure`): neither averaged in nor dropped
silently.

A mean over a few seeds cannot see a failure it did not sample, and one it did sample drags it
and widens it: an arm that ends 3 points low one run in ten made the rule before issue 56 wrong
about the mean in 36-72% of simulated reports where it could be, and no rule can hold the mean
there (in 43% of 8-seed samples no failure shows, and those samples look like an arm 0.3 points
better; results/decisions/simulation.md). So a
decision's claims are about the runs that did not fail, and the failures are counted beside them.

A run *failed* when both hold, among its arm's runs at the look (its context, the look's seeds):
- it ended more than `drop` points below the arm's median final accuracy (the size a plan calls a
  failure), and
- it is a low outlier of its arm by Rosner's generalized ESD test, one-sided at LEVEL: so an arm's
  ordinary noise is not a failure, however noisy the arm (a drop of 1 pt is noise where runs
  spread by 1 pt, and a failure where they spread by 0.1).
The test looks for up to a third of the arm's runs (at least one), so two failures do not hide
each other. Three runs are the fewest it can judge.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from ..read.runs import Run
from .paired import Paired

LEVEL = 0.01  # the chance that an arm of normal runs has any run called an outlier


@dataclass(frozen=True)
class Failure:
    arm: str
    seed: int
    below: float  # points below its arm's median


def outliers(values: list[float], level: float = LEVEL, side: int = -1) -> list[int]:
    """The indices of `values` that Rosner's generalized ESD test calls outliers at `level`:
    low ones (`side` -1), high ones (+1), or either (0). Up to a third of them (at least one) is
    tested; with fewer than three values none is."""
    n = len(values)
    if n < 3:
        return []
    from scipy import special  # loaded when a report decides, not for --help

    most = max(1, n // 3)
    left = list(range(n))
    removed: list[int] = []
    found = 0
    for i in range(1, most + 1):
        if len(left) < 3:
            break
        xs = [values[j] for j in left]
        mean = statistics.fmean(xs)
        away = [(side * (values[j] - mean) if side else abs(values[j] - mean), j) for j in left]
        gap, worst = max(away)
        m = len(left)
        t = float(special.stdtrit(m - 2, 1 - (level if side else level / 2) / m))
        critical = (m - 1) * t / math.sqrt((m - 2 + t * t) * m)
        if gap > 0 and _beyond(gap, xs, mean, critical):
            found = i
        removed.append(worst)
        left.remove(worst)
    return removed[:found]


def _beyond(gap: float, xs: list[float], mean: float, critical: float) -> bool:
    """gap / sd > critical, sd the sample sd of xs (none: beyond). statistics.stdev's is exact
    (in fractions) and costs 40 times the float one, which is within a few units in the last
    place of it unless the spread is near zero: the exact one decides only that case, or a ratio
    within a billionth of the critical value."""
    sd = math.sqrt(math.fsum([(x - mean) ** 2 for x in xs]) / (len(xs) - 1))
    if sd > 1e-9 * max(abs(x) for x in xs) and abs(gap / sd - critical) > 1e-9 * critical:
        return gap / sd > critical
    sd = statistics.stdev(xs)
    return sd == 0 or gap / sd > critical


def failed(by: dict[str, dict[int, Run]], drop: float, level: float = LEVEL) -> list[Failure]:
    """Every run of these arms (arm -> seed -> run) that failed: more than `drop` points below
    its arm's median and a low outlier of its arm. `drop` 0: the rule is off, none failed."""
    if drop <= 0:
        return []
    out = []
    for arm, runs in by.items():
        seeds = sorted(runs)
        values = [runs[s].summary.final_accuracy for s in seeds]
        if len(values) < 3:
            continue
        median = statistics.median(values)
        if median - min(values) <= drop:  # no run is low enough to fail, outlier or not: no test to run
            continue
        for i in sorted(outliers(values, level)):
            if median - values[i] > drop:
                out.append(Failure(arm, seeds[i], median - values[i]))
    return out


def set_aside(p: Paired, failures: list[Failure]) -> Paired:
    """`p` without the seeds where the policy or an arm it was read from failed, each named with
    why in its `left_out` (a seed set aside is not missing: its runs are there, and said)."""
    arms = {p.policy, *p.arms}
    why: dict[int, list[str]] = {}
    for f in failures:
        if f.arm in arms and f.seed in p.diffs:
            why.setdefault(f.seed, []).append(f"{f.arm} failed, {f.below:.2f} pt below its arm's median")
    if not why:
        return p
    return replace(
        p,
        diffs={s: v for s, v in p.diffs.items() if s not in why},
        norms={s: v for s, v in p.norms.items() if s not in why},
        left_out={**p.left_out, **{s: "; ".join(w) for s, w in why.items()}},
    )


def of_arms(failures: list[Failure], arms: tuple[str, ...] | list[str]) -> list[Failure]:
    return [f for f in failures if f.arm in arms]


def seeds_failed(failures: list[Failure], arms: tuple[str, ...] | list[str]) -> set[int]:
    """The seeds in which any of `arms` failed (a line read from two arms fails where either does)."""
    return {f.seed for f in failures if f.arm in arms}

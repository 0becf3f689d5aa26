"""Per-seed differences of a policy's final accuracy: against regular, and against random
pruning at its own budget, each from runs of the same seed.

"Random at its own budget" is the equal-budget `random` control (the same epochs as the
fine-pruning schedule it mirrors) for a policy whose schedule it copies, and the random
frontier (random pruning in every epoch at several budgets, read linearly between the two
arms that bracket the policy's budget in that seed) for every policy the frontier reaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..drivers.compare import frontier_fraction
from . import stats
from .runs import Run

CONTROL = "random"          # the equal-budget control arm of `compare`
MIRRORED = "fine"           # the schedule whose epochs the control prunes
SAME_BUDGET = 0.05          # points of budget within which a frontier arm counts as "at" it


def final(run: Run) -> float:
    return run.summary.final_accuracy


def best3(run: Run) -> float:
    return run.summary.best3_accuracy


def skipped_pct(run: Run) -> float:
    s = run.summary
    return 100.0 * s.samples_skipped / (s.epochs * s.num_train)


@dataclass(frozen=True)
class Paired:
    """Per-seed differences against one baseline, and what that baseline is."""
    against: str
    diffs: dict[int, float]

    @property
    def interval(self) -> stats.Interval | None:
        return stats.interval([self.diffs[s] for s in sorted(self.diffs)])

    @property
    def mean(self) -> float | None:
        return sum(self.diffs.values()) / len(self.diffs) if self.diffs else None


def word_for(p: Paired, margin: float) -> str:
    """The verdict word of a comparison; one seed earns none."""
    iv = p.interval
    if iv is None:
        return "no interval (1 seed)" if p.diffs else "—"
    return stats.word(iv, margin)


def vs_regular(by_policy: dict[str, dict[int, Run]], policy: str, metric=final) -> Paired:
    """Empty for regular itself: a zero against itself is no finding."""
    regular = by_policy.get("regular", {}) if policy != "regular" else {}
    mine = by_policy.get(policy, {})
    return Paired("regular", {s: metric(mine[s]) - metric(regular[s]) for s in sorted(mine) if s in regular})


def vs_random(by_policy: dict[str, dict[int, Run]], policy: str) -> list[Paired]:
    """The comparisons with random pruning at the policy's budget that the runs allow."""
    if policy in (CONTROL, "regular") or frontier_fraction(policy) is not None:
        return []
    mine = by_policy.get(policy, {})
    out = []
    control = by_policy.get(CONTROL, {})
    if policy == MIRRORED and control:
        out.append(Paired("the random control at the same budget",
                          {s: final(mine[s]) - final(control[s]) for s in sorted(mine) if s in control}))
    frontier = {}
    for seed in sorted(mine):
        at = frontier_at(by_policy, seed, skipped_pct(mine[seed]))
        if at is not None:
            frontier[seed] = final(mine[seed]) - at
    if frontier:
        out.append(Paired("random pruning in every epoch at the same budget", frontier))
    return out


def frontier_at(by_policy: dict[str, dict[int, Run]], seed: int, budget: float) -> float | None:
    """Seed `seed`'s random-frontier accuracy at `budget` (% of sample-epochs skipped): a lone
    arm at that budget, or the line between the two arms that bracket it; None outside."""
    points = sorted((skipped_pct(arms[seed]), final(arms[seed])) for p, arms in by_policy.items()
                    if frontier_fraction(p) is not None and seed in arms)
    for x, y in points:
        if abs(x - budget) < SAME_BUDGET:
            return y
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= budget <= x1:
            return y0 + (y1 - y0) * (budget - x0) / (x1 - x0) if x1 > x0 else y0
    return None

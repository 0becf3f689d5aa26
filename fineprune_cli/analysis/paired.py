"""Per-seed differences of a policy's final accuracy: against regular, against random pruning
at its own budget, and against training less at its own budget, each from runs of the same seed.

"Random at its own budget" is the equal-budget `random` control (the same epochs as the
fine-pruning schedule it mirrors) for a policy whose schedule it copies, and the random
frontier (random pruning in every epoch at several budgets, read linearly between the two
arms that bracket the policy's budget in that seed) for every policy the frontier reaches.
"Training less at its own budget" is the shorter-schedule frontier (regular training with
fewer epochs, `shorter-30`), read the same way. A policy's budget is the share of the regular
schedule's sample-epochs it did not train, so a shorter arm's is the share of epochs it left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..drivers.compare import shorter_budget
from . import stats
from .groups import REGULAR, is_frontier, is_shorter
from .runs import Run, arm_of

CONTROL = "random"          # the equal-budget control arm of `compare`
MIRRORED = "fine"           # the schedule whose epochs the control prunes
SAME_BUDGET = 0.05          # points of budget within which a frontier arm counts as "at" it


def final(run: Run) -> float:
    return run.summary.final_accuracy


def best3(run: Run) -> float:
    return run.summary.best3_accuracy


def skipped_pct(run: Run) -> float:
    """Share of the run's own sample-epochs left out."""
    s = run.summary
    return 100.0 * s.samples_skipped / (s.epochs * s.num_train)


def budget(by_policy: dict[str, dict[int, Run]], run: Run) -> float:
    """Share (%) of the regular schedule's sample-epochs the run did not train: its skipped
    samples, and for a shorter schedule the epochs it left out (against regular's epochs)."""
    s = run.summary
    full = max((r.summary.epochs for r in by_policy.get(REGULAR, {}).values()), default=None)
    if full is None:   # no regular to measure against: a shorter arm's name says its budget
        b = shorter_budget(run.summary.arm or "")
        return 100.0 * b if b is not None else skipped_pct(run)
    return 100.0 * (1 - (s.epochs * s.num_train - s.samples_skipped) / (full * s.num_train))


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
    regular = by_policy.get(REGULAR, {}) if policy != REGULAR else {}
    mine = by_policy.get(policy, {})
    return Paired("regular", {s: metric(mine[s]) - metric(regular[s]) for s in sorted(mine) if s in regular})


def vs_random(by_policy: dict[str, dict[int, Run]], policy: str) -> list[Paired]:
    """The comparisons with random pruning at the policy's budget that the runs allow."""
    if _is_baseline(policy) or arm_of(policy) == CONTROL:
        return []
    mine = by_policy.get(policy, {})
    out = []
    control = by_policy.get(CONTROL + policy[len(MIRRORED):], {})   # the control of the same variant
    if arm_of(policy) == MIRRORED and control:
        out.append(Paired("the random control at the same budget",
                          {s: final(mine[s]) - final(control[s]) for s in sorted(mine) if s in control}))
    frontier = _against_line(by_policy, policy, is_frontier)
    if frontier:
        out.append(Paired(RANDOM_LINE, frontier))
    return out


RANDOM_LINE = "random pruning in every epoch at the same budget"
SHORTER_LINE = "training fewer epochs at the same budget"


def vs_shorter(by_policy: dict[str, dict[int, Run]], policy: str) -> list[Paired]:
    """The comparison with the shorter-schedule frontier at the policy's budget, if it reaches."""
    if _is_baseline(policy):
        return []
    diffs = _against_line(by_policy, policy, is_shorter)
    return [Paired(SHORTER_LINE, diffs)] if diffs else []


def vs_controls(by_policy: dict[str, dict[int, Run]], policy: str) -> list[Paired]:
    """Every control a policy meets at its own budget: random pruning, then training less."""
    return vs_random(by_policy, policy) + vs_shorter(by_policy, policy)


def _is_baseline(policy: str) -> bool:
    """Regular and the frontiers' own arms: they are what the others are judged against."""
    return policy == REGULAR or is_frontier(policy) or is_shorter(policy)


def _against_line(by_policy: dict[str, dict[int, Run]], policy: str, on_line) -> dict[int, float]:
    mine = by_policy.get(policy, {})
    diffs = {}
    for seed in sorted(mine):
        at = line_at(by_policy, seed, budget(by_policy, mine[seed]), on_line)
        if at is not None:
            diffs[seed] = final(mine[seed]) - at
    return diffs


def frontier_at(by_policy: dict[str, dict[int, Run]], seed: int, budget_pct: float) -> float | None:
    """Seed `seed`'s random-frontier accuracy at `budget_pct`."""
    return line_at(by_policy, seed, budget_pct, is_frontier)


def line_at(by_policy: dict[str, dict[int, Run]], seed: int, at: float, on_line) -> float | None:
    """Seed `seed`'s accuracy on a frontier (the arms `on_line` picks) at budget `at` (%): a lone
    arm at that budget, or the line between the two arms that bracket it; None outside."""
    points = sorted((budget(by_policy, arms[seed]), final(arms[seed])) for p, arms in by_policy.items()
                    if on_line(p) and seed in arms)
    for x, y in points:
        if abs(x - at) < SAME_BUDGET:
            return y
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= at <= x1:
            return y0 + (y1 - y0) * (at - x0) / (x1 - x0) if x1 > x0 else y0
    return None

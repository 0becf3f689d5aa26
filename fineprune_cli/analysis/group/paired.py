"""Per-seed differences of a policy's final accuracy: against regular, against random pruning
at its own budget, and against training less at its own budget, each from runs of the same seed.

"Random at its own budget" is the equal-budget `random` control (the same epochs as the
fine-pruning schedule it mirrors) for a policy whose schedule it copies, and the random
frontier (random pruning in every epoch at several budgets) for every policy the frontier
reaches. "Training less at its own budget" is the shorter-schedule frontier (regular training
with fewer epochs, `shorter-30`). A policy's budget is the share of the regular schedule's
sample-epochs it did not train, so a shorter arm's is the share of epochs it left out.

A line is read at the policy's mean budget through the same arms in every seed: the arm at
that budget, or the two arms that bracket it (chosen by their mean budgets), interpolated in
each seed. A seed that lacks one of them is left out and named, never read off other arms.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ...arms import REGULAR, shorter_budget
from ..read.runs import Run, arm_of
from .groups import is_frontier, is_shorter

CONTROL = "random"  # the equal-budget control arm of `compare`
MIRRORED = "fine"  # the schedule whose epochs the control prunes
SAME_BUDGET = 0.05  # points of budget within which a frontier arm counts as "at" it

RANDOM_LINE = "random pruning in every epoch at the same budget"
SHORTER_LINE = "training fewer epochs at the same budget"
THE_CONTROL = "the random control at the same budget"


def final(run: Run) -> float:
    return run.summary.final_accuracy


def best3(run: Run) -> float:
    return run.summary.best3_accuracy


def own_skipped_pct(run: Run) -> float:
    """Share of the run's own sample-epochs left out (not against regular's schedule)."""
    s = run.summary
    return 100.0 * s.samples_skipped / (s.epochs * s.num_train)


Schedule = tuple[int, float] | None  # regular's epochs and samples an epoch of it trained; None: no regular


def schedule(by_policy: dict[str, dict[int, Run]]) -> Schedule:
    """Regular's schedule, which every run's budget is measured against: read once per arm and
    line rather than once per run (a simulated report measures thousands)."""
    regular = list(by_policy.get(REGULAR, {}).values())
    if not regular:
        return None
    full = max(r.summary.epochs for r in regular)
    # samples_seen 0: recorded before it was (every sample trained then)
    per_epoch = max((r.summary.samples_seen / r.summary.epochs for r in regular if r.summary.samples_seen), default=0)
    return full, per_epoch


def budget(by_policy: dict[str, dict[int, Run]], run: Run) -> float:
    """Share (%) of the regular schedule's sample-epochs the run did not train: its skipped
    samples, and for a shorter schedule the epochs it left out (against regular's epochs). An
    epoch of regular's is what its runs trained in one: a loader with drop_last (timm's) trains
    up to a batch less one of the training set in every epoch, every arm alike, and that is no
    one's pruning."""
    return budget_in(schedule(by_policy), run)


def budget_in(regular: Schedule, run: Run) -> float:
    """`budget` against regular's schedule read once (`schedule`)."""
    s = run.summary
    if regular is None:  # no regular to measure against: a shorter arm's name says its budget
        b = shorter_budget(run.summary.arm or "")
        return 100.0 * b if b is not None else own_skipped_pct(run)
    full, per_epoch = regular
    return 100.0 * (1 - (s.epochs * s.num_train - s.samples_skipped) / (full * (per_epoch or s.num_train)))


def mean_budget(by_policy: dict[str, dict[int, Run]], policy: str) -> float:
    return Budgets(by_policy).mean(policy)


class Budgets:
    """Each arm's mean budget in one context (`mean_budget`), read once: a decision reads every
    line's for each policy it judges."""

    def __init__(self, by_policy: dict[str, dict[int, Run]]) -> None:
        self.by_policy = by_policy
        self.regular = schedule(by_policy)
        self._means: dict[str, float] = {}

    def mean(self, arm: str) -> float:
        if arm not in self._means:
            runs = self.by_policy.get(arm, {}).values()
            self._means[arm] = statistics.fmean([budget_in(self.regular, r) for r in runs]) if runs else float("nan")
        return self._means[arm]


@dataclass(frozen=True)
class Paired:
    """Per-seed differences against one baseline: what it is, the arms it was read from, each
    seed's contrast norm (sum of squared coefficients: 2 for a plain difference), and the seeds
    one side lacks, with why."""

    against: str
    diffs: dict[int, float]
    norms: dict[int, float] = field(default_factory=dict)
    left_out: dict[int, str] = field(default_factory=dict)
    arms: tuple[str, ...] = ()
    policy: str = ""

    @property
    def seeds(self) -> list[int]:
        return sorted(self.diffs)

    def values(self) -> list[float]:
        return [self.diffs[s] for s in self.seeds]

    def norm_values(self) -> list[float]:
        return [self.norms.get(s, 2.0) for s in self.seeds]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.diffs.values()) if self.diffs else None


@dataclass(frozen=True)
class Miss:
    """A line that exists but cannot be read at the policy's budget, and why."""

    against: str
    reason: str


def _left_out(mine: dict[int, Run], others: dict[str, dict[int, Run]]) -> dict[int, str]:
    if all(v.keys() == mine.keys() for v in others.values()):  # the usual case: every arm has every seed
        return {}
    seeds = set(mine).union(*[set(v) for v in others.values()])
    out = {}
    for s in sorted(seeds):
        lacking = ([] if s in mine else ["this arm"]) + [a for a, v in others.items() if s not in v]
        if lacking:
            out[s] = "no run of " + " or ".join(lacking)
    return out


def vs_regular(by_policy: dict[str, dict[int, Run]], policy: str, metric=final) -> Paired:
    """Empty for regular itself: a zero against itself is no finding."""
    regular = by_policy.get(REGULAR, {}) if policy != REGULAR else {}
    mine = by_policy.get(policy, {})
    both = [s for s in sorted(mine) if s in regular]
    return Paired(
        REGULAR,
        {s: metric(mine[s]) - metric(regular[s]) for s in both},
        {s: 2.0 for s in both},
        _left_out(mine, {REGULAR: regular}) if regular else {},
        (REGULAR,),
        policy,
    )


def is_baseline(policy: str) -> bool:
    """Regular, the control and the frontiers' own arms: what the others are judged against."""
    return policy == REGULAR or arm_of(policy) == CONTROL or is_frontier(policy) or is_shorter(policy)


def vs_control(by_policy: dict[str, dict[int, Run]], policy: str) -> Paired | None:
    """Fine-pruning (or a variant) against the random control of the same variant."""
    if arm_of(policy) != MIRRORED:
        return None
    name = CONTROL + policy[len(MIRRORED) :]
    control, mine = by_policy.get(name, {}), by_policy.get(policy, {})
    if not control:
        return None
    both = [s for s in sorted(mine) if s in control]
    return Paired(
        THE_CONTROL,
        {s: final(mine[s]) - final(control[s]) for s in both},
        {s: 2.0 for s in both},
        _left_out(mine, {name: control}),
        (name,),
        policy,
    )


def vs_line(
    by_policy: dict[str, dict[int, Run]], policy: str, on_line, budgets: Budgets | None = None
) -> Paired | Miss | None:
    """The policy against a frontier (the arms `on_line` picks) at its mean budget; None when
    the runs hold no such line, a Miss when the line does not reach that budget. `budgets`: the
    context's, when read already."""
    against = SHORTER_LINE if on_line is is_shorter else RANDOM_LINE
    line = {p: seeds for p, seeds in by_policy.items() if on_line(p) and seeds}
    mine = by_policy.get(policy, {})
    if not line or not mine:
        return None
    budgets = budgets or Budgets(by_policy)
    regular = budgets.regular
    at = budgets.mean(policy)
    where = {p: budgets.mean(p) for p in line}
    arms = _bracket(where, at)
    if arms is None:
        reach = ", ".join(f"{where[p]:.1f}%" for p in sorted(line, key=where.__getitem__))
        return Miss(against, f"its arms are at {reach}, none at or beyond {at:.1f}% on both sides")
    diffs, norms = {}, {}
    for s in sorted(mine):
        if all(s in line[a] for a in arms):
            y, k = _read(regular, [line[a][s] for a in arms], budget_in(regular, mine[s]))
            diffs[s], norms[s] = final(mine[s]) - y, 1.0 + k
    return Paired(against, diffs, norms, _left_out(mine, {a: line[a] for a in arms}), arms, policy)


def _bracket(where: dict[str, float], at: float) -> tuple[str, ...] | None:
    near = [p for p in where if abs(where[p] - at) < SAME_BUDGET]
    if near:
        return (min(near, key=lambda p: abs(where[p] - at)),)
    below = [p for p in where if where[p] < at]
    above = [p for p in where if where[p] > at]
    if not below or not above:
        return None
    return max(below, key=where.__getitem__), min(above, key=where.__getitem__)


def _read(regular: Schedule, runs: list[Run], at: float) -> tuple[float, float]:
    """A seed's line value at budget `at`, and the squared norm of its coefficients."""
    if len(runs) == 1:
        return final(runs[0]), 1.0
    (x0, y0), (x1, y1) = [(budget_in(regular, r), final(r)) for r in runs]
    w = min(1.0, max(0.0, (at - x0) / (x1 - x0))) if x1 > x0 else 0.0
    return y0 + w * (y1 - y0), (1 - w) ** 2 + w**2


def vs_controls(by_policy: dict[str, dict[int, Run]], policy: str) -> list[Paired]:
    """Every control a policy meets at its own budget that the runs allow: the random control,
    the random frontier, then training less."""
    if is_baseline(policy):
        return []
    return usable(
        [vs_control(by_policy, policy), vs_line(by_policy, policy, is_frontier), vs_line(by_policy, policy, is_shorter)]
    )


def usable(found: list[Paired | Miss | None]) -> list[Paired]:
    """The comparisons with seeds to compare, in their order."""
    return [p for p in found if isinstance(p, Paired) and p.diffs]

"""Time to accuracy, made once per report by `analysis.study` and read by Table 3, summary.csv's
tta columns and runs.csv: each context's test-set quantum and its target on it (`target_for`),
and each row's runs at that target (`Reach`: where each first reached it, `timing.time_to_accuracy`).

Below `study` so that it can make them; `render` (summary.csv's rows and the tables) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..read.quantum import quantum_of
from ..read.runs import Run
from . import timing
from .groups import Context, Groups

TARGET_BELOW = 0.5

Quanta = dict[Context, float]
Targets = dict[Context, float | None]  # None: no target (no --target and no regular runs)


def target_for(by_policy: dict[str, dict[int, Run]], target: float | None, quantum: float) -> float | None:
    """The time-to-accuracy target on the test set's `quantum`: --target, else regular's mean
    final accuracy minus TARGET_BELOW (a float sum such as 73.34000000000002 would miss 73.34)."""
    if target is not None:
        return timing.on_grid(target, quantum)
    return timing.default_target(by_policy, TARGET_BELOW, quantum)


@dataclass(frozen=True)
class Reach:
    """A row's runs at its context's target, by seed in order: the first epoch at it with the
    sample-epochs and seconds spent to it, None for a run that never reached it (censored) and
    for every run of a context without a target."""

    by_seed: dict[int, timing.Reached | None]

    def reached(self) -> dict[int, timing.Reached]:
        return {s: x for s, x in self.by_seed.items() if x is not None}


def row_reach(seeds: dict[int, Run], target: float | None, quantum: float) -> Reach:
    if target is None:
        return Reach(dict.fromkeys(sorted(seeds)))
    return Reach({s: timing.time_to_accuracy(seeds[s], target, quantum) for s in sorted(seeds)})


Reaches = dict[tuple[Context, str], Reach]  # by (context, row name), the rows present only


def reaching(groups: Groups, target: float | None) -> tuple[Quanta, Targets, Reaches]:
    """Each context's quantum and target, and each row's reach: every run once."""
    quanta = {c: quantum_of(by) for c, by in groups.items()}
    targets = {c: target_for(by, target, quanta[c]) for c, by in groups.items()}
    reaches = {(c, p): row_reach(seeds, targets[c], quanta[c]) for c, by in groups.items() for p, seeds in by.items()}
    return quanta, targets, reaches

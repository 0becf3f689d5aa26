"""Predicted time saving (Section 4.4, Formulas 2-7) and the epoch timeline (Figure 3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .schedule import PruneSchedule, formula_n_prune, last_pruning_epoch


@dataclass
class Estimate:
    epochs: int
    pruning_epochs: list[int]
    n_prune: int  # counted by running the schedule
    n_prune_formula: int  # Formulas 3/4 as printed
    formula_agrees: bool
    prune_fraction: float
    epoch_seconds: float  # T * b: one full epoch
    time_unit: str  # "seconds" or "epochs" (when no time was given)
    overhead_per_pruning_epoch: float  # t_0
    t_regular: float
    t_prune: float
    t_save: float
    saving_percent: float

    def to_dict(self) -> dict:
        return asdict(self)


def estimate(
    schedule: PruneSchedule,
    epochs: int,
    prune_fraction: float,
    epoch_seconds: float | None = None,
    overhead: float = 0.0,
    anneal: float | None = None,
) -> Estimate:
    """t_regular = n T b (F2); a pruning epoch runs (1 - f) of the batches (F5);
    t_prune = sum of epoch times + n_prune t_0 (F6); t_save = t_regular - t_prune (F7).
    `anneal` (--anneal δ): no pruning epoch after floor(δ·n), which the formulas ignore."""
    pruning = schedule.pruning_epochs(epochs, last_pruning_epoch(anneal, epochs)) if prune_fraction > 0 else []
    formula = formula_n_prune(epochs, schedule.window, schedule.start, schedule.block, schedule.count)
    return from_epochs(pruning, epochs, prune_fraction, epoch_seconds, overhead, formula)


def from_epochs(
    pruning: list[int],
    epochs: int,
    prune_fraction: float,
    epoch_seconds: float | None = None,
    overhead: float = 0.0,
    n_prune_formula: int | None = None,
) -> Estimate:
    """Formulas 2 and 5-7 for given pruning epochs: a schedule's, or those a run measured (a
    dynamic policy's budget is only known after a run; then `prune_fraction` is the share it
    left out of its pruning epochs on average)."""
    n_prune = len(pruning)
    formula = n_prune if n_prune_formula is None else n_prune_formula
    unit = "seconds" if epoch_seconds is not None else "epochs"
    t_epoch = 1.0 if epoch_seconds is None else epoch_seconds
    t_regular = epochs * t_epoch
    t_prune = (epochs - n_prune) * t_epoch + n_prune * (1 - prune_fraction) * t_epoch + n_prune * overhead
    t_save = t_regular - t_prune
    return Estimate(
        epochs,
        pruning,
        n_prune,
        formula,
        formula == n_prune,
        prune_fraction,
        t_epoch,
        unit,
        overhead,
        t_regular,
        t_prune,
        t_save,
        100.0 * t_save / t_regular,
    )


def timeline(schedule: PruneSchedule, epochs: int) -> list[tuple[int, int, str]]:
    """One entry per window: (first epoch, last epoch, marks), '#' pruning, '.' regular."""
    rows = []
    first = 1
    while first <= epochs:
        last = min((schedule.window_index(first) + 1) * schedule.window - 1, epochs)
        marks = "".join("#" if schedule.prunes(e) else "." for e in range(first, last + 1))
        rows.append((first, last, marks))
        first = last + 1
    return rows

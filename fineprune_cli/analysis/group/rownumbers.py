"""A row's numbers and paired comparisons, made once per report by `analysis.study` and read
by every renderer: `RowNumbers`, its figures over its seeds (summary.csv's columns, the tables'
cells, the verdict's regular accuracy), and `Compared`, its comparisons against regular and,
for a policy, against the controls at its own budget (`analysis.group.paired`).

Below `study` so that it can make them; `numbers` (summary.csv) sits above it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields

from ..read.runs import Run
from . import paired, timing
from .groups import is_frontier, is_shorter

NA = "—"  # no value: a row without runs, a number no run gave


@dataclass
class Stat:
    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else float("nan")

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    def fmt(self, digits: int = 2, unit: str = "") -> str:
        if not self.values:
            return NA
        text = f"{self.mean:.{digits}f}"
        if len(self.values) > 1:
            text += f" ± {self.std:.{digits}f}"
        return text + unit


@dataclass(frozen=True)
class Compared:
    """A row's paired comparisons: final and best-3 accuracy against regular, and for a policy
    (not a baseline) the random control, the random frontier and training fewer epochs at its
    budget: None where the runs hold no such control, a Miss where a line does not reach."""

    regular: paired.Paired
    regular_best3: paired.Paired
    control: paired.Paired | None = None
    frontier: paired.Paired | paired.Miss | None = None
    shorter: paired.Paired | paired.Miss | None = None

    def controls(self) -> list[paired.Paired]:
        """Those with seeds to compare, in `paired.vs_controls`' order."""
        return paired.usable([self.control, self.frontier, self.shorter])


def compared(by_policy: dict[str, dict[int, Run]], policy: str) -> Compared:
    lines = not paired.is_baseline(policy)  # a baseline is what the others meet, not judged on a line
    return Compared(
        paired.vs_regular(by_policy, policy),
        paired.vs_regular(by_policy, policy, paired.best3),
        paired.vs_control(by_policy, policy),
        paired.vs_line(by_policy, policy, is_frontier) if lines else None,
        paired.vs_line(by_policy, policy, is_shorter) if lines else None,
    )


@dataclass(frozen=True)
class RowNumbers:
    """A row's figures over its seeds, in summary.csv's column order (each as _mean and _std),
    then the seeds whose time was not compared with regular's, and why (not a column)."""

    train_s: Stat
    pruned_s: Stat  # training time less the pruning overhead
    overhead_s: Stat
    budget_pct: Stat  # the budget: % of regular's sample-epochs not trained (`paired.budget`)
    final_acc: Stat
    best3_acc: Stat
    saved_pct: Stat  # time saved against regular of the same seed, same machine only
    pace_saved_pct: Stat  # time saved against the run's own full-epoch pace
    epoch_ratio: Stat
    sample_epochs: Stat
    steps: Stat
    d_final: Stat  # final accuracy minus regular's, per seed
    d_best3: Stat
    clock_saved_pct: Stat  # saved_pct of the whole run as its user's clock saw it, test passes included
    cpu_saved_pct: Stat  # saved_pct in the process's CPU seconds, which other work does not stretch
    not_timed: tuple[timing.LeftOut, ...] = ()

    def columns(self) -> dict[str, Stat]:
        """Each figure under its summary.csv name."""
        return {
            CSV_NAMES.get(f.name, f.name): value
            for f in fields(self)
            if isinstance(value := getattr(self, f.name), Stat)
        }


# the budget's column in summary.csv keeps the name committed reports and their readers use
CSV_NAMES = {"budget_pct": "skipped_pct"}


def _median_epoch(run: Run, pruned: bool) -> float:
    times = [r.train_seconds for r in run.metrics if bool(r.pruned) == pruned and r.epoch > 1]
    median = statistics.median(times) if times else 0.0
    return median if median > 0 else float("nan")  # no such epochs, or too short to time


def pace_saving(run: Run) -> float:
    """Time saved against the run's own full-epoch pace: 1 - (sum of epoch times) / (n x median
    unpruned epoch; epoch 1 left out, it pays for warm-up). Separate runs on a shared machine
    drift apart by more than a 10% saving; this compares times measured in the same run."""
    total = sum(r.train_seconds for r in run.metrics)
    return 100.0 * (1.0 - total / (len(run.metrics) * _median_epoch(run, pruned=False)))


def epoch_ratio(run: Run) -> float:
    """Median pruned epoch over median full epoch of the same run (ideal: 1 - prune fraction)."""
    return _median_epoch(run, pruned=True) / _median_epoch(run, pruned=False)


def _finite(values: list[float]) -> Stat:
    return Stat([v for v in values if math.isfinite(v)])


def row_numbers(by_policy: dict[str, dict[int, Run]], policy: str, vs: Compared) -> RowNumbers:
    """The row's figures; its accuracy changes are those of `vs`, the row's comparisons."""
    runs = [by_policy[policy][s] for s in sorted(by_policy.get(policy, {}))]
    s = [r.summary for r in runs]
    saved, not_timed = timing.savings(by_policy, policy)
    clock, _ = timing.savings(by_policy, policy, timing.clock_seconds)
    cpu, _ = timing.savings(by_policy, policy, timing.cpu_seconds)
    return RowNumbers(
        train_s=Stat([x.train_seconds for x in s]),
        pruned_s=Stat([x.train_seconds - x.overhead_seconds for x in s]),
        overhead_s=Stat([x.overhead_seconds for x in s]),
        budget_pct=Stat([paired.budget(by_policy, r) for r in runs]),
        final_acc=Stat([x.final_accuracy for x in s]),
        best3_acc=Stat([x.best3_accuracy for x in s]),
        saved_pct=Stat(list(saved.values())),
        pace_saved_pct=_finite([pace_saving(r) for r in runs]),
        epoch_ratio=_finite([epoch_ratio(r) for r in runs]),
        sample_epochs=Stat([timing.sample_epochs(r) for r in runs]),
        steps=Stat([float(timing.optimizer_steps(r)) for r in runs]),
        d_final=Stat(list(vs.regular.diffs.values())),
        d_best3=Stat(list(vs.regular_best3.diffs.values())),
        clock_saved_pct=Stat(list(clock.values())),
        cpu_saved_pct=Stat(list(cpu.values())),
        not_timed=tuple(not_timed),
    )

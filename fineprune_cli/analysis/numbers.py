"""The numbers of a report's rows, computed once: `RowNumbers` per row, which the tables format,
the verdict quotes and summary.csv writes (`summary_rows`, unrounded until the file rounds once).

Savings and accuracy changes are paired: each pruned run is compared with the regular run of the
same model, dataset and seed. Final-accuracy changes carry a descriptive 90% interval on their own
paired spread, and each scored policy its decision with the bounds that decision tests
(`analysis.decision`, computed once by `analysis.study`); time saved is averaged only over pairs
whose wall times compare (`analysis.timing`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields
from typing import Any

from . import decision, paired, timing
from .advice import DELTAS
from .decision import quantum_of
from .groups import is_frontier, is_shorter, row_name
from .judging import Judging
from .runs import Run
from .study import Study

NA = "—"  # no value: a row without runs, a number no run gave
TARGET_BELOW = 0.5


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
class RowNumbers:
    """A row's figures over its seeds, in summary.csv's column order (each as _mean and _std)."""

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

    def columns(self) -> dict[str, Stat]:
        """Each figure under its summary.csv name."""
        return {CSV_NAMES.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}


# the budget's column in summary.csv keeps the name committed reports and their readers use
CSV_NAMES = {"budget_pct": "skipped_pct"}


def target_for(by_policy: dict[str, dict[int, Run]], judging: Judging) -> float | None:
    """The time-to-accuracy target on the test set's quantum: --target, else regular's mean
    final accuracy minus TARGET_BELOW (a float sum such as 73.34000000000002 would miss 73.34)."""
    q = quantum_of(by_policy)
    if judging.target is not None:
        return timing.on_grid(judging.target, q)
    return timing.default_target(by_policy, TARGET_BELOW, q)


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


def row_numbers(by_policy: dict[str, dict[int, Run]], policy: str) -> RowNumbers:
    runs = [by_policy[policy][s] for s in sorted(by_policy.get(policy, {}))]
    s = [r.summary for r in runs]
    return RowNumbers(
        train_s=Stat([x.train_seconds for x in s]),
        pruned_s=Stat([x.train_seconds - x.overhead_seconds for x in s]),
        overhead_s=Stat([x.overhead_seconds for x in s]),
        budget_pct=Stat([paired.budget(by_policy, r) for r in runs]),
        final_acc=Stat([x.final_accuracy for x in s]),
        best3_acc=Stat([x.best3_accuracy for x in s]),
        saved_pct=Stat(list(timing.savings(by_policy, policy)[0].values())),
        pace_saved_pct=_finite([pace_saving(r) for r in runs]),
        epoch_ratio=_finite([epoch_ratio(r) for r in runs]),
        sample_epochs=Stat([timing.sample_epochs(r) for r in runs]),
        steps=Stat([float(timing.optimizer_steps(r)) for r in runs]),
        d_final=Stat(list(paired.vs_regular(by_policy, policy).diffs.values())),
        d_best3=Stat(list(paired.vs_regular(by_policy, policy, paired.best3).diffs.values())),
    )


def summary_rows(found: Study) -> list[dict[str, Any]]:
    """One row per row of the report (model, dataset and every setting the runs differ in; the
    policy column names the differences), numeric, for summary.csv and the console: means and
    stds, descriptive 90% intervals (with n and the seeds), each scored policy's decision with
    its p-values, the bounds it tests and its seeds advice, and time-to-accuracy."""
    decided = found.decision_of
    rows = []
    for context, by_policy in found.groups.items():
        target, q = target_for(by_policy, found.judging), quantum_of(by_policy)
        for policy in by_policy:
            numbers = row_numbers(by_policy, policy)
            row: dict[str, Any] = {
                "model": context.model,
                "dataset": context.label,
                "variant": context.variant,
                "policy": row_name(context, policy),
                "seeds": len(by_policy[policy]),
                "seed_list": " ".join(map(str, sorted(by_policy[policy]))),
            }
            for name, stat in numbers.columns().items():
                row[f"{name}_mean"] = _number(stat.mean) if stat.values else ""
                row[f"{name}_std"] = _number(stat.std) if stat.values else ""
            row["saved_pairs"] = len(numbers.saved_pct.values)
            row.update(_interval_columns("d_final", paired.vs_regular(by_policy, policy), q))
            control = paired.vs_control(by_policy, policy)
            row.update(_interval_columns("d_control", control or paired.Paired("", {}), q))
            for name, on_line in (("d_frontier", is_frontier), ("d_shorter", is_shorter)):
                line = paired.vs_line(by_policy, policy, on_line) if not paired.is_baseline(policy) else None
                row.update(
                    _interval_columns(name, line if isinstance(line, paired.Paired) else paired.Paired("", {}), q)
                )
            row.update(_decision_columns(decided.get((context, policy)), bool(found.post_hoc)))
            row.update(_reach_columns(by_policy.get(policy, {}), target, q))
            rows.append(row)
    return rows


def _number(x: float | None) -> Any:
    # unrounded: the console table rounding a 4-decimal copy printed -0.70 where the verdict,
    # from the same interval, printed -0.71 (-0.70503 rounded twice); summary.csv rounds once
    return "" if x is None or not math.isfinite(x) else x


def csv_cells(row: dict[str, Any]) -> list[Any]:
    """A summary row as summary.csv writes it: numbers to 4 decimals."""
    return [round(v, 4) if isinstance(v, float) else v for v in row.values()]


def _interval_columns(name: str, p: paired.Paired, q: float) -> dict[str, Any]:
    e = decision.estimate(p, q)
    low, high = e.bounds() if e else (None, None)
    return {
        f"{name}_ci90_low": _number(low),
        f"{name}_ci90_high": _number(high),
        f"{name}_n": e.n if e else "",
        f"{name}_seeds": " ".join(map(str, p.seeds)) if e else "",
    }


DECISION_COLUMNS = (
    "decision",
    "post_hoc",
    "look",
    "cheap_alternative",
    "p_not_worse",
    "p_worse",
    "p_better",
    "p_short",
    "claim",
    "p_claim",
    "p_adjusted",
    "level",
    "family_size",
    "looks_planned",
    "bound_regular_low",
    "bound_regular_high",
    "bound_cheap_low",
    "bound_cheap_high",
    "decision_pooled_variance",
    *(f"decision_min_gain_{g:g}" for g in DELTAS),
    "seeds_for_80pct",
    "seeds_for_80pct_low",
    "seeds_for_80pct_high",
)


def _decision_columns(d: decision.Decision | None, post_hoc: bool) -> dict[str, Any]:
    if d is None:
        return dict.fromkeys(DECISION_COLUMNS, "")
    reg = d.bounds(d.vs_regular) if d.vs_regular else (None, None)
    alt = d.bounds(d.vs_cheap) if d.vs_cheap else (None, None)
    advice = d.advice
    return {
        "decision": d.word,
        "post_hoc": "yes" if post_hoc else "no",
        "look": d.look or "",
        "cheap_alternative": d.cheap.against if d.cheap else "",
        **{f"p_{k}": _number(d.p.get(k)) for k in ("not_worse", "worse", "better", "short")},
        "claim": d.route,
        "p_claim": _number(d.p_claim) if d.route else "",
        "p_adjusted": _number(d.p_adjusted) if d.route else "",
        "level": _number(d.level),
        "family_size": d.family,
        "looks_planned": d.looks,
        "bound_regular_low": _number(reg[0]),
        "bound_regular_high": _number(reg[1]),
        "bound_cheap_low": _number(alt[0]),
        "bound_cheap_high": _number(alt[1]),
        "decision_pooled_variance": d.pooled_word,
        **{f"decision_min_gain_{g:g}": w for g, w in d.sensitivity},
        "seeds_for_80pct": (advice.seeds or "") if advice else "",
        "seeds_for_80pct_low": (advice.low or "") if advice else "",
        "seeds_for_80pct_high": (advice.high or "") if advice else "",
    }


def _reach_columns(seeds: dict[int, Run], target: float | None, quantum: float) -> dict[str, Any]:
    reached = (
        [r for r in (timing.time_to_accuracy(run, target, quantum) for run in seeds.values()) if r is not None]
        if target is not None
        else []
    )
    mean = lambda xs: _number(statistics.fmean(xs)) if xs else ""
    return {
        "tta_target": _number(target),
        "tta_reached": len(reached),
        "tta_censored": len(seeds) - len(reached),
        "tta_epoch_mean": mean([r.epoch for r in reached]),
        "tta_sample_epochs_mean": mean([r.sample_epochs for r in reached]),
    }

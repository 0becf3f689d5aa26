"""What a complete run's record must hold before a report or a comparison uses its figures:
every number within its meaning and small enough for the statistics (a train_seconds of
1e308 overflowed the std), and summary.json agreeing with its own metrics.csv. A record
edited by hand or damaged is left out with the reason, never fed to a verdict.

The summary repeats figures of metrics.csv (the last epoch's accuracy, the mean of the best
three, the samples seen, the pruned epochs): `fineprune train` writes both from the same rows,
so where they disagree one of them was changed afterwards and neither can be trusted. (The
totals of seconds and skipped samples are not compared: the tests' crafted records set them
apart from their rows on purpose, and each is bounded on its own.)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...engine.records.bounds import MAX_LOSS, MAX_LR, MAX_SECONDS, on_grid
from ...engine.records.record import METRICS, SUMMARY, EpochRow, RunSummary, finite
from ...errors import ConfigError

MAX_SEED = 2**63 - 1  # run.seed's own bound
MAX_WORLD = 2**20  # processes of one run
MAX_LOAD = 1e6
MAX_TEST = 2**40  # test images
TOLERANCE = 0.01  # points or seconds: what rounding in the two files can explain


class Implausible(ConfigError):
    """A record that contradicts itself or holds a value outside its meaning."""


def _within(value: Any, low: float, high: float) -> bool:
    return not isinstance(value, bool) and finite(value) and low <= value <= high


def _summary_problem(s: RunSummary) -> str | None:
    """The first figure of summary.json outside its meaning, or None."""
    for name in ("final_accuracy", "best3_accuracy"):
        if not _within(getattr(s, name), 0, 100):
            return f"{name} {getattr(s, name)} is not a test accuracy (0 to 100%)"
    for name in ("train_seconds", "eval_seconds"):
        if not _within(getattr(s, name), 0, MAX_SECONDS):
            return f"{name} {getattr(s, name)} is not a duration (0 to {MAX_SECONDS:.0e} s)"
    if s.cpu_seconds is not None and not _within(s.cpu_seconds, 0, MAX_SECONDS):
        return f"cpu_seconds {s.cpu_seconds} is not a duration (0 to {MAX_SECONDS:.0e} s)"
    if not _within(s.overhead_seconds, 0, s.train_seconds):
        return f"overhead_seconds {s.overhead_seconds} is not part of train_seconds {s.train_seconds}"
    if not _within(s.seed, 0, MAX_SEED) or not isinstance(s.seed, int):
        return f"seed {s.seed} is not a seed (0 to 2**63 - 1)"
    if not _within(s.world_size, 1, MAX_WORLD) or not isinstance(s.world_size, int):
        return f"world_size {s.world_size} is not a number of processes (1 to {MAX_WORLD})"
    if not isinstance(s.num_test, int) or not 0 <= s.num_test <= MAX_TEST:
        return f"num_test {s.num_test} is not a number of test images (0 to 2**40)"
    if s.epochs_completed != s.epochs:
        return f"a complete run of {s.epochs} epochs with epochs_completed {s.epochs_completed}"
    if not _within(s.samples_seen, 0, s.epochs * s.num_train):
        return f"samples_seen {s.samples_seen} is not between 0 and epochs x num_train"
    if len(s.load_average) > 3 or not all(_within(x, 0, MAX_LOAD) for x in s.load_average):
        return "load_average is not up to three loads (non-negative numbers)"
    if not all(
        isinstance(e, int) and not isinstance(e, bool) and 0 <= e <= s.epochs
        for e in s.pruning_epochs + s.resumed_after_epochs
    ):
        return "pruning_epochs or resumed_after_epochs lists other than epochs of the run"
    return None


def _row_problem(row: EpochRow, number: int, num_train: int, num_test: int) -> str | None:
    if row.epoch != number:
        return f"row {number} is epoch {row.epoch}"
    if not _within(row.test_accuracy, 0, 100):
        return f"epoch {number}'s test_accuracy {row.test_accuracy} is not a test accuracy"
    if 0 < num_test <= MAX_TEST and not on_grid(row.test_accuracy, num_test):  # out of bounds: the summary's check
        return (
            f"epoch {number}'s test_accuracy {row.test_accuracy} is no whole number of the run's "
            f"{num_test} test images (each image is {100 / num_test:.4g} pt)"
        )
    if not _within(row.train_seconds, 0, MAX_SECONDS) or not _within(row.overhead_seconds, 0, row.train_seconds):
        return f"epoch {number}'s train_seconds or overhead_seconds is not a duration within the epoch's"
    if not (math.isnan(row.cpu_seconds) or _within(row.cpu_seconds, 0, MAX_SECONDS)):  # NaN: not recorded
        return f"epoch {number}'s cpu_seconds {row.cpu_seconds} is not a duration (0 to {MAX_SECONDS:.0e} s)"
    if not _within(row.samples, 0, num_train) or row.pruned not in (0, 1):
        return f"epoch {number}'s samples or pruned is out of range"
    if (
        not _within(row.lr, 0, MAX_LR)
        or not _within(row.train_loss, 0, MAX_LOSS)
        or not (math.isnan(row.test_loss) or _within(row.test_loss, 0, MAX_LOSS))
    ):
        return f"epoch {number}'s lr or losses are out of range"
    return None


def _disagreement(s: RunSummary, rows: list[EpochRow]) -> str | None:
    """Where summary.json says otherwise than the rows it was written from."""
    last = rows[-1].test_accuracy
    if abs(s.final_accuracy - last) > TOLERANCE:
        return f"final_accuracy {s.final_accuracy} is not the last epoch's test accuracy ({last})"
    top = sorted((r.test_accuracy for r in rows), reverse=True)[:3]
    if abs(s.best3_accuracy - sum(top) / len(top)) > TOLERANCE:
        return f"best3_accuracy {s.best3_accuracy} is not the mean of the three best epochs ({sum(top) / len(top):g})"
    seen = sum(r.samples for r in rows)
    if s.samples_seen not in (0, seen):  # 0: not recorded (early records)
        return f"samples_seen {s.samples_seen} is not the sum of the epochs' samples ({seen})"
    if sorted(s.pruning_epochs) != [r.epoch for r in rows if r.pruned]:
        return "pruning_epochs is not the epochs metrics.csv marks as pruned"
    return None


def check_rows(path: Path, rows: list[EpochRow], num_train: int, num_test: int = 0) -> None:
    """Each epoch row of metrics.csv within its meaning (an unfinished run's rows too); with
    `num_test` (recorded since it was added), each accuracy a whole number of test images."""
    for number, row in enumerate(rows, start=1):
        problem = _row_problem(row, number, num_train, num_test)
        if problem:
            raise Implausible(f"{path / METRICS}: {problem}")


def check_record(path: Path, summary: RunSummary, rows: list[EpochRow]) -> None:
    """Raises Implausible with the file and the reason; rows: as many as summary.epochs."""
    problem = _summary_problem(summary)
    if problem:
        raise Implausible(f"{path / SUMMARY}: {problem}")
    check_rows(path, rows, summary.num_train, summary.num_test)
    problem = _disagreement(summary, rows)
    if problem:
        raise Implausible(f"{path / SUMMARY} contradicts {METRICS}: {problem}")

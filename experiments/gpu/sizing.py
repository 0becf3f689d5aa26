"""Epoch times measured while a run trains, and a watcher that stops a run after a given epoch.

A run records each epoch as a row of its metrics.csv; a watcher notes when each row appears.
The first row comes after the start (data, compilation) and one epoch; the time between later
rows is one epoch with its evaluation and records. SIGTERM makes a run stop after the epoch it
is in (the dist step interrupts each mode's run this way, then resumes it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

RECENT = 5  # an epoch's time: the slowest of the last RECENT (a pruned epoch is shorter)


def count_rows(metrics: Path) -> int:
    """Epochs recorded in a metrics.csv (written whole, by rename), 0 before the first."""
    try:
        return max(0, len(metrics.read_text().splitlines()) - 1)
    except OSError:
        return 0


class EpochClock:
    """When the rows of a run's metrics.csv appeared during this call (monotonic seconds)."""

    def __init__(self, rows: Callable[[], int], started: float):
        self.rows, self.started = rows, started
        self.before: int | None = None  # rows the run had when this call first looked
        self.times: list[float] = []  # when each row of this call appeared

    def poll(self, now: float) -> int:
        """Rows recorded in this call so far."""
        n = self.rows()
        if self.before is None or n < self.before:  # the first look, or a run started over
            self.before, self.times = n, []
        self.times += [now] * max(0, n - self.before - len(self.times))
        return len(self.times)

    @property
    def epoch_s(self) -> float | None:
        """The slowest of the recent epochs; None before two rows (the first includes the start)."""
        gaps = [b - a for a, b in zip(self.times, self.times[1:])][-RECENT:]
        return max(max(gaps), 1e-3) if gaps else None  # rows seen in one look: a short epoch

    @property
    def startup_s(self) -> float | None:
        """From the call's start to its first row, less one epoch: data, compilation, set-up."""
        epoch = self.epoch_s
        return None if epoch is None else max(0.0, self.times[0] - self.started - epoch)


class AfterEpochs(EpochClock):
    """Stop a run once it has recorded `epochs` epochs (it stops after the one in progress)."""

    def __init__(self, rows: Callable[[], int], started: float, epochs: int):
        super().__init__(rows, started)
        self.epochs = epochs

    def due(self, now: float) -> str | None:
        return f"an interruption after epoch {self.epochs}" if self.poll(now) >= self.epochs else None

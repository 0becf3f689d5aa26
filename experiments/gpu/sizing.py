"""How many epochs fit a call, from epoch times measured while the run trains.

A run records each epoch as a row of its metrics.csv; a watcher notes when each row appears.
The first row of a call comes after the start (data, compilation) and one epoch; the time
between later rows is one epoch with its evaluation and records. SIGTERM makes a run stop
after the epoch it is in, so once a row has appeared the run can be let go on only if two more
epochs fit after it: the one now in progress and the next, during which it can still be stopped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

STOP_MARGIN_S = 20  # after the last epoch: its checkpoint (ResNet-18: 85 MiB), the records, the exit
RECENT = 5  # an epoch's time: the slowest of the last RECENT (a pruned epoch is shorter)


def epochs_that_fit(seconds: float, epoch_s: float, margin_s: float = STOP_MARGIN_S) -> int:
    """Whole epochs of `epoch_s` that end at least `margin_s` before `seconds` run out."""
    if epoch_s <= 0:
        raise ValueError("an epoch takes some time")
    return max(0, math.floor((seconds - margin_s) / epoch_s))


def calls_needed(epochs: int, per_call: int) -> int | None:
    """Calls of `per_call` epochs that train `epochs` more; None when not one epoch fits a call."""
    return -(-epochs // per_call) if per_call > 0 else None


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


class ChunkStop(EpochClock):
    """Stop a training call once the next epoch would not fit before `deadline`, or after
    `max_epochs` epochs in this call."""

    def __init__(self, rows: Callable[[], int], started: float, deadline: float, max_epochs: int | None = None):
        super().__init__(rows, started)
        self.deadline, self.max_epochs = deadline, max_epochs

    def due(self, now: float) -> str | None:
        n = self.poll(now)
        if n == 0:
            return None
        if self.max_epochs is not None and n >= max(1, self.max_epochs - 1):
            return f"--chunk-epochs {self.max_epochs}"
        # one row says nothing of an epoch's time yet: the start (data, compilation) is in it;
        # the step's time limit still stops a run whose second row never comes in time. Counted
        # from the last row, not from now: a stop asked for at any time in an epoch ends the run
        # after that epoch, so waiting for the next row loses nothing
        if self.epoch_s is not None and epochs_that_fit(self.deadline - self.times[-1], self.epoch_s) < 2:
            return f"the epoch after next would not fit ({self.epoch_s:.1f} s an epoch)"
        return None


class AfterEpochs(EpochClock):
    """Stop a run once it has recorded `epochs` epochs (it stops after the one in progress)."""

    def __init__(self, rows: Callable[[], int], started: float, epochs: int):
        super().__init__(rows, started)
        self.epochs = epochs

    def due(self, now: float) -> str | None:
        return f"an interruption after epoch {self.epochs}" if self.poll(now) >= self.epochs else None

"""`compare`'s progress: which run is training, a line per run, and an ETA summed from each
model's own cost.

A matrix of LeNet and ResNet-18 runs once read 87 hours: the bar extrapolated ResNet epochs
from LeNet's pace. Here every (model, dataset) pair is timed on its own epochs; a pair not
timed yet is counted apart ("+2 runs not timed yet") instead of being guessed.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator

from .. import console


@dataclass
class Planned:
    key: Hashable  # runs with the same key cost the same per epoch: (model, dataset)
    label: str
    epochs: int


class Costs:
    """Measured seconds per epoch (training, evaluation and records) and per run start-up
    (data, model), by key."""

    def __init__(self) -> None:
        self.epoch_s: dict[Hashable, list[float]] = defaultdict(list)
        self.start_s: dict[Hashable, list[float]] = defaultdict(list)

    def per_epoch(self, key: Hashable) -> float | None:
        # the median: a first epoch slowed by compilation or warm caches does not set the pace
        seconds = self.epoch_s.get(key)
        return statistics.median(seconds) if seconds else None

    def per_start(self, key: Hashable) -> float:
        seconds = self.start_s.get(key)
        return statistics.median(seconds) if seconds else 0.0

    def seconds_left(self, runs: list[tuple[Hashable, int, bool]]) -> tuple[float, int]:
        """(seconds, runs not timed) for (key, epochs left, started) runs; a run whose key has
        no measured epoch adds nothing to the seconds and one to the count."""
        seconds, untimed = 0.0, 0
        for key, epochs, started in runs:
            cost = self.per_epoch(key)
            if epochs <= 0:
                continue
            if cost is None:
                untimed += 1
                continue
            seconds += epochs * cost + (0.0 if started else self.per_start(key))
        return seconds, untimed


class MatrixProgress:
    """Hands `compare`'s bar to each run in turn (`run(i)`), with an ETA from `Costs`."""

    def __init__(
        self,
        bar: Any,
        planned: list[Planned],
        clock: Callable[[], float] = time.monotonic,
        later: list[Planned] | None = None,
        looks: str = "",
    ):
        """`later`: the runs the planned looks after this one may train (`looks` names them, e.g.
        'looks 2-3'), counted into a second ETA: the whole plan's, should no policy be decided
        before the last look."""
        self.bar, self.planned, self.clock = bar, planned, clock
        self.later, self.looks = later or [], looks
        self.costs = Costs()
        self.done = [0] * len(planned)  # epochs done per run
        self.current = -1

    def seconds_left(self) -> tuple[float, int]:
        runs = [
            (p.key, p.epochs - self.done[i], i <= self.current) for i, p in enumerate(self.planned) if i >= self.current
        ]
        return self.costs.seconds_left(runs)

    def plan_left(self) -> str:
        """' (this look); up to 20 min for looks 2-3 too': the later looks at the pace measured
        so far ('' without later looks); a model not timed yet is counted as such."""
        if not self.later:
            return ""
        seconds, untimed = self.costs.seconds_left([(p.key, p.epochs, False) for p in self.later])
        now, untimed_now = self.seconds_left()
        more = f" + {untimed + untimed_now} runs not timed yet" if untimed + untimed_now else ""
        return f" (this look); up to {console.clock(now + seconds)}{more} with {self.looks}"

    @contextmanager
    def run(self, i: int) -> Iterator["RunBar"]:
        """Run `i` is training; on a normal end, one line says it is done and how long it took."""
        self.current = i
        run_bar = RunBar(self, i)
        yield run_bar
        self.current = i + 1  # a run that stopped early (diverged) has no epochs left
        p = self.planned[i]
        self.bar.note(
            f"done {p.label} (run {i + 1}/{len(self.planned)}, {console.clock(self.clock() - run_bar.started)})"
        )


class RunBar:
    """What one run's `fit` advances: it times the run's epochs for `Costs` and reports to the
    matrix's bar."""

    def __init__(self, matrix: MatrixProgress, i: int):
        self.matrix, self.i = matrix, i
        self.planned = matrix.planned[i]
        self.label = f"{self.planned.label} (run {i + 1}/{len(matrix.planned)})"
        self.started = matrix.clock()
        self.epoch_started: float | None = None
        self.first_done: float | None = None  # a script's first epoch: its start-up is in it

    def resumed(self, epochs: int) -> None:
        self.matrix.done[self.i] += epochs
        self.matrix.bar.resumed(epochs)

    @contextmanager
    def steps(self, total: int, read: Callable[[], int], label: str) -> Iterator[None]:
        if self.epoch_started is None:  # the run's first epoch: what came before was start-up
            self.epoch_started = self.matrix.clock()
            self.matrix.costs.start_s[self.planned.key].append(self.epoch_started - self.started)
        with self.matrix.bar.steps(total, read, label):
            yield

    def advance(self, status: str = "") -> None:
        m, key = self.matrix, self.planned.key
        now = m.clock()
        if self.epoch_started is not None:  # advance to advance: checkpoints and planning included
            m.costs.epoch_s[key].append(now - self.epoch_started)
            if self.first_done == self.epoch_started:  # a script's, whose steps no view shows:
                # its start-up is its first epoch's time less its second's
                m.costs.start_s[key].append(max(0.0, 2 * self.first_done - self.started - now))
        elif m.done[self.i] == 0:
            self.first_done = now
        self.epoch_started = now
        m.done[self.i] += 1
        seconds, untimed = m.seconds_left()
        status = f"epoch {m.done[self.i]}/{self.planned.epochs}" + (f", {status}" if status else "")
        m.bar.advance(status, seconds_left=seconds, untimed=untimed, label=self.label, plan=m.plan_left())

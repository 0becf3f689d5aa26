"""Costs and times: what may be compared, and time-to-accuracy.

Wall times are compared only between runs with one machine signature (processor, torch
threads, runs at once (`compare --jobs`), torch version, device; recorded since schema 3). Runs without one are "unknown
machine" and a run resumed on another machine is "mixed machines": their times are shown,
never compared. The machine-independent costs (sample-epochs trained, optimizer steps)
are always comparable.

Other work on the machine stretches the clock, not the process's own CPU time: a CPU run
records both, and one whose CPU time fell well short of its threads' clock time (`LOADED`)
shared its cores, so its clock time measures the load as much as the run (`Load`). There the
saving in CPU time is the figure to trust.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...arms import REGULAR
from ...engine.setup.config import TrainConfig
from ..read.runs import Run

UNKNOWN = "unknown machine"
MIXED = "mixed machines"


def signature(run: Run) -> str:
    """The run's machine signature as text; UNKNOWN or MIXED when its time cannot be compared."""
    m = run.summary.machine
    if not m:
        return UNKNOWN
    if "mixed" in m:
        return MIXED
    threads, at_once = m.get("threads"), m.get("concurrency", 1)  # runs beside it share the memory bus
    return (
        f"{m.get('processor', '?')}, {threads} thread{'s' if threads != 1 else ''}, "
        f"torch {m.get('torch', '?')}, {m.get('device', '?')}" + (f", {at_once} runs at once" if at_once != 1 else "")
    )


def comparable(a: Run, b: Run) -> str | None:
    """None when the two runs' wall times may be compared, else why not."""
    sa, sb = signature(a), signature(b)
    for s in (sa, sb):
        if s in (UNKNOWN, MIXED):
            return s
    return None if sa == sb else "different machines"


@dataclass(frozen=True)
class LeftOut:
    policy: str
    seed: int
    reason: str


def training_seconds(run: Run) -> float | None:
    return run.summary.train_seconds


def clock_seconds(run: Run) -> float | None:
    """The run as its user's clock saw it: training, the test pass of every epoch, the records.
    fineprune's trainer always timed both parts; a script run from before its records kept the
    rest of each epoch apart has no such figure (None)."""
    s = run.summary
    if s.wall_seconds > 0 and math.isfinite(s.wall_seconds):  # an edited record's inf compares with nothing
        return s.wall_seconds
    return None if run.is_script else s.train_seconds + s.eval_seconds


def cpu_seconds(run: Run) -> float | None:
    """The run's process CPU seconds (fineprune's trainer: its training; a script's: its whole
    epochs, test passes included), where every epoch recorded them (a CPU run since issue 55)."""
    s = run.summary.cpu_seconds
    return s if isinstance(s, (int, float)) and 0 < s < math.inf else None


LOADED = 0.8  # CPU time under this share of the threads' clock time: the run waited for its cores


def cpu_share(run: Run) -> float | None:
    """CPU seconds over the clock seconds of the same span times the run's threads: near 1 where
    its threads had their cores; None where not recorded (a GPU run, a run made before)."""
    m, cpu = run.summary.machine, cpu_seconds(run)
    threads = m.get("threads") if isinstance(m, dict) and m.get("device") == "cpu" else None
    span = clock_seconds(run) if run.is_script else training_seconds(run)  # what its CPU time covers
    if cpu is None or not span or not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        return None
    return cpu / (span * threads)


@dataclass(frozen=True)
class Load:
    """Runs that waited for their cores: how many of those whose share is known, and their shares."""

    waited: int
    known: int
    low: float
    high: float

    def text(self) -> str:
        return (
            f"{self.waited} of {self.known} runs got {100 * self.low:.0f}–{100 * self.high:.0f}% of their threads' "
            f"clock time in CPU time (under {100 * LOADED:.0f}%: they shared their cores with other work)"
        )


def load_of(runs: list[Run]) -> Load | None:
    """How loaded the machine was for these runs; None where every run had its cores (or none says)."""
    shares = [s for s in map(cpu_share, runs) if s is not None]
    waited = [s for s in shares if s < LOADED]
    return Load(len(waited), len(shares), min(waited), max(waited)) if waited else None


def savings(
    by_policy: dict[str, dict[int, Run]], policy: str, seconds: Callable[[Run], float | None] = training_seconds
) -> tuple[dict[int, float], list[LeftOut]]:
    """Time saved (%) against regular of the same seed, for the pairs whose times compare;
    `seconds`: which time of a run (a pair missing one is left out, as not recorded)."""
    regular, mine = by_policy.get(REGULAR, {}), by_policy.get(policy, {})
    saved, left = {}, []
    for seed in sorted(s for s in mine if s in regular):
        why = comparable(mine[seed], regular[seed])
        ours, theirs = seconds(mine[seed]), seconds(regular[seed])
        if why or ours is None or not theirs:
            left.append(LeftOut(policy, seed, why or "not recorded"))
        else:
            saved[seed] = 100.0 * (1.0 - ours / theirs)
    return saved, left


def sample_epochs(run: Run, upto: int | None = None) -> float:
    """Samples trained, in units of the training set (an unpruned epoch is 1.0)."""
    rows = run.metrics if upto is None else run.metrics[:upto]
    return sum(r.samples for r in rows) / run.summary.num_train


def batch_size(run: Run) -> int:
    train = run.config.get("train")
    size = (train.get("batch_size") if isinstance(train, dict) else None) or TrainConfig().batch_size
    return size if isinstance(size, int) and size > 0 else TrainConfig().batch_size


def optimizer_steps(run: Run) -> int:
    """Steps taken: each epoch's samples in batches of the run's batch size, the last partial."""
    size = batch_size(run)
    return sum(math.ceil(r.samples / size) for r in run.metrics)


@dataclass(frozen=True)
class Reached:
    epoch: int
    sample_epochs: float
    seconds: float


def on_grid(value: float, quantum: float) -> float:
    """`value` rounded to the test set's quantum (points per test image)."""
    return round(value / quantum) * quantum


def time_to_accuracy(run: Run, target: float, quantum: float) -> Reached | None:
    """The first epoch whose test accuracy reaches `target` (%), compared in whole test images,
    with the sample-epochs and training seconds spent up to its end; None when no epoch does."""
    seconds, need = 0.0, round(target / quantum)
    for i, row in enumerate(run.metrics):
        seconds += row.train_seconds
        if round(row.test_accuracy / quantum) >= need:
            return Reached(row.epoch, sample_epochs(run, i + 1), seconds)
    return None


def default_target(by_policy: dict[str, dict[int, Run]], below: float, quantum: float) -> float | None:
    """Regular's mean final accuracy minus `below` points, on the test set's quantum (None
    without regular runs)."""
    regular = list(by_policy.get(REGULAR, {}).values())
    if not regular:
        return None
    return on_grid(sum(r.summary.final_accuracy for r in regular) / len(regular) - below, quantum)


def reference_signature(runs: list[Run]) -> str | None:
    """The known machine most of these runs ran on (ties: the first by name); None if none."""
    known = [signature(r) for r in runs if signature(r) not in (UNKNOWN, MIXED)]
    return max(sorted(set(known)), key=known.count) if known else None

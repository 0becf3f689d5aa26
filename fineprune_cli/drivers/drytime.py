"""The dry run's time arithmetic: each planned run's seconds from a probe, the runs placed on
the slots they share look by look, and when a CPU's load leaves no pace to estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .probe import Probe

TO_TRAIN = ("new", "incomplete")  # compare trains these again; 'complete' and 'diverged' it skips


@dataclass
class PlannedRun:
    model: str
    dataset: str
    arm: str
    seed: int
    epochs: int
    pruning_epochs: list[int] | None  # None: chosen during the run (`unplanned` says how)
    prune_fraction: float
    images: int | None  # training images over the run (None: dataset size unknown)
    run_dir: str
    tests: int = 0  # test images of each epoch's evaluation
    state: str = "new"  # compare: 'complete' and 'diverged' runs are not trained again
    look: int = 1  # --until-decided: the first look that trains it
    seconds: float | None = None  # its estimated time (None: no estimate)
    random_equal_epochs: list[int] = field(default_factory=list)  # pruning epochs that select as the random control
    unplanned: str = ""  # where pruning_epochs is None: how the policy chooses them (Policy.unplanned)


@dataclass
class Pace:
    """How the runs share the machine: `at_once` runs side by side (0: as many as a Slurm queue
    allows), each with `threads` torch threads (None: this process's count)."""

    at_once: int = 1
    threads: int | None = None


def run_seconds(run: PlannedRun, p: Probe, which: str = "median") -> float | None:
    """Its start-up, training images x the training cost (the probe's `which` repeat), and one
    evaluation of the test images per epoch."""
    if run.images is None:
        return None
    return p.start_s + run.images * p.seconds_per_image(which) + run.epochs * run.tests * p.eval


def makespan(seconds: list[float], at_once: int) -> float:
    """Wall time of runs started in this order, each on the first slot that comes free (as the
    local executor starts them); `at_once` 0: every run at once."""
    free = [0.0] * (at_once or max(len(seconds), 1))
    for s in seconds:
        free[free.index(min(free))] += s
    return max(free)


def wall(runs: list[PlannedRun], at_once: int, last_look: int) -> float:
    """The runs still to train, look by look up to `last_look`: a look waits for all its runs."""
    todo = [r for r in runs if r.state in TO_TRAIN and r.seconds is not None and r.look <= last_look]
    return sum(makespan([r.seconds for r in todo if r.look == k], at_once) for k in sorted({r.look for r in todo}))


def time_runs(runs: list[PlannedRun], probes: dict[str, Probe], pace: Pace) -> tuple[float | None, float | None, str]:
    """(fewest, most seconds, why not): the least is the first look alone, with every run at
    once on Slurm; the most is every look, on Slurm one run at a time."""
    why = next((f"{key}: {p.unsteady()}" for key, p in probes.items() if p.unsteady()), "")
    if why:
        return None, None, why
    return (*_walls(runs, probes, pace, "median"), "")


def _walls(runs: list[PlannedRun], probes: dict[str, Probe], pace: Pace, which: str) -> tuple[float, float]:
    """(fewest, most) with each run timed at the probe's `which` repeat."""
    for r in runs:
        r.seconds = run_seconds(r, probes[f"{r.model}-{r.dataset}"], which)
    last = max((r.look for r in runs), default=1)
    return wall(runs, pace.at_once, 1), wall(runs, pace.at_once or 1, last)


def ranges(runs: list[PlannedRun], probes: dict[str, Probe], pace: Pace) -> list[tuple[float, float] | None]:
    """[fewest, most] as (at the fastest repeat, at the slowest) where a probe was noisy, else None."""
    if not any(p.noisy() for p in probes.values()):
        return [None, None]
    copies = [replace(r) for r in runs]
    low, high = _walls(copies, probes, pace, "fastest"), _walls(copies, probes, pace, "slowest")
    return [(low[0], high[0]), (low[1], high[1])]


def contended(p: Probe) -> str:
    """Why runs of several threads on a CPU with more work than cores have no pace to estimate
    ('' where they do). Each step waits for its slowest thread, and one of them is always
    descheduled: under load 4-11 on 2 cores the demo's LeNet took 50 ms to 1.6 s a step at 2
    threads (a real run's epochs 63, 88, 116 s) and 25-100 ms at 1 thread, where the estimates
    came within 2x of the measured runs. The probe times 1 thread as well and gives that figure."""
    if p.threads <= 1 or p.load is None or p.load < p.cores:
        return ""
    low, high = p.step_range()
    return (
        f"at {p.threads} threads a run on a machine with more work than cores (load {p.load:.1f} on "
        f"{p.cores}) waits at every step for its descheduled threads, and its pace swings with the other "
        f"work (the probe: {low} to {high} per step)"
    )

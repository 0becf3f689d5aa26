"""`compare --script` checks the user's schedule: once a seed has regular and a shorter arm
complete, the shorter run's learning rate, as the script logged it, must be regular's compressed
to its epochs (`analysis.schedule`). A script whose schedule ignores {epochs} (a cosine with a
fixed T_max) is refused there with one line, before the rest of the matrix trains a baseline that
is not training fewer epochs of its schedule; runs already in --out are checked before anything
trains. A script that logs no lr is not checked here (the report says so). The built-in trainer
compresses its own schedule (`arms.shorter_schedule`), so its runs are not read for this.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Protocol

from ...analysis.group.compression import ADVICE, logged, mismatch
from ...arms import REGULAR
from ...engine.records.record import Status, read_metrics, read_summary
from ...errors import ConfigError

if TYPE_CHECKING:
    from ..job import Job


class Finished(Protocol):
    """What the check reads of a task an executor finished (`executors.contract.Task`, which sits
    above the trainers): the folder its run wrote."""

    run_dir: Path


class CompressionCheck:
    """The matrix's regular and shorter jobs by seed, checked as their runs finish."""

    def __init__(self, jobs: list["Job"], out: str):
        self.out = out
        self.seeds: dict[tuple[str, str, int], list["Job"]] = {}
        for job in jobs:
            if job.shorter is not None or job.arm == REGULAR:
                self.seeds.setdefault((job.model, job.dataset, job.seed), []).append(job)
        self.by_dir = {job.run_dir(out).resolve(): job for job in jobs}

    def after(self, finished: Iterable["Job"]) -> None:
        """ConfigError where a finished job completes a pair of regular and a shorter arm of one
        seed whose schedule is not regular's compressed."""
        for job in finished:
            pair = self.seeds.get((job.model, job.dataset, job.seed), [])
            regular = next((j for j in pair if j.shorter is None), None)
            for short in (j for j in pair if j.shorter is not None and regular is not None):
                if job in (regular, short):
                    self._check(regular, short)

    def task_done(self, task: Finished) -> None:
        """The same, for a run an executor finished."""
        job = self.by_dir.get(Path(task.run_dir).resolve())
        if job is not None:
            self.after([job])

    def _check(self, regular: "Job", short: "Job") -> None:
        theirs, mine = _lrs(regular.run_dir(self.out)), _lrs(short.run_dir(self.out))
        if theirs is None or mine is None or not (logged(theirs) and logged(mine)):
            return
        found = mismatch(theirs, mine)
        if found is not None:
            raise ConfigError(
                f"{short.arm}, seed {short.seed}: the script's learning rate is not regular's compressed to "
                f"the arm's {found.epochs} epochs ({found.text()}), so the arm is not training fewer epochs "
                f"of your schedule: {ADVICE}"
            )


def _lrs(run_dir: Path) -> list[float] | None:
    """A complete run's lr per epoch; None for any other folder (the matrix says what is wrong with it)."""
    try:
        if read_summary(run_dir).status != Status.COMPLETE:
            return None
        return [row.lr for row in read_metrics(run_dir)]
    except ConfigError:
        return None

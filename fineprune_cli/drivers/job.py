"""One run of a compare's matrix: a model on a dataset, an arm, a seed; where it is filed, where
its config goes, and how its process ended in words. Below the trainers and the executors, which
both file and report jobs."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from ..arms import frontier_arm, shorter_arm


@dataclass(frozen=True)
class Job:
    model: str
    dataset: str
    policy: str
    seed: int
    fraction: float | None = None  # a frontier arm: this prune fraction in every epoch
    shorter: float | None = None  # a shorter-schedule arm: this budget of fewer epochs

    @property
    def arm(self) -> str:
        if self.shorter is not None:
            return shorter_arm(self.shorter)
        return self.policy if self.fraction is None else frontier_arm(self.fraction)

    def run_dir(self, out: str | Path) -> Path:
        return Path(out) / f"{self.model}-{self.dataset}" / f"{self.arm}-seed{self.seed}"

    def __str__(self) -> str:
        return f"{self.model} on {self.dataset}, {self.arm}, seed {self.seed}"


JOBS = ".jobs"


def job_file(run_dir: Path) -> Path:
    """Where the config of the job writing `run_dir` (<out>/<model>-<dataset>/<arm>-seed<seed>)
    goes: <out>/.jobs/<model>-<dataset>/<arm>-seed<seed>.yaml, its logs beside it."""
    return run_dir.parent.parent / JOBS / run_dir.parent.name / f"{run_dir.name}.yaml"


def ended(code: int | None) -> str:
    """How a process ended, in words: a negative code is the signal that killed it."""
    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    cause = "; perhaps out of memory (the kernel's OOM killer sends it)" if -code == signal.SIGKILL else ""
    return f"killed by {name} (signal {-code}){cause}"

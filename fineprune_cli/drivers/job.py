"""One run of a compare's matrix: a model on a dataset, an arm, a seed; where it is filed."""

from __future__ import annotations

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

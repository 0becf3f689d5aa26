"""What `fine` and `random` share: Algorithm 2's schedule and the number of samples left out."""

from __future__ import annotations

import torch

from ..config import PruneConfig
from ..policy import EpochPlan, Policy, pruned_count
from ..schedule import PruneSchedule


class Scheduled(Policy):
    """Leaves `select()`'s m = round(prune_fraction x N) samples out of the schedule's epochs."""

    def __init__(self, num_samples: int, cfg: PruneConfig, seed: int = 0,
                 device: torch.device | str = "cpu", epochs: int | None = None):
        super().__init__(num_samples, cfg, seed, device, epochs)
        self.schedule = PruneSchedule.from_config(cfg)
        self.num_pruned = pruned_count(cfg, num_samples)

    def prunes(self, epoch: int) -> bool:
        return self.num_pruned > 0 and not self.annealed(epoch) and self.schedule.prunes(epoch)

    def plan(self, epoch: int) -> EpochPlan:
        self.begin_window(epoch)
        if not self.prunes(epoch):
            return EpochPlan(self.all)
        return EpochPlan(self.keep_all_but(self.select()), pruned=True)

    def planned_samples(self, epoch: int) -> int:
        return self.num_samples - self.num_pruned if self.prunes(epoch) else self.num_samples

    def begin_window(self, epoch: int) -> None:
        """Called before every plan; `fine` clears its counts at a window's start."""

    def select(self) -> torch.Tensor:
        raise NotImplementedError

"""What `ucb` and `egreedy` share (Raju et al. 2021, "Accelerating Deep Learning with Dynamic
Data Pruning"): a running mean and variance of each sample's loss (Finch's exponentially
weighted form, from the training step's own loss), and a fresh choice of the
k = N - round(prune_fraction x N) samples to keep in every epoch up to the annealing epoch.
Our reading of the paper, and where we differ: docs/policies/ucb.md.
"""

from __future__ import annotations

import math

from ...lazytorch import torch
from ..policy import EpochPlan, pruned_count
from ..tracker import highest
from .dynamic import LossScored


class RunningLoss(LossScored):
    """Exponentially weighted mean and variance of each sample's loss; `priority()` (+inf for
    unseen samples) decides who stays."""

    state_keys = ("seen", "mean", "var")

    def setup(self) -> None:
        super().setup()
        self.mean = torch.zeros(self.num_samples, dtype=torch.float32, device=self.device)
        self.var = torch.zeros(self.num_samples, dtype=torch.float32, device=self.device)
        self.budget = self.num_samples - pruned_count(self.cfg, self.num_samples)  # k kept per epoch

    def update(self, now: torch.Tensor, losses: torch.Tensor) -> None:
        w = self.cfg.ema_weight
        again, first = now & self.seen, now & ~self.seen
        d = losses - self.mean
        self.var = torch.where(again, (1 - w) * (self.var + w * d * d), torch.where(first, 0.0, self.var))
        self.mean = torch.where(again, self.mean + w * d, torch.where(first, losses, self.mean))

    def planned_samples(self, epoch: int) -> int:
        return self.num_samples if self.annealed(epoch) else self.budget

    def priority(self) -> torch.Tensor:
        raise NotImplementedError

    @property
    def scores(self) -> torch.Tensor:
        """The priority of every observed sample; NaN for samples never observed."""
        return torch.where(self.seen, self.priority(), math.nan)

    def unseen_first(self, values: torch.Tensor) -> torch.Tensor:
        return torch.where(self.seen, values, math.inf)

    def choose(self, epoch: int) -> EpochPlan:
        if self.budget >= self.num_samples:
            return EpochPlan(self.all)
        return self.keep_mask_plan(self.mask(self.select()))

    def select(self) -> torch.Tensor:
        """The indices of the k samples this epoch keeps."""
        return highest(self.priority(), self.budget, self.generator)

    def mask(self, indices: torch.Tensor) -> torch.Tensor:
        keep = torch.zeros(self.num_samples, dtype=torch.bool, device=self.device)
        keep[indices] = True
        return keep

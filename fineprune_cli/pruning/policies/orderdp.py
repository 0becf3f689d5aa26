"""`orderdp`: OrderDP (ICLR 2026, "OrderDP: A Theoretically Guaranteed Lossless Dynamic
Data Pruning Framework"). Each epoch draws a uniform random subset of s = int(orderdp_subset x N)
samples and keeps its k = N - round(prune_fraction x N) with the highest last-seen loss.
Our reading of the authors' code, and where we differ: docs/policies/orderdp.md.
"""

from __future__ import annotations

import math

from ...errors import ConfigError
from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan, every_epoch_idle, pruned_count
from ..registry import register
from .dynamic import LossScored

UNSEEN_LOSS = 3.0  # the authors' code starts every sample's score at 3, not at +inf


@register
class OrderDP(LossScored):
    name = "orderdp"
    label = "OrderDP"
    color = "#e6ab02"
    order = 80
    help = "ICLR 2026: each epoch a random subset, of which the highest last-seen losses train"
    state_keys = ("seen", "loss")
    own_settings = ("orderdp_subset",)

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        return every_epoch_idle(cfg) or super().idle_reason(cfg, epochs)  # --anneal

    def setup(self) -> None:
        super().setup()
        n = self.num_samples
        self.loss = torch.full((n,), UNSEEN_LOSS, dtype=torch.float32, device=self.device)  # last seen
        self.subset = int(self.cfg.orderdp_subset * n)  # s: the authors' int(random_len_ratio x N)
        self.budget = n - pruned_count(self.cfg, n)  # k, the top-q of the authors' code
        if self.budget > self.subset:
            raise ConfigError(
                f"--orderdp-subset {self.cfg.orderdp_subset:g} draws {self.subset} of the {n} samples, fewer than "
                f"the {self.budget} that --prune-fraction {self.cfg.prune_fraction:g} keeps; raise "
                f"--orderdp-subset to {least_share(self.budget, n):g} or more"
            )

    def update(self, now: torch.Tensor, losses: torch.Tensor) -> None:
        self.loss = torch.where(now, losses, self.loss)

    @property
    def scores(self) -> torch.Tensor:
        """The last-seen loss of every sample; NaN for samples never observed."""
        return torch.where(self.seen, self.loss, math.nan)

    def planned_samples(self, epoch: int) -> int:
        return self.num_samples if self.annealed(epoch) else self.budget

    def choose(self, epoch: int) -> EpochPlan:
        drawn = torch.randperm(self.num_samples, generator=self.generator, device=self.device)[: self.subset]
        if self.budget < self.subset:  # the authors' topk, ties as torch.topk orders them
            drawn = drawn[torch.topk(self.loss[drawn], self.budget, largest=True, sorted=False).indices]
        return EpochPlan(drawn.sort().values, pruned=self.budget < self.num_samples)


def least_share(k: int, n: int) -> float:
    """The least share, to 4 decimals, whose int(share x n) draws k (a float product may fall
    just short: int(0.29 x 100) is 28)."""
    units = math.floor(k / n * 10**4)  # of 1/10000
    while int(units / 10**4 * n) < k:
        units += 1
    return units / 10**4

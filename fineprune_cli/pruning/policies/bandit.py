"""What `ucb` and `egreedy` share (Raju et al. 2021, "Accelerating Deep Learning with Dynamic
Data Pruning"): a running mean and variance of each sample's loss, and a fresh choice of the
k = N - round(prune_fraction x N) samples to keep in every epoch up to the annealing epoch.

Our reading, and where we differ. Sources: the paper's abstract and summaries, the issue's
description, and a third-party reimplementation (a timm-based benchmark's EpsilonGreedy/UCB
pruners); the paper's full text was not at hand, so its constants are not checked.

- Each sample is an arm whose reward is its loss; pruning is a bandit choice made again at
  every selection, with running estimates that weight recent epochs most (the paper's point:
  "sometimes" samples matter only for part of training). We keep the exponentially weighted
  mean and variance in Finch's incremental form (2009): d = x - mean; mean += w·d;
  var = (1 - w)·(var + w·d²), w = `--ema-weight`. A sample's first observation sets mean = x,
  var = 0 (the reimplementation starts from a fixed 0 or 1, biasing early estimates).
- x is the sample's training loss of the epoch (their mean if it trained twice). The
  reimplementation re-scores with an extra forward pass at each selection; we reuse the
  training step's loss, as InfoBatch does: no extra pass, and samples that sat out keep their
  estimates. They come back once the trained samples' losses fall below their stale values.
- ucb keeps the k highest mean + c·std (the issue's bound; the reimplementation adds c·var,
  which is not in the loss's units). egreedy keeps k - round(ε·k) by highest mean and
  round(ε·k) drawn uniformly from the rest (the reimplementation's split, with int()).
- Never-observed samples rank first (+inf), so all are tried early; ties, the unseen among
  them, are broken by a seeded random permutation. The prune fraction applies in every epoch,
  epoch 1 included (a random k then), until `--anneal` δ·n (none by default).
- Defaults are ours: `--ema-weight` 0.3 (about three epochs of memory), `--ucb-c` 1,
  `--epsilon` 0.1.
"""

from __future__ import annotations

import math

import torch

from ..config import PruneConfig
from ..policy import EpochPlan, pruned_count
from ..tracker import highest
from .dynamic import LossScored


class RunningLoss(LossScored):
    """Exponentially weighted mean and variance of each sample's loss; `priority()` (+inf for
    unseen samples) decides who stays."""

    state_keys = ("seen", "mean", "var")

    def __init__(self, num_samples: int, cfg: PruneConfig, seed: int = 0,
                 device: torch.device | str = "cpu", epochs: int | None = None):
        super().__init__(num_samples, cfg, seed, device, epochs)
        self.mean = torch.zeros(num_samples, dtype=torch.float32, device=self.device)
        self.var = torch.zeros(num_samples, dtype=torch.float32, device=self.device)
        self.budget = num_samples - pruned_count(cfg, num_samples)  # k kept per epoch

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

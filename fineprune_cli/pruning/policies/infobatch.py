"""`infobatch`: InfoBatch (Qin et al., ICLR 2024), soft pruning with expectation rescaling.

Our reading of the paper and of its reference code (NUS-HPC-AI-Lab/InfoBatch,
infobatch/infobatch.py), and where we differ:

- Score: the sample's latest training loss, before any weighting. Samples that sat out an
  epoch keep their old score (the code only writes scores of trained samples), so the mean
  below is over fresh and stale losses alike.
- Epochs: epoch e = 1..n prunes iff e <= δ·n (the code's sampler counts epochs from 1 and
  switches to full data when its counter exceeds num_epochs·delta); δ = 0.875 by default, so
  with n = 200 epochs 1-175 prune and 176-200 train everything with weight 1. Here δ is
  `--anneal` (the policy's default 0.875) and n the `epochs` the policy is created with.
- Which samples can sit out: score < mean of the scores (strict '<'; equal to the mean stays).
  The code initialises every score to 3 and averages over all N; we keep never-seen samples
  out of both the candidates and the mean, as the issue asks, so epoch 1 (nothing seen yet)
  trains everything, as in the code (all scores equal there, none below their mean).
- How many: a uniformly random r of the below-mean set W sits out (r = `--infobatch-ratio`,
  InfoBatch's `prune_ratio`, default 0.5 as in the paper's CIFAR runs). The code keeps
  int((1 - r)·|W|) of W, rounding the kept count down; we leave out floor(r·|W|), rounding
  the left-out count down, so an epoch never trains fewer than its budget (1 - r)·|W|: the
  two differ by at most one sample. The code also caps r at 0.9; so does our check.
- Weights: the below-mean samples that train get loss weight 1/(1 - r) (the code's
  1/keep_ratio); all others 1. EpochPlan.weights is that length-N vector, None after δ·n.
  (The code resets its weights only when the epoch counter equals δ·n + 1 exactly, so with a
  fractional δ·n its full-data epochs keep the last weights; we use weight 1 there, the
  paper's intent.) We apply the weight whenever W is not empty, also when floor(r·|W|) = 0.

`--no-infobatch-rescale` (an ablation, not the paper) trains the kept below-mean samples with
weight 1, so the plan carries no weights: it tells the loss of the kept samples' rescaling
apart from the pruning itself.

`--infobatch-ratio` is a setting of its own rather than `--prune-fraction` because it means a
share of W, not of all N samples, and so that fine/random's fraction (0.3 in the experiment
files) and InfoBatch's r (0.5) can be set independently.
"""

from __future__ import annotations

import math

import torch

from ..config import PruneConfig
from ..policy import EpochPlan
from ..registry import register
from .dynamic import LossScored


@register
class InfoBatch(LossScored):
    name = "infobatch"
    label = "InfoBatch"
    color = "#2ca02c"
    order = 30
    default_anneal = 0.875
    description = "Qin et al. 2024: a random r of the below-mean-loss samples sit out, the rest x 1/(1-r)"
    state_keys = ("seen", "loss")
    first_choice = 2  # epoch 1 has no losses yet, so nothing below their mean

    def __init__(self, num_samples: int, cfg: PruneConfig, seed: int = 0,
                 device: torch.device | str = "cpu", epochs: int | None = None):
        super().__init__(num_samples, cfg, seed, device, epochs)
        self.loss = torch.zeros(num_samples, dtype=torch.float32, device=self.device)  # latest

    def update(self, now: torch.Tensor, losses: torch.Tensor) -> None:
        self.loss = torch.where(now, losses, self.loss)

    @property
    def scores(self) -> torch.Tensor:
        """The latest loss of every sample; NaN for samples never observed."""
        return torch.where(self.seen, self.loss, torch.full_like(self.loss, math.nan))

    def below_mean(self) -> torch.Tensor:
        """W: the observed samples whose score is below the mean of the observed scores."""
        if not bool(self.seen.any()):
            return self.seen.clone()
        return self.seen & (self.loss < self.loss[self.seen].mean())

    def choose(self, epoch: int) -> EpochPlan:
        r = self.cfg.infobatch_ratio
        below = self.below_mean()
        candidates = self.all[below]
        if r == 0 or candidates.numel() == 0:
            return EpochPlan(self.all)
        n_out = math.floor(r * candidates.numel() + 1e-9)  # r·|W| rounded down (see above)
        out = candidates[torch.randperm(candidates.numel(), generator=self.generator,
                                        device=self.device)[:n_out]]
        keep = torch.ones(self.num_samples, dtype=torch.bool, device=self.device)
        keep[out] = False
        if not self.cfg.infobatch_rescale:  # the ablation: no expectation rescaling
            return self.keep_mask_plan(keep, None)
        weights = torch.where(below & keep, 1.0 / (1.0 - r), 1.0).to(torch.float32)
        return self.keep_mask_plan(keep, weights)

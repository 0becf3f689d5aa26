"""`infobatch`: InfoBatch (Qin et al., ICLR 2024), soft pruning with expectation rescaling.

A random share r of the samples whose latest loss is below the mean sits out an epoch, and the
other below-mean samples get loss weight 1/(1 - r), until epoch δ·n; `--no-infobatch-rescale`
drops the rescaling (an ablation). Our reading of the paper and its code: docs/policies/infobatch.md.
"""

from __future__ import annotations

import math

from ...lazytorch import torch
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
    help = "Qin et al. 2024: a random r of the below-mean-loss samples sit out, the rest x 1/(1-r)"
    state_keys = ("seen", "loss")
    first_choice = 2  # epoch 1 has no losses yet, so nothing below their mean

    def setup(self) -> None:
        super().setup()
        self.loss = torch.zeros(self.num_samples, dtype=torch.float32, device=self.device)  # latest

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
        out = candidates[torch.randperm(candidates.numel(), generator=self.generator, device=self.device)[:n_out]]
        keep = torch.ones(self.num_samples, dtype=torch.bool, device=self.device)
        keep[out] = False
        if not self.cfg.infobatch_rescale:  # the ablation: no expectation rescaling
            return self.keep_mask_plan(keep, None)
        weights = torch.where(below & keep, 1.0 / (1.0 - r), 1.0).to(torch.float32)
        return self.keep_mask_plan(keep, weights)

"""`ucb`: upper-confidence-bound selection (Raju et al., 2021): every epoch keep the k samples
with the highest mean + c·std of their running loss estimates (bandit.py holds what it shares
with egreedy). A sample whose loss swings (high std) stays even at a middling mean: the
exploration term. Page and our reading of the paper: docs/policies/ucb.md."""

from __future__ import annotations

from ...lazytorch import torch
from ..registry import register
from .bandit import RunningLoss


@register
class UCB(RunningLoss):
    name = "ucb"
    label = "UCB"
    color = "#9467bd"
    order = 40
    help = "Raju et al. 2021: keep the highest mean + c x std of each sample's running loss"

    def priority(self) -> torch.Tensor:
        return self.unseen_first(self.mean + self.cfg.ucb_c * self.var.sqrt())

"""`egreedy`: epsilon-greedy selection (Raju et al., 2021): every epoch keep the k - round(ε·k)
samples with the highest running mean loss, plus round(ε·k) drawn uniformly from the others
(bandit.py holds what it shares with ucb). Page: docs/policies/egreedy.md."""

from __future__ import annotations

from ...lazytorch import torch
from ..registry import register
from ..tracker import highest
from .bandit import RunningLoss


@register
class EpsilonGreedy(RunningLoss):
    name = "egreedy"
    label = "epsilon-greedy"
    color = "#8c564b"
    order = 50
    help = "Raju et al. 2021: keep the highest running mean loss, plus an epsilon share at random"

    def priority(self) -> torch.Tensor:
        return self.unseen_first(self.mean)

    def select(self) -> torch.Tensor:
        explore = round(self.cfg.epsilon * self.budget)
        greedy = highest(self.priority(), self.budget - explore, self.generator)
        rest = self.all[~self.mask(greedy)]
        drawn = torch.randperm(rest.numel(), generator=self.generator, device=self.device)[:explore]
        return torch.cat([greedy, rest[drawn]])

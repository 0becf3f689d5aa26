"""`rs2`: repeated random sampling without replacement (Okanovic et al., ICLR 2024, "Repeated
Random Sampling for Minimizing the Time-to-Accuracy of Learning"). One random permutation of
the samples; each epoch trains its next k = N - round(prune_fraction x N); a new permutation
after a full pass. No scores. Page, and where N is no multiple of k: docs/policies/rs2.md.
"""

from __future__ import annotations

from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan, every_epoch_idle, pruned_count
from ..registry import register
from .dynamic import WholeRunState


@register
class RS2(WholeRunState):
    name = "rs2"
    label = "RS2"
    color = "#b15928"
    order = 70
    help = "Okanovic et al. 2024: each epoch the next (1 - f)N of a random permutation, a new one per pass"
    # False although its counts are known before the run: the dry run and `estimate` would read
    # True as fine's schedule, and rs2 prunes every epoch (its budget is read from the run, as ucb's)
    budget_before_run = False
    unplanned = "every epoch, a slice of a random permutation (no losses)"
    state_keys = ("permutation",)

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        return every_epoch_idle(cfg) or super().idle_reason(cfg, epochs)  # --anneal

    def setup(self) -> None:
        super().setup()
        self.budget = self.num_samples - pruned_count(self.cfg, self.num_samples)  # k
        self.permutation = self.all.clone()  # the round's permutation, shuffled in place at each new round
        self.position = 0  # where the next epoch's slice starts; 0: a new round

    def plan(self, epoch: int) -> EpochPlan:
        if self.annealed(epoch):
            return EpochPlan(self.all)
        indices = self.next_slice()
        return EpochPlan(indices, pruned=indices.numel() < self.num_samples)

    def next_slice(self) -> torch.Tensor:
        """The authors' UniformNoReplacement.select: slices of k, and a round's last, short
        slice wraps to the start of the same permutation, one sample short of k (their end
        index is taken mod N + 1); the next epoch starts a new round."""
        n, start = self.num_samples, self.position
        if start == 0:
            self.permutation = self.permutation[torch.randperm(n, generator=self.generator, device=self.device)]
        end = start + self.budget
        if end <= n:
            self.position = end % n
            return self.permutation[start:end]
        self.position = 0
        return torch.cat([self.permutation[start:], self.permutation[: end - n - 1]])

    def planned_samples(self, epoch: int) -> int:
        """k, and k - 1 in a round's last epoch when k does not divide N (rounds of ceil(N/k)
        epochs from epoch 1; every epoch plans, so none shifts them before annealing ends)."""
        if self.annealed(epoch):
            return self.num_samples
        round_epochs = -(-self.num_samples // self.budget)  # ceil(N/k)
        short = self.num_samples % self.budget != 0 and epoch % round_epochs == 0
        return self.budget - 1 if short else self.budget

    def clear_pending(self) -> None:
        """Nothing is observed, so nothing is pending."""

    def state_dict(self) -> dict:
        return {**super().state_dict(), "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.position = int(state["position"])

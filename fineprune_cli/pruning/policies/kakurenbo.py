"""`kakurenbo`: KAKURENBO (Nguyen et al., NeurIPS 2023, "Adaptively Hiding Samples in Deep
Neural Network Training"). Each epoch hides up to F (`--prune-fraction`) of the lowest-loss
samples, except those mispredicted or below confidence tau; the hidden ones get a forward-only
pass at the epoch's end, and the lr of an epoch training s of N samples is x N/s.
Our reading of the paper and its code: docs/policies/kakurenbo.md.
"""

from __future__ import annotations

import math

from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan, pruned_count
from ..registry import register
from ..tracker import highest
from .dynamic import WholeRunState

LOSS, COUNT, RIGHT, CONF = range(4)  # columns of the pending observations


@register
class Kakurenbo(WholeRunState):
    name = "kakurenbo"
    label = "KAKURENBO"
    color = "#17becf"
    order = 60
    help = (
        "Nguyen et al. 2023: hide up to F of the lowest-loss samples unless mispredicted or "
        "unsure (< tau); lr x N/trained"
    )
    observes = True
    observes_predictions = True
    scales_lr = True
    budget_before_run = False
    state_keys = ("seen", "loss", "right", "confidence")
    own_settings = ("kakurenbo_tau",)
    first_choice = 2  # epoch 1 has observed nothing: it trains every sample

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        if cfg.prune_fraction == 0:
            return "--prune-fraction 0 hides no sample; give the share it may hide"
        return super().idle_reason(cfg, epochs)  # the epochs and --anneal

    def setup(self) -> None:
        super().setup()
        n = self.num_samples
        self.max_hidden = pruned_count(self.cfg, n)
        self.seen = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.loss = torch.zeros(n, dtype=torch.float32, device=self.device)
        self.right = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.confidence = torch.zeros(n, dtype=torch.float32, device=self.device)
        self.hidden: torch.Tensor | None = None  # the current epoch's hidden samples
        self._new_pending()

    def _new_pending(self) -> None:
        self._pending = torch.zeros(self.num_samples, 4, dtype=torch.float32, device=self.device)

    # --- the protocol ---
    def plan(self, epoch: int) -> EpochPlan:
        self.hidden = None if self.annealed(epoch) else self.choose_hidden()
        if self.hidden is None or self.hidden.numel() == 0:
            return EpochPlan(self.all)
        return EpochPlan(self.keep_all_but(self.hidden), pruned=True)

    def choose_hidden(self) -> torch.Tensor:
        """The lowest-loss m, less those moved back (mispredicted, unsure or never seen)."""
        if self.max_hidden == 0:
            return self.all[:0]
        loss = torch.where(self.seen, self.loss, math.inf)
        lowest = highest(-loss, self.max_hidden, self.generator)
        stays = self.seen[lowest] & self.right[lowest] & (self.confidence[lowest] >= self.cfg.kakurenbo_tau)
        return lowest[stays].sort().values

    def refresh(self, epoch: int) -> torch.Tensor | None:
        return self.hidden if self.hidden is not None and self.hidden.numel() else None

    def planned_samples(self, epoch: int) -> int | None:
        return self.num_samples if self.annealed(epoch) or self.max_hidden == 0 else None

    def observe(self, indices, losses, mean=None, correct=None, confidence=None) -> None:
        if correct is None or confidence is None:
            raise ValueError("kakurenbo observes each sample's correctness and confidence as well")
        idx = indices.to(self.device)
        ones = torch.ones(idx.numel(), dtype=torch.float32, device=self.device)
        rows = torch.stack(
            [
                losses.detach().reshape(-1).to(self.device, torch.float32),
                ones,
                correct.reshape(-1).to(self.device, torch.float32),
                confidence.detach().reshape(-1).to(self.device, torch.float32),
            ],
            dim=1,
        )
        self._pending.index_add_(0, idx, rows)

    def take_pending(self) -> list[torch.Tensor]:
        """Per sample: loss sum, observations, right ones, confidence sum; summed over ranks
        they are exactly one process's (each sample observed on one rank, zeros elsewhere)."""
        pending = [self._pending]
        self._new_pending()
        return pending

    def fold(self, pending: list[torch.Tensor]) -> None:
        (sums,) = (t.to(self.device, torch.float32) for t in pending)
        count = sums[:, COUNT]
        now = count > 0
        if not bool(now.any()):
            return
        n = count.clamp(min=1)
        self.loss = torch.where(now, sums[:, LOSS] / n, self.loss)
        self.right = torch.where(now, sums[:, RIGHT] == count, self.right)
        self.confidence = torch.where(now, sums[:, CONF] / n, self.confidence)
        self.seen |= now

    @property
    def scores(self) -> torch.Tensor:
        """The latest loss of every sample; NaN for samples never observed."""
        return torch.where(self.seen, self.loss, math.nan)

    def clear_pending(self) -> None:
        self._new_pending()

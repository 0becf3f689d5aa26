"""What `infobatch`, `ucb` and `egreedy` share: per-sample scores made from the training
steps' own losses (no extra forward pass), folded in once per epoch, and a fresh choice of
samples in every epoch up to the annealing epoch.

Observing keeps, since the last sync, the sum of each sample's losses and how many there were.
Steps are buffered and added together (two `index_add_` per FLUSH_EVERY steps, none per step),
as DroppingCount does, so a step pays a list append. Those two tensors are the pending
observations: summed over
data-parallel ranks they are exactly what one process seeing whole batches would hold (each
sample's loss on one rank, zeros elsewhere, so the sum is bit-exact), and `fold` turns them
into one observation per sample seen: the mean of its losses that epoch (in a normal epoch
a sample trains once, so that is its loss).
"""

from __future__ import annotations

from typing import ClassVar

from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan, Policy
from ..schedule import last_pruning_epoch
from ..tracker import FLUSH_EVERY


class WholeRunState(Policy):
    """Per-sample tensors named by `state_keys`, kept for the whole run: checkpointed whole at an
    epoch edge and saved as one 'window' after the last epoch. A fresh choice each epoch from
    `first_choice` on, up to the annealing epoch."""

    state_keys: ClassVar[tuple[str, ...]] = ()
    first_choice: ClassVar[int] = 1  # the first epoch whose plan can leave samples out

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        anneal = cls.anneal_of(cfg)
        last = last_pruning_epoch(anneal, epochs, cls.anneal_in_float)
        last = epochs if last is None else min(epochs, last)
        if last >= cls.first_choice:
            return None
        if epochs < cls.first_choice:
            return f"its first epoch that can leave samples out is epoch {cls.first_choice}; train longer"
        return (
            f"--anneal {anneal:g} stops pruning after epoch {last}, before epoch {cls.first_choice}, "
            "the first that can leave samples out; raise --anneal"
        )

    def clear_pending(self) -> None:
        """Drop observations not yet folded in by `sync` (a checkpoint never holds them)."""
        raise NotImplementedError

    def snapshot_due(self, epoch: int, epochs: int) -> int | None:
        """One 'window', the whole run: its scores are saved after the last epoch."""
        return 0 if epoch == epochs else None

    def state_dict(self) -> dict:
        """Taken at an epoch edge, after `sync` (pending observations are not saved)."""
        return {**super().state_dict(), **{k: getattr(self, k).clone() for k in self.state_keys}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for key in self.state_keys:
            getattr(self, key).copy_(state[key])
        self.clear_pending()


class LossScored(WholeRunState):
    """Subclasses implement `update(seen_now, losses)` (fold one epoch's observations into
    their state) and `choose(epoch)` (the plan of an epoch before annealing ends), and list
    their state tensors in `state_keys` for checkpoints."""

    observes = True
    budget_before_run = False
    state_keys: ClassVar[tuple[str, ...]] = ("seen",)

    def setup(self) -> None:
        super().setup()
        self.seen = torch.zeros(self.num_samples, dtype=torch.bool, device=self.device)  # ever observed
        self._reset_pending()

    def _reset_pending(self) -> None:
        self._sums = torch.zeros(self.num_samples, dtype=torch.float32, device=self.device)
        self._counts = torch.zeros(self.num_samples, dtype=torch.float32, device=self.device)
        self._steps: list[tuple[torch.Tensor, torch.Tensor]] = []  # (indices, losses) not added yet

    def _flush(self) -> None:
        if not self._steps:
            return
        idx = torch.cat([i for i, _ in self._steps]).to(self.device)
        # float32 whatever the autocast dtype, so every rank and a single process add alike
        self._sums.index_add_(0, idx, torch.cat([x for _, x in self._steps]).to(self.device, torch.float32))
        self._counts.index_add_(0, idx, torch.ones(idx.numel(), device=self.device))
        self._steps.clear()

    # --- the protocol ---
    def plan(self, epoch: int) -> EpochPlan:
        return EpochPlan(self.all) if self.annealed(epoch) else self.choose(epoch)

    def observe(
        self,
        indices: torch.Tensor,
        losses: torch.Tensor,
        mean: torch.Tensor | None = None,
        correct: torch.Tensor | None = None,
        confidence: torch.Tensor | None = None,
    ) -> None:
        self._steps.append((indices, losses.detach().reshape(-1)))
        if len(self._steps) >= FLUSH_EVERY:
            self._flush()

    def take_pending(self) -> list[torch.Tensor]:
        self._flush()
        pending = [self._sums, self._counts]
        self._reset_pending()  # fresh tensors: the caller may keep (or reduce in place) these
        return pending

    def fold(self, pending: list[torch.Tensor]) -> None:
        sums, counts = (t.to(self.device, torch.float32) for t in pending)
        now = counts > 0
        if bool(now.any()):
            self.update(now, sums / counts.clamp(min=1))
            self.seen |= now

    def planned_samples(self, epoch: int) -> int | None:
        return self.num_samples if self.annealed(epoch) else None

    def clear_pending(self) -> None:
        self._reset_pending()

    # --- for subclasses ---
    def update(self, now: torch.Tensor, losses: torch.Tensor) -> None:
        """Fold one observation into the samples where `now` is True (`losses`: length N)."""
        raise NotImplementedError

    def choose(self, epoch: int) -> EpochPlan:
        raise NotImplementedError

    def keep_mask_plan(self, keep: torch.Tensor, weights: torch.Tensor | None = None) -> EpochPlan:
        """The plan that trains the samples where `keep` is True (in index order)."""
        left_out = self.num_samples - int(keep.sum())
        return EpochPlan(self.all[keep], weights, pruned=left_out > 0)

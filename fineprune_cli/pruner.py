"""Fine-pruning for any PyTorch loop: DroppingCount (Algorithm 1) + the schedule (Algorithm 2).

    pruner = Pruner(num_samples, PruneSchedule(window=10, start=5), prune_fraction=0.3)
    for epoch in range(1, epochs + 1):
        keep = pruner.begin_epoch(epoch)        # sample indices this epoch trains
        for idx in keep[torch.randperm(len(keep))].split(128):
            losses = loss_fn(model(x[idx]), y[idx])      # reduction="none"
            ...backward, step...
            pruner.update(idx, losses)
"""

from __future__ import annotations

import torch

from .schedule import PruneSchedule
from .tracker import DroppingCount

POLICIES = ("fine", "random")


class Pruner:
    """Decides, epoch by epoch, which samples train.

    policy "fine" leaves out the m = round(prune_fraction x N) samples with the highest
    DroppingCount; "random" (the control) leaves out m samples drawn uniformly in the same
    epochs, so both spend the same budget.
    """

    def __init__(self, num_samples: int, schedule: PruneSchedule, prune_fraction: float = 0.3,
                 tolerance: float = 0.0, policy: str = "fine", seed: int = 0,
                 device: torch.device | str = "cpu", reduce=None, owns_counts: bool = True):
        """Data-parallel: `reduce` sums the ranks' counts before any selection; only the rank
        that `owns_counts` restores the (global) counts of a checkpoint, the others start at 0."""
        if not 0 <= prune_fraction < 1:
            raise ValueError(f"prune_fraction must be in [0, 1), got {prune_fraction}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.schedule = schedule
        self.policy = policy
        self.num_samples = num_samples
        self.num_pruned = round(prune_fraction * num_samples)
        self.tracker = DroppingCount(num_samples, tolerance, device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self._all = torch.arange(num_samples, device=device)
        self.epoch = 0
        self.reduce, self.owns_counts = reduce, owns_counts

    def prunes(self, epoch: int) -> bool:
        return self.num_pruned > 0 and self.schedule.prunes(epoch)

    def begin_epoch(self, epoch: int) -> torch.Tensor:
        """Reset counts at a window edge, then return the indices epoch `epoch` trains."""
        self.epoch = epoch
        if self.schedule.resets(epoch):
            self.tracker.reset()
        if not self.prunes(epoch):
            return self._all
        keep = torch.ones(self.num_samples, dtype=torch.bool, device=self._all.device)
        keep[self.dropped()] = False
        return self._all[keep]

    def dropped(self) -> torch.Tensor:
        if self.policy == "fine":
            return self.tracker.highest(self.num_pruned, self.generator, self.counts)
        perm = torch.randperm(self.num_samples, generator=self.generator, device=self._all.device)
        return perm[: self.num_pruned]

    def update(self, indices: torch.Tensor, losses: torch.Tensor, mean: torch.Tensor | None = None) -> None:
        if self.policy == "fine":
            self.tracker.update(indices, losses, mean)

    @property
    def counts(self) -> torch.Tensor:
        """DroppingCount of every sample (summed over ranks when data-parallel)."""
        counts = self.tracker.counts
        return self.reduce(counts) if self.reduce is not None else counts

    def state_dict(self) -> dict:
        tracker = self.tracker.state_dict()
        tracker["counts"] = self.counts.clone()  # global counts when data-parallel
        return {"tracker": tracker, "generator": self.generator.get_state(), "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.tracker.load_state_dict(state["tracker"])
        if not self.owns_counts:
            self.tracker.reset()
        self.generator.set_state(state["generator"])
        self.epoch = state["epoch"]

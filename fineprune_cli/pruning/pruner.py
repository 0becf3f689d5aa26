"""Fine-pruning for any PyTorch loop, in the shape of the first release (a thin wrapper over
the policy protocol; `fineprune_cli.pruning.policy` is the general interface).

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

from ..settings import check_section
from .config import PruneConfig
from .policies.scheduled import Scheduled
from .policy import Policy, Reduce, create
from .schedule import PruneSchedule


class Pruner:
    """Decides, epoch by epoch, which samples train.

    policy "fine" leaves out the m = round(prune_fraction x N) samples with the highest
    DroppingCount; "random" (the control) leaves out m samples drawn uniformly in the same
    epochs, so both spend the same budget. Data-parallel: `reduce` sums a tensor over ranks.
    """

    def __init__(
        self,
        num_samples: int,
        schedule: PruneSchedule,
        prune_fraction: float = 0.3,
        tolerance: float = 0.0,
        policy: str = "fine",
        seed: int = 0,
        device: torch.device | str = "cpu",
        reduce: Reduce | None = None,
        epochs: int | None = None,
    ):
        if not isinstance(schedule, PruneSchedule):
            raise TypeError(f"schedule must be a PruneSchedule, got {type(schedule).__name__}")
        for name, value in (("prune_fraction", prune_fraction), ("tolerance", tolerance)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        if reduce is not None and not callable(reduce):
            raise TypeError(f"reduce must be a function (a sum over ranks) or None, got {type(reduce).__name__}")
        cfg = PruneConfig(
            policy=policy,
            window=schedule.window,
            start=schedule.start,
            attenuation=schedule.attenuation,
            block=schedule.block,
            count=schedule.count,
            prune_fraction=prune_fraction,
            tolerance=tolerance,
        )
        check_section(cfg, "prune.")  # ValueError (ConfigError) on a bad value
        self.schedule = schedule
        self.policy: Policy = create(policy, num_samples, cfg, seed, device, epochs)
        self.reduce = reduce
        self.epoch = 0

    @property
    def num_pruned(self) -> int:
        return getattr(self.policy, "num_pruned", 0)

    def prunes(self, epoch: int) -> bool:
        """Whether epoch `epoch` leaves samples out: the policy's own rule, without planning it."""
        if not isinstance(self.policy, Scheduled):
            raise TypeError(
                f"policy {self.policy.name!r} chooses from the losses which epochs prune; "
                "read begin_epoch's keep-list instead"
            )
        return self.policy.prunes(epoch)

    def begin_epoch(self, epoch: int) -> torch.Tensor:
        """Fold the last epoch's observations in, then return the indices epoch `epoch` trains."""
        self.policy.sync(self.reduce)
        self.epoch = epoch
        return self.policy.plan(epoch).indices

    def update(self, indices: torch.Tensor, losses: torch.Tensor, mean: torch.Tensor | None = None) -> None:
        self.policy.observe(indices, losses.detach(), mean)

    @property
    def counts(self) -> torch.Tensor:
        """DroppingCount of every sample (summed over ranks when data-parallel)."""
        self.policy.sync(self.reduce)
        scores = self.policy.scores
        return scores if scores is not None else torch.zeros(self.policy.num_samples, dtype=torch.int32)

    def state_dict(self) -> dict:
        self.policy.sync(self.reduce)
        return {"policy": self.policy.state_dict(), "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.epoch = state["epoch"]

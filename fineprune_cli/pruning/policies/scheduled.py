"""What `fine` and `random` share: Algorithm 2's schedule and the number of samples left out."""

from __future__ import annotations

from ...errors import ConfigError
from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan, Policy, pruned_count
from ..schedule import PruneSchedule, annealed, last_pruning_epoch


class Scheduled(Policy):
    """Leaves `select()`'s m = round(prune_fraction x N) samples out of the schedule's epochs."""

    def setup(self) -> None:
        super().setup()
        if self.cfg.window is None or self.cfg.start is None:
            raise ConfigError(
                f"{self.name}: the default window and start are shares of the run's length; "
                "create the policy with epochs=n, or set window and start"
            )
        self.schedule = PruneSchedule.from_config(self.cfg)
        self.num_pruned = pruned_count(self.cfg, self.num_samples)

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        schedule = PruneSchedule.from_config(cfg)
        first, anneal = schedule.first_pruning_epoch(), cls.anneal_of(cfg)
        last = last_pruning_epoch(anneal, epochs)
        if first is not None and first <= epochs and not annealed(first, last):
            return None
        if first is None:
            return (
                f"window {schedule.window} with start {schedule.start} never meets an epoch that block "
                f"{schedule.block} with count {schedule.count} prunes; change --start or --block"
            )
        if first <= epochs:
            return (
                f"--anneal {anneal:g} stops pruning after epoch {last}, before the schedule's first "
                f"pruning epoch {first}; raise --anneal or lower --start"
            )
        return (
            f"window {schedule.window} with start {schedule.start} first prunes epoch {first}; "
            f"lower --start or --window, or leave both unset (15% and 30% of --epochs)"
        )

    def prunes(self, epoch: int) -> bool:
        """Whether `epoch` leaves samples out: the one rule, which `plan`, `planned_samples` and
        the library's `Pruner` ask (the schedule's epochs up to `--anneal`, when m > 0)."""
        return self.num_pruned > 0 and self.schedule.prunes(epoch, self.last_pruning_epoch)

    def plan(self, epoch: int) -> EpochPlan:
        self.begin_window(epoch)
        if not self.prunes(epoch):
            return EpochPlan(self.all)
        return EpochPlan(self.keep_all_but(self.select()), pruned=True)

    def planned_samples(self, epoch: int) -> int:
        return self.num_samples - self.num_pruned if self.prunes(epoch) else self.num_samples

    def begin_window(self, epoch: int) -> None:
        """Called before every plan; `fine` clears its counts at a window's start."""

    def select(self) -> torch.Tensor:
        raise NotImplementedError

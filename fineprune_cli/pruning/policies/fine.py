"""`fine`: data fine-pruning (Li et al., 2018). Leaves out the samples with the highest
DroppingCount (Algorithm 1) in the schedule's pruning epochs (Algorithm 2); `--drop easy`
leaves out the lowest instead, and `--anneal δ` stops pruning after epoch δ·n.
The method, its defaults and our reading of the paper: docs/policies/fine.md, docs/choices.md."""

from __future__ import annotations

from typing import Iterable

from ...lazytorch import torch
from ..registry import register
from ..schedule import counts_empty
from ..tracker import DroppingCount, highest
from .scheduled import Scheduled


@register
class FinePruning(Scheduled):
    name = "fine"
    label = "fine-pruning"
    color = "#d62728"
    order = 10
    observes = True
    score_name = "dropping_counts"
    help = "the paper: leave out the highest DroppingCount in the schedule's epochs"

    @classmethod
    def random_equal_epochs(cls, window: int, pruning_epochs: Iterable[int]) -> list[int]:
        # empty counts all tie, and `highest` orders ties by randperm(N) from the policy's generator:
        # random's own draw, from a generator both policies advance alike (one draw a pruning epoch)
        return [e for e in pruning_epochs if counts_empty(e, window)]

    def setup(self) -> None:
        super().setup()
        # this process's steps since the last sync, counted by Algorithm 1's rule
        self.pending = DroppingCount(self.num_samples, self.cfg.tolerance, self.device)
        # the window's DroppingCount: every sync's pending counts (summed over the ranks) added up
        self.dropping_count = torch.zeros(self.num_samples, dtype=torch.int32, device=self.device)

    def begin_window(self, epoch: int) -> None:
        if self.schedule.resets(epoch):  # Algorithm 1, line 1
            self.dropping_count.zero_()
            self.pending.reset()

    def select(self) -> torch.Tensor:
        # --drop easy (not the paper): leave out the lowest counts, as InfoBatch & co. do
        ranked = self.dropping_count if self.cfg.drop == "hard" else -self.dropping_count
        return highest(ranked, self.num_pruned, self.generator)

    def observe(
        self,
        indices: torch.Tensor,
        losses: torch.Tensor,
        mean: torch.Tensor | None = None,
        correct: torch.Tensor | None = None,
        confidence: torch.Tensor | None = None,
    ) -> None:
        self.pending.update(indices, losses, mean)

    def take_pending(self) -> list[torch.Tensor]:
        pending = self.pending.counts.clone()
        self.pending.reset()
        return [pending]

    def fold(self, pending: list[torch.Tensor]) -> None:
        self.dropping_count += pending[0].to(self.dropping_count.device, self.dropping_count.dtype)

    @property
    def scores(self) -> torch.Tensor:
        return self.dropping_count

    def snapshot_due(self, epoch: int, epochs: int) -> int | None:
        ends = self.schedule.window_ends(epoch, epochs)
        return self.schedule.window_index(epoch) if ends else None

    # the key stays "counts": checkpoints written before the rename resume unchanged
    def state_dict(self) -> dict:
        return {**super().state_dict(), "counts": self.dropping_count.clone()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pending.reset()
        self.dropping_count.copy_(state["counts"])

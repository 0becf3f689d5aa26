"""`fine`: data fine-pruning (Li et al., 2018). Leaves out the samples with the highest
DroppingCount (Algorithm 1) in the schedule's pruning epochs (Algorithm 2); `--drop easy`
leaves out the lowest instead, and `--anneal δ` stops pruning after epoch δ·n."""

from __future__ import annotations

import torch

from ..config import PruneConfig
from ..registry import register
from ..tracker import DroppingCount
from .scheduled import Scheduled


@register
class FinePruning(Scheduled):
    name = "fine"
    label = "fine-pruning"
    color = "#d62728"
    order = 10
    observes = True
    score_name = "dropping_counts"
    description = "the paper: leave out the highest DroppingCount in the schedule's epochs"

    def __init__(self, num_samples: int, cfg: PruneConfig, seed: int = 0,
                 device: torch.device | str = "cpu", epochs: int | None = None):
        super().__init__(num_samples, cfg, seed, device, epochs)
        self.tracker = DroppingCount(num_samples, cfg.tolerance, self.device)  # since the last sync
        self.counts = torch.zeros(num_samples, dtype=torch.int32, device=self.device)  # the window's

    def begin_window(self, epoch: int) -> None:
        if self.schedule.resets(epoch):  # Algorithm 1, line 1
            self.counts.zero_()
            self.tracker.reset()

    def select(self) -> torch.Tensor:
        # --drop easy (not the paper): leave out the lowest counts, as InfoBatch & co. do
        counts = self.counts if self.cfg.drop == "hard" else -self.counts
        return self.tracker.highest(self.num_pruned, self.generator, counts)

    def observe(self, indices: torch.Tensor, losses: torch.Tensor, mean: torch.Tensor | None = None,
                correct: torch.Tensor | None = None, confidence: torch.Tensor | None = None) -> None:
        self.tracker.update(indices, losses, mean)

    def take_pending(self) -> list[torch.Tensor]:
        pending = self.tracker.counts.clone()
        self.tracker.reset()
        return [pending]

    def fold(self, pending: list[torch.Tensor]) -> None:
        self.counts += pending[0].to(self.counts.device, self.counts.dtype)

    @property
    def scores(self) -> torch.Tensor:
        return self.counts

    def snapshot_due(self, epoch: int, epochs: int) -> int | None:
        ends = self.schedule.window_ends(epoch, epochs)
        return self.schedule.window_index(epoch) if ends else None

    def state_dict(self) -> dict:
        return {**super().state_dict(), "counts": self.counts.clone()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.tracker.reset()
        self.counts.copy_(state["counts"])

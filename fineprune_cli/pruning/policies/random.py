"""`random`: the equal-budget control. Leaves out m samples drawn uniformly in the same
epochs as `fine` (same schedule, same fraction). With `--window 1 --start 0 --block 1
--count 1` it prunes every epoch: uniform dynamic random pruning (Raju et al., 2021; RS2).
`--anneal δ` stops it after epoch δ·n, like every policy. Page: docs/policies/random.md."""

from __future__ import annotations

from ...lazytorch import torch
from ..registry import register
from .scheduled import Scheduled


@register
class RandomControl(Scheduled):
    name = "random"
    label = "random control"
    color = "#1f77b4"
    order = 20
    help = "control: leave out a uniform random m samples in the same epochs"

    def select(self) -> torch.Tensor:
        perm = torch.randperm(self.num_samples, generator=self.generator, device=self.device)
        return perm[: self.num_pruned]

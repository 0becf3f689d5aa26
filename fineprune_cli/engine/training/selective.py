"""The trainer's selective step, for a policy that chooses rows inside each step
(`Policy.selects_batches`: Selective-Backprop). Its batch goes forward without gradients, in
training mode as in Composer's algorithm (batch norm's running statistics see it, dropout draws),
the policy picks the rows that train from the per-sample losses, and the step goes on with those
rows alone. How many rows is host arithmetic (`batch_keep`), and on the padded (compiled) path a
short batch's kept rows are padded to a full batch's count, so the compiled model sees one shape
per batch size and a step never waits for the host.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.nn.functional as F


class Selecting(Protocol):
    """What a trainer asks of a policy that selects rows (pruning.policy.Policy's two methods)."""

    def batch_keep(self, epoch: int, batch: int, size: int) -> int | None: ...
    def select_batch(self, losses: torch.Tensor, keep: int) -> torch.Tensor: ...


def kept_rows(trainer: Any, policy: Selecting, x: torch.Tensor, idx: torch.Tensor, real: int, keep: int, shape: int):
    """The selective step's (x, idx): the `keep` rows the policy chooses among the batch's first
    `real` (the rest is padding), padded with the batch's first rows up to `shape` rows, which
    train nothing (the step slices its loss to the first `keep`)."""
    with torch.no_grad(), trainer.autocast():
        logits = trainer.forward(x)
        losses = F.cross_entropy(logits[:real], trainer.data.train_y[idx[:real]], reduction="none")
    rows = policy.select_batch(losses, keep)
    if shape > keep:  # a device arange, not a host list: nothing waits
        rows = torch.cat([rows, torch.arange(shape - keep, device=rows.device) % real])
    return x[rows].contiguous(memory_format=trainer.memory_format), idx[rows]


def padded_shape(trainer: Any, policy: Selecting, epoch: int, batch: int, keep: int) -> int:
    """Rows the kept part of a step runs: on the padded path a full batch's kept count, whatever
    this batch's size; else the kept rows (two, where one would meet batch norm alone)."""
    if trainer.static_batches:
        return max(keep, policy.batch_keep(epoch, batch, trainer.rank_batch) or keep)
    return max(keep, 2)

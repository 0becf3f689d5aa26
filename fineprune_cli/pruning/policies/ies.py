"""`ies`: Instance-dependent Early Stopping (Yuan et al., ICLR 2025). A sample whose loss has
stopped moving, the moving average of the |second difference| of its per-epoch losses below a
threshold, sits out of backprop; it gets a forward-only pass every epoch and returns once its
loss moves again. As the authors' cifar_main.py selects; page and where we differ:
docs/policies/ies.md.
"""

from __future__ import annotations

import math

from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan
from ..registry import register
from .dynamic import LossScored

AVERAGE = 3  # the code's moving_average_rate: second differences per moving average
SPAN = AVERAGE + 1  # second differences kept: the code's moving_average_rate + k, k = 1
LOSSES = 3  # the losses one second difference needs


def second_difference(history: torch.Tensor) -> torch.Tensor:
    """x[-1] - 2·x[-2] + x[-3] of each row's last three losses (oldest first), in the code's order."""
    return history[:, 2] - 2 * history[:, 1] + history[:, 0]


def latest_average(diffs: torch.Tensor) -> torch.Tensor:
    """The code's last moving average of |second differences| (k = 1), by its running sum: the
    first window added up from 0, then one in and one out per step, so that a sample exactly at
    the threshold falls on the code's side of it."""
    size = diffs.abs()
    window = torch.zeros_like(size[:, 0])
    for j in range(AVERAGE):
        window = window + size[:, j]
    for i in range(AVERAGE, SPAN):
        window = window + (size[:, i] - size[:, i - AVERAGE])
    return window / AVERAGE


def push(rows: torch.Tensor, counts: torch.Tensor, where: torch.Tensor, value: torch.Tensor) -> tuple:
    """Append `value` to the rows `where` is True (dropping each row's oldest), counting up to the width."""
    shifted = torch.cat([rows[:, 1:], value[:, None]], dim=1)
    rows = torch.where(where[:, None], shifted, rows)
    counts = torch.where(where, (counts + 1).clamp(max=rows.shape[1]), counts)
    return rows, counts


@register
class IES(LossScored):
    name = "ies"
    label = "IES"
    color = "#bcbd22"
    order = 85
    help = "Yuan et al. 2025: skip samples whose loss stopped moving (2nd difference); re-scored forward-only"
    state_keys = ("seen", "history", "n_history", "diffs", "n_diffs", "out")
    own_settings = ("ies_threshold",)
    first_choice = LOSSES + SPAN  # the end of epoch 6 holds 6 losses, 4 second differences: 7 can drop

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        if cfg.ies_threshold == 0:
            return "--ies-threshold 0 drops no sample (the authors' baseline); give a threshold"
        return super().idle_reason(cfg, epochs)  # the epochs and --anneal

    def setup(self) -> None:
        super().setup()
        n = self.num_samples
        # float64, as the code's Python floats: the same second differences and averages to the bit
        self.history = torch.zeros(n, LOSSES, dtype=torch.float64, device=self.device)  # oldest first
        self.n_history = torch.zeros(n, dtype=torch.long, device=self.device)
        self.diffs = torch.zeros(n, SPAN, dtype=torch.float64, device=self.device)  # the latest ones
        self.n_diffs = torch.zeros(n, dtype=torch.long, device=self.device)
        self.out = torch.zeros(n, dtype=torch.bool, device=self.device)  # the samples sitting out
        self.sitting_out: torch.Tensor | None = None  # this epoch's, for refresh

    # --- the protocol ---
    def plan(self, epoch: int) -> EpochPlan:
        out = None if self.annealed(epoch) else self.all[self.out]
        self.sitting_out = out if out is not None and out.numel() else None
        if self.sitting_out is None:
            return EpochPlan(self.all)
        return EpochPlan(self.keep_all_but(self.sitting_out), pruned=True)

    def refresh(self, epoch: int) -> torch.Tensor | None:
        return self.sitting_out

    def planned_samples(self, epoch: int) -> int | None:
        return self.num_samples if self.annealed(epoch) or epoch < self.first_choice else None

    def fold(self, pending: list[torch.Tensor]) -> None:
        """The epoch's edge, as the code's: each observed loss appended, then a second difference
        for every sample with three losses (one not observed repeats its last), then the samples
        whose latest average is below the threshold sit out; none below it, or all: the last set stays."""
        sums, counts = (t.to(self.device, torch.float32) for t in pending)
        now = counts > 0
        latest = (sums / counts.clamp(min=1)).double()
        self.history, self.n_history = push(self.history, self.n_history, now, latest)
        self.seen |= now
        ready = self.n_history >= LOSSES
        self.diffs, self.n_diffs = push(self.diffs, self.n_diffs, ready, second_difference(self.history))
        below = (self.n_diffs >= SPAN) & (latest_average(self.diffs) < self.cfg.ies_threshold)
        # every sample below: the code's new shuffled loader over none raises (RandomSampler), so
        # its run ends there; we keep the last set and go on
        if 0 < int(below.sum()) < self.num_samples:
            self.out = below

    @property
    def scores(self) -> torch.Tensor:
        """Each sample's latest moving average of |second differences|; NaN before it has one."""
        return torch.where(self.n_diffs >= SPAN, latest_average(self.diffs), math.nan).float()

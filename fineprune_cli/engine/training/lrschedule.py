"""The learning rate: of an epoch (the milestone decays it has passed, times KAKURENBO's scale
for a pruned epoch), then of each optimizer step (the linear warm-up ramp over it, `lr_at`).
The one place the lr rule is written: the trainer and the parameter servers use it.

`--lr-schedule epochs` (the default, and the only behaviour before issue 23): milestone m is
passed in every epoch e > m.

`--lr-schedule progress`: milestone m is passed once the run has done m/E of its own training,
counted in samples trained (its optimizer steps, up to each epoch's partial last batch). A
dynamic policy does not know in advance how many samples its run will train, so at the start
of epoch e the run's total is estimated as

    S_<e  +  sum over j = e..E of  planned(j)

where S_<e is what epochs 1..e-1 trained and planned(j) the samples the policy says epoch j
trains when that is known before the run (every epoch of regular, fine, random, ucb and
egreedy; the annealed epochs of infobatch and kakurenbo), else the current epoch's own count
(a loss-driven epoch is taken as the best guess for the ones still to come). Epoch e's progress
is p_e = S_<e / that total, and milestone m counts as passed in epoch e when some epoch k <= e
had p_k >= m/E (the estimate can fall when a run's pruning stops; the lr never goes back up).
For a run that trains every sample p_e = (e - 1)/E, so `progress` equals `epochs` there; all
comparisons are made in integers, so that equality is exact.

`--lr-scale-pruned` (KAKURENBO, on by default for the kakurenbo policy): an epoch that trains
s < N samples runs at lr x N/s, so an epoch makes the same total step length as a full one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ...pruning.policy import Policy
from ..setup.config import TrainConfig, paper_milestones

Planned = Callable[[int], "int | None"]  # samples epoch j trains, when known before the run


@dataclass(frozen=True)
class EpochLr:
    decays: int  # milestones passed
    scale: float = 1.0  # N / samples when --lr-scale-pruned and the epoch is pruned

    def value(self, cfg: TrainConfig) -> float:
        lr = cfg.lr
        for _ in range(self.decays):  # multiplied in turn, as MultiStepLR does: the same bits
            lr *= cfg.gamma
        return lr * self.scale if self.scale != 1.0 else lr


def passed_by_epoch(cfg: TrainConfig, epoch: int) -> int:
    """Milestones passed in `epoch` (`--lr-schedule epochs`): m in every epoch e > m, so epoch
    m itself still runs at the lr before it, as torch's MultiStepLR stepped once an epoch."""
    # unset (a TrainConfig made in code, never resolved): the paper's shares of its epochs
    milestones = cfg.milestones if cfg.milestones is not None else paper_milestones(cfg.epochs)
    return sum(1 for m in milestones if epoch > m)


def lr_at(cfg: TrainConfig, epoch: int, step: int, warmup_steps: int, base: float | None = None) -> float:
    """The learning rate of optimizer step `step` (0-based, counted over the run) in `epoch`:
    the epoch's lr (`base`: an `LrSchedule`'s; default the milestone schedule by epoch) times a
    linear warm-up over the first `warmup_steps` steps (step warmup_steps - 1 is its last,
    at the full lr)."""
    lr = EpochLr(passed_by_epoch(cfg, epoch)).value(cfg) if base is None else base
    return lr * (step + 1) / warmup_steps if step < warmup_steps else lr


def warmup_length(cfg: TrainConfig, num_train: int) -> int:
    """Optimizer steps of the linear warm-up: warmup_epochs of full batches."""
    return round(cfg.warmup_epochs * -(-num_train // cfg.batch_size))


def passed(milestones: Sequence[int], epochs: int, done: int, total: int) -> int:
    """Milestones m with done/total >= m/epochs (in integers: exact)."""
    return sum(1 for m in milestones if done * epochs >= m * total)


class LrSchedule:
    """Per run: `at(epoch, samples, history)` gives the epoch's EpochLr.

    `history`: the samples each earlier epoch trained (the run's metrics rows, so a resumed
    run computes the same values); `samples`: what this epoch's plan trains; `planned`: the
    policy's `planned_samples`."""

    def __init__(self, cfg: TrainConfig, num_train: int, planned: Planned, scale_pruned: bool):
        self.cfg, self.num_train, self.scale_pruned = cfg, num_train, scale_pruned
        self.progress = cfg.lr_schedule == "progress"
        if self.progress:  # suffix sums over epochs j..E of the known counts, and of the unknown ones
            counts = [planned(j) for j in range(1, cfg.epochs + 1)]
            self.known_after = _suffix([c or 0 for c in counts])
            self.unknown_after = _suffix([1 if c is None else 0 for c in counts])

    def at(self, epoch: int, samples: int, history: Sequence[int]) -> EpochLr:
        scale = self.num_train / samples if self.scale_pruned and 0 < samples < self.num_train else 1.0
        if not self.progress:
            return EpochLr(passed_by_epoch(self.cfg, epoch), scale)
        counts = list(history[: epoch - 1]) + [samples]
        done, best = 0, 0
        for k in range(1, epoch + 1):  # the most milestones any epoch so far had passed
            total = done + self.known_after[k - 1] + self.unknown_after[k - 1] * counts[k - 1]
            best = max(best, passed(self.cfg.milestones, self.cfg.epochs, done, total))
            done += counts[k - 1]
        return EpochLr(best, scale)


def lr_schedule(cfg: TrainConfig, policy: Policy, num_train: int) -> LrSchedule:
    """A run's: --lr-schedule, and --lr-scale-pruned or, unset, the policy's default."""
    scale = cfg.lr_scale_pruned if cfg.lr_scale_pruned is not None else policy.scales_lr
    return LrSchedule(cfg, num_train, policy.planned_samples, scale)


def _suffix(values: list[int]) -> list[int]:
    out = [0] * (len(values) + 1)
    for i in range(len(values) - 1, -1, -1):
        out[i] = out[i + 1] + values[i]
    return out

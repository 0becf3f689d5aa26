"""`selective-backprop`: Selective-Backprop (Jiang et al., 2019) as MosaicML Composer's code runs it.
Every sample goes forward every epoch; in the steps its schedule picks (epochs from `--sb-start`
to `--sb-end` of the run, all but every `--sb-interrupt`-th batch), a forward without gradients
ranks the batch by loss and a draw of keep x B rows, likelier the higher their loss percentile,
goes forward and backward. Page and where we differ: docs/policies/selective-backprop.md.
"""

from __future__ import annotations

import numpy as np

from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import Policy
from ..registry import register


def due(epoch: int, epochs: int, batch: int, start: float, end: float, interrupt: int) -> bool:
    """Composer's `should_selective_backprop(current_duration, batch_idx, start, end, interrupt)`
    for `batch` (0-based) of `epoch` (1-based): its elapsed duration under a max_duration in epochs
    is the completed epochs over all, the same for every batch of an epoch."""
    duration = (epoch - 1) / epochs
    return start <= duration < end and (interrupt == 0 or (batch + 1) % interrupt != 0)


def kept_count(size: int, keep: float) -> int:
    """Composer's `n_select = int(keep * N)`, but at least one row: below 1/keep rows Composer's
    would train an empty batch."""
    return max(1, int(keep * size))


def percentile_probabilities(size: int, keep: float) -> np.ndarray:
    """Composer's draw probabilities, its own lines (NumPy, float64): position i of the batch
    sorted by loss, lowest first, is drawn with weight ((i + 0.5) / N) ** (1/keep - 1)."""
    percs = np.arange(0.5, size, 1) / size
    probs = percs ** ((1.0 / keep) - 1.0)
    return probs / np.sum(probs)


def draw(probs: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """`count` positions without replacement, each next one drawn with probability proportional
    to `probs` among those not yet drawn, in the order drawn: what `np.random.choice(N, count,
    replace=False, p=probs)` draws, by the exponential-keys construction of
    `torch.multinomial(probs, count, replacement=False)` (the same positions from the same generator
    state), without its host read of probs' range: on CUDA this never waits for the host."""
    keys = probs / torch.empty_like(probs).exponential_(1, generator=generator)
    return torch.topk(keys, count).indices


def by_loss(losses: torch.Tensor) -> torch.Tensor:
    """The batch's rows ordered by loss, lowest first: Composer's `sorted_idx`."""
    return torch.argsort(losses)


@register
class SelectiveBackprop(Policy):
    name = "selective-backprop"
    label = "Selective-Backprop"
    color = "#7f7f7f"
    order = 90
    help = "Jiang et al. 2019 (Composer's code): per step, backprop keep x B rows drawn by loss percentile"
    selects_batches = True
    budget_before_run = False  # its budget follows from the batch size, which a policy is not told
    own_settings = ("sb_keep", "sb_start", "sb_end", "sb_interrupt")

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        if cfg.sb_keep == 1:
            return "--sb-keep 1 keeps every row of a batch (Composer's algorithm does not run); give a share below 1"
        if cfg.sb_interrupt == 1:
            return "--sb-interrupt 1 makes every step a full one; give 0 (no full steps) or 2 or more"
        if not any(due(e, epochs, 0, cfg.sb_start, cfg.sb_end, 0) for e in range(1, epochs + 1)):
            return (
                f"no epoch starts at a share of the run in [--sb-start {cfg.sb_start:g}, --sb-end {cfg.sb_end:g}) "
                "(epoch e starts at (e - 1) / epochs); widen them or lengthen --epochs"
            )
        return None

    def setup(self) -> None:
        super().setup()
        if self.epochs is None:  # its schedule is a share of the run
            raise ValueError("selective-backprop needs the run's length: create the policy with epochs=n")
        self.probs: dict[int, torch.Tensor] = {}  # per batch size, on the device

    def batch_keep(self, epoch: int, batch: int, size: int) -> int | None:
        c = self.cfg
        assert self.epochs is not None, "setup refuses a policy without the run's length"
        if self.annealed(epoch) or not due(epoch, self.epochs, batch, c.sb_start, c.sb_end, c.sb_interrupt):
            return None
        return kept_count(size, c.sb_keep)

    def select_batch(self, losses: torch.Tensor, keep: int) -> torch.Tensor:
        """Composer's `select_using_loss` after its forward: the rows at `keep` positions drawn from
        the batch sorted by loss. Drawn on the policy's device with its generator (checkpointed)."""
        positions = draw(self.probabilities(losses.numel()), keep, self.generator)
        return by_loss(losses)[positions.to(losses.device)]

    def probabilities(self, size: int) -> torch.Tensor:
        """`percentile_probabilities(size)` on the device, made once per batch size; copied from
        pinned memory without blocking, so not even the first copy waits for the device."""
        if size not in self.probs:
            host = torch.from_numpy(percentile_probabilities(size, self.cfg.sb_keep))
            host = host.pin_memory() if self.device.type == "cuda" else host
            self.probs[size] = host.to(self.device, non_blocking=True)
        return self.probs[size]

    def planned_samples(self, epoch: int) -> int | None:
        """Every sample outside [start, end) of the run (or after --anneal); inside, the count
        depends on the batch size, which the policy is not told."""
        assert self.epochs is not None, "setup refuses a policy without the run's length"
        c = self.cfg
        if self.annealed(epoch) or not due(epoch, self.epochs, 0, c.sb_start, c.sb_end, 0):
            return self.num_samples
        return None

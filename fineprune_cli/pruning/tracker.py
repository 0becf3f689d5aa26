"""DroppingCount: Algorithm 1 of Li et al. (2018), vectorised and kept on the training device."""

from __future__ import annotations

from ..lazytorch import torch

FLUSH_EVERY = 512  # steps buffered before counting; bounds the memory the buffer holds


def highest(values: torch.Tensor, m: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Indices of the m highest values; equal values ordered by a seeded random permutation
    (so ties never favour low indices, and the draw is the same on every rank)."""
    perm = torch.randperm(values.numel(), generator=generator, device=values.device)
    order = torch.argsort(values[perm], descending=True, stable=True)
    return perm[order[:m]]


class DroppingCount:
    """One counter per training sample.

    `update` takes the per-sample losses of a training step's own forward pass: a sample
    whose loss exceeds its batch's mean x (1 + tolerance) has its count raised by one.
    Steps are buffered and counted together (a handful of vectorised ops per flush instead
    of per step), so tracking costs the training loop almost nothing; reading `counts`
    flushes first, so callers always see every update. No host synchronisation anywhere.

    On its own, reset at each window's start, it is the window's DroppingCount. Inside `fine`
    it holds one process's counts since the last sync (`pending`), which each sync adds, summed
    over the ranks, into the window's `dropping_count`.
    """

    def __init__(self, num_samples: int, tolerance: float = 0.0, device: torch.device | str = "cpu"):
        if tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {tolerance}")
        self.tolerance = float(tolerance)
        self._counts = torch.zeros(num_samples, dtype=torch.int32, device=device)
        self._indices: list[torch.Tensor] = []
        self._losses: list[torch.Tensor] = []
        self._means: list[torch.Tensor | None] = []

    @property
    def counts(self) -> torch.Tensor:
        self.flush()
        return self._counts

    def reset(self) -> None:
        self._indices.clear()
        self._losses.clear()
        self._means.clear()
        self._counts.zero_()

    def update(self, indices: torch.Tensor, losses: torch.Tensor, mean: torch.Tensor | None = None) -> None:
        """`mean`: the batch mean to compare against, when the batch is larger than the
        losses given (data-parallel: this rank's part of a global batch)."""
        self._indices.append(indices)
        self._losses.append(losses.detach())
        self._means.append(None if mean is None else mean.detach().float().reshape(()))
        if len(self._indices) >= FLUSH_EVERY:
            self.flush()

    def add(self, counts: torch.Tensor) -> None:
        """Add counts made elsewhere (a worker's, in parameter-server training)."""
        self.flush()
        self._counts += counts.to(self._counts.dtype)

    def flush(self) -> None:
        with torch.no_grad():  # a `with`, not the decorator: the module defines it without torch
            self._flush()

    def _flush(self) -> None:
        if not self._indices:
            return
        dev = self._counts.device
        # torch.tensor(..., device=cuda) copies from pageable memory and waits for the GPU;
        # a pinned, non-blocking copy does not, so a flush inside an epoch costs no host sync
        sizes = torch.tensor([t.numel() for t in self._losses], pin_memory=dev.type == "cuda")
        sizes = sizes.to(dev, non_blocking=True)
        losses = torch.cat(self._losses).float().to(dev)
        indices = torch.cat(self._indices).to(dev)
        batch = torch.repeat_interleave(torch.arange(len(self._losses), device=dev), sizes, output_size=losses.numel())
        means = torch.zeros(len(self._losses), device=dev).index_add_(0, batch, losses) / sizes
        if any(m is not None for m in self._means):
            means = torch.stack([means[i] if m is None else m.to(dev) for i, m in enumerate(self._means)])
        above = losses > means[batch] * (1.0 + self.tolerance)
        # index_add_ rather than counts[idx] += ...: correct even if an index repeats
        self._counts.index_add_(0, indices, above.to(torch.int32))
        self._indices.clear()
        self._losses.clear()
        self._means.clear()

    def highest(self, m: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Indices of the m highest counts; equal counts ordered by a seeded random permutation."""
        return highest(self.counts, m, generator)

    def state_dict(self) -> dict:
        return {"counts": self.counts.clone(), "tolerance": self.tolerance}

    def load_state_dict(self, state: dict) -> None:
        self.reset()
        self._counts.copy_(state["counts"])
        self.tolerance = float(state["tolerance"])

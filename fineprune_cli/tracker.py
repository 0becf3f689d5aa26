"""DroppingCount: Algorithm 1 of Li et al. (2018), vectorised and kept on the training device."""

from __future__ import annotations

import torch


class DroppingCount:
    """One counter per training sample.

    `update` takes the per-sample losses of a training step's own forward pass: a sample
    whose loss exceeds the batch mean x (1 + tolerance) has its count raised by one.
    Everything stays on the device: no host synchronisation per step.
    """

    def __init__(self, num_samples: int, tolerance: float = 0.0, device: torch.device | str = "cpu"):
        if tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {tolerance}")
        self.tolerance = float(tolerance)
        self.counts = torch.zeros(num_samples, dtype=torch.int32, device=device)

    def reset(self) -> None:
        self.counts.zero_()

    @torch.no_grad()
    def update(self, indices: torch.Tensor, losses: torch.Tensor) -> None:
        losses = losses.detach().float()
        above = losses > losses.mean() * (1.0 + self.tolerance)
        # index_add_ rather than counts[idx] += ...: correct even if an index repeats in a batch
        self.counts.index_add_(0, indices, above.to(torch.int32))

    def highest(self, m: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Indices of the m highest counts; equal counts ordered by a seeded random permutation."""
        n = self.counts.numel()
        perm = torch.randperm(n, generator=generator, device=self.counts.device)
        order = torch.argsort(self.counts[perm], descending=True, stable=True)
        return perm[order[:m]]

    def state_dict(self) -> dict:
        return {"counts": self.counts.clone(), "tolerance": self.tolerance}

    def load_state_dict(self, state: dict) -> None:
        self.counts.copy_(state["counts"])
        self.tolerance = float(state["tolerance"])

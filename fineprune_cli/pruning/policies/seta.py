"""`seta`: SeTa (Zhou, Gao and Wang, CVPR 2025, "Scale Efficient Training for Large Datasets").
Each epoch draws a random (1 - r) of the samples, splits the draw by loss into k-means groups
ordered easy to hard, and trains a window of the groups that slides one group per epoch; after
δ·n only the random draw prunes (partial annealing). As the authors' seta.py selects; page and
where we differ: docs/policies/seta.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ConfigError
from ...lazytorch import torch
from ..config import PruneConfig
from ..policy import EpochPlan
from ..registry import register
from ..schedule import last_pruning_epoch
from .dynamic import LossScored

FIRST_SCORE = 3.0  # the code's score of a sample not trained yet (InfoBatch's base class)


def keep_share(ratio: float) -> float:
    """The share of samples drawn each epoch, as the code computes it (kept at least 0.1)."""
    return min(1.0, max(1e-1, 1.0 - ratio))


def window_size(groups: int, scale: float) -> int:
    """Groups in the window: Python's round, so half goes to even (5 x 0.9 = 4.5 gives 4)."""
    return round(groups * scale)


def epoch_seed(seed: int, epoch: int) -> int:
    """One seed per run and epoch for the draw's torch and NumPy generators (NumPy's < 2**32)."""
    return (seed * 1_000_003 + epoch) % 2**32


def loss_groups(scores: torch.Tensor, indices: torch.Tensor, groups: int) -> list[torch.Tensor]:
    """The drawn `indices` (CPU) in groups by `scores`, easy (low loss) to hard: k-means on the
    losses, groups ordered by their mean loss; all losses equal: `torch.chunk`, as the code does
    (which can give fewer groups)."""
    if groups == 1:
        return [indices]
    if bool(scores.max() == scores.min()):
        return list(torch.chunk(indices, groups))
    from sklearn.cluster import KMeans  # imported here: the other policies do not pay for it

    values = scores.numpy().astype(np.float32, copy=False)
    labels = KMeans(n_clusters=groups, random_state=0).fit(values[:, None]).labels_
    members = [np.flatnonzero(labels == g) for g in range(groups)]
    # the code's np.mean of each group in draw order (float32), nan for an empty group; sorted()
    # is stable, so equal means keep label order
    centers = [np.mean(values[m]) if m.size else math.nan for m in members]
    order = sorted(range(groups), key=lambda g: centers[g])
    return [indices[torch.from_numpy(members[g])] for g in order]


def slide(grouped: list[torch.Tensor], step: int, scale: float) -> list[torch.Tensor]:
    """The window of pruning epoch `step` (0 = the first: every group), moving one group per
    epoch from the easiest and wrapping to the start after the hardest."""
    if step == 0:
        return grouped
    size = window_size(len(grouped), scale)
    start = step % (len(grouped) - size + 1)
    return grouped[start : start + size]


@register
class SeTa(LossScored):
    name = "seta"
    label = "SeTa"
    color = "#e377c2"
    order = 75
    default_anneal = 0.875
    anneal_in_float = True  # the code anneals once `sampler_iterations > num_epochs * delta`
    help = "Zhou et al. 2025: a random (1-r) draw in k-means loss groups; a window slides easy to hard"
    state_keys = ("seen", "loss")
    own_settings = ("seta_ratio", "seta_groups", "seta_window")

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        if cfg.seta_ratio > 0:
            return None  # every epoch's draw leaves samples out
        if window_size(cfg.seta_groups, cfg.seta_window) >= cfg.seta_groups:
            return "--seta-ratio 0 draws every sample and --seta-window keeps every group; lower one of them"
        last = last_pruning_epoch(cls.anneal_of(cfg), epochs, cls.anneal_in_float)
        if (epochs if last is None else min(epochs, last)) < 2:
            return (
                "with --seta-ratio 0 its first epoch trains every sample and the window starts in epoch 2; "
                "train longer, raise --anneal or set --seta-ratio"
            )
        return None

    def setup(self) -> None:
        super().setup()
        cfg, n = self.cfg, self.num_samples
        self.seed = self.generator.initial_seed()
        self.keep = keep_share(cfg.seta_ratio)
        self.drawn = int(n * self.keep)
        if self.drawn <= cfg.seta_groups:
            raise ConfigError(
                f"seta draws {self.drawn} of {n} samples, not more than its {cfg.seta_groups} groups "
                "(--seta-groups); lower --seta-groups or --seta-ratio"
            )
        if window_size(cfg.seta_groups, cfg.seta_window) < 1:
            raise ConfigError(f"--seta-window {cfg.seta_window:g} of {cfg.seta_groups} groups rounds to none; raise it")
        self.loss = torch.full((n,), FIRST_SCORE, dtype=torch.float32, device=self.device)

    def update(self, now: torch.Tensor, losses: torch.Tensor) -> None:
        self.loss = torch.where(now, losses, self.loss)

    @property
    def scores(self) -> torch.Tensor:
        """The latest training loss of every sample; 3 (the code's start) for one never trained."""
        return self.loss.clone()

    # --- the protocol ---
    def plan(self, epoch: int) -> EpochPlan:
        seed = epoch_seed(self.seed, epoch)
        kept = self.partial_anneal(seed) if self.annealed(epoch) else self.windowed(epoch, seed)
        keep = torch.zeros(self.num_samples, dtype=torch.bool, device=self.device)
        keep[kept.to(self.device)] = True
        return self.keep_mask_plan(keep)

    def windowed(self, epoch: int, seed: int) -> torch.Tensor:
        """A pruning epoch's samples (CPU): the draw, its groups, the epoch's window of them.
        One copy of the scores to the host and a k-means per epoch, at the epoch's edge."""
        drawn = torch.randperm(self.num_samples, generator=torch.Generator().manual_seed(seed))[: self.drawn]
        grouped = loss_groups(self.loss.cpu()[drawn], drawn, self.cfg.seta_groups)
        window = slide(grouped, epoch - 1, self.cfg.seta_window)  # epochs 1..δ·n are the code's steps 0, 1, ...
        kept = torch.cat(window) if window else drawn[:0]
        if kept.numel() == 0:  # the code's guard: one random sample rather than none
            kept = torch.from_numpy(np.random.RandomState(seed).choice(self.num_samples, 1))
        return kept

    def partial_anneal(self, seed: int) -> torch.Tensor:
        """After δ·n: a random (1 - r) of the samples, drawn as the code draws it."""
        rng = np.random.RandomState(seed)
        order = np.arange(self.num_samples)
        rng.shuffle(order)
        return torch.from_numpy(rng.choice(order, int(self.keep * self.num_samples), replace=False))

    def planned_samples(self, epoch: int) -> int | None:
        """The draw alone trains in the first epoch (its window is every group) and after δ·n."""
        return self.drawn if epoch == 1 or self.annealed(epoch) else None

    def state_dict(self) -> dict:
        return {**super().state_dict(), "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.seed = state["seed"]

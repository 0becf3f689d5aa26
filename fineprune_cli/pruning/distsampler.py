"""The DataLoader sampler under data parallelism: every rank the same plan, each its own shard."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

from .policy import Policy, global_mean, require_int
from .sampler import PruningSampler


# DistributedSampler declares epoch, num_replicas and rank as plain ints and requires a dataset; this
# sampler has no epoch before the first plan, reads the world when an epoch is entered and has no dataset
class DistributedPruningSampler(PruningSampler, DistributedSampler):  # type: ignore[misc]
    """Every rank computes the same plan and order and takes `order[rank::num_replicas]`, as
    DistributedSampler does for the whole set: the order is padded with its own first indices
    to a multiple of the world size, so shards are equal and disjoint as positions of the
    padded order; at most one padded index per rank, its last, which trains (so every rank
    takes the same number of steps) but is not observed.

    `num_replicas` and `rank` default to torch.distributed's, read when an epoch is entered
    (so the sampler may be built before the process group). Scores stay equal on every rank:
    `sync` sums the ranks' observations with an all-reduce, and with `global_mean` each
    step compares this rank's losses with the mean over all ranks' parts of the batch (one
    small all-reduce per step), as one process training the whole batch would.

    A DistributedSampler subclass, so Lightning's DDP strategy keeps it rather than
    wrapping it in one of its own."""

    def __init__(
        self,
        policy: Policy,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
        global_mean: bool = True,
    ):
        PruningSampler.__init__(self, policy, seed)
        require_int(num_replicas, "num_replicas", 1, optional=True)
        require_int(rank, "rank", 0, None if num_replicas is None else num_replicas - 1, optional=True)
        if not isinstance(global_mean, bool):
            raise TypeError(f"global_mean must be True or False, got {type(global_mean).__name__}")
        self.replicas, self.rank_given, self.global_mean = num_replicas, rank, global_mean
        self.shuffle, self.drop_last, self.dataset = True, False, None  # type: ignore[assignment]

    @property
    def num_replicas(self) -> int:  # type: ignore[override]
        if self.replicas is not None:
            return self.replicas
        return dist.get_world_size() if _initialized() else 1

    @property
    def rank(self) -> int:  # type: ignore[override]
        if self.rank_given is not None:
            return self.rank_given
        return dist.get_rank() if _initialized() else 0

    def _shard(self, order: torch.Tensor) -> torch.Tensor:
        world, rank = self.num_replicas, self.rank
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in [0, {world})")
        pad = -order.numel() % world
        if pad and order.numel():
            order = torch.cat([order, order.repeat(-(-pad // order.numel()))[:pad]])
        self.pad_last = pad > 0 and rank >= world - pad
        return order[rank::world]

    def _share(self, indices: torch.Tensor) -> torch.Tensor:
        # disjoint shares, summed over the ranks at sync as the training steps' observations are
        return indices[self.rank :: self.num_replicas]

    def _collective(self) -> bool:
        return _initialized() and self.num_replicas > 1

    def _reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return _all_sum(tensor) if self._collective() else tensor

    def _batch_mean(self, losses: torch.Tensor) -> torch.Tensor | None:
        if not (self.global_mean and self._collective()):
            return None
        return global_mean(losses.float().sum(), losses.numel(), _all_sum)


def _initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def _all_sum(tensor: torch.Tensor) -> torch.Tensor:
    """A new tensor: `tensor` summed over the ranks (NCCL reduces on the GPU only)."""
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else tensor.device
    out = tensor.to(on, copy=True)
    dist.all_reduce(out)
    return out.to(tensor.device)

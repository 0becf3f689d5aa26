"""Fine-pruning in a DataLoader pipeline: a dataset wrapper that hands out each item's index,
a sampler that yields a policy's plan epoch by epoch, and its data-parallel variant.

    loader = DataLoader(IndexedDataset(data), batch_size=128, sampler=(s := PruningSampler(policy)))
    for epoch in range(epochs):
        s.set_epoch(epoch)                           # torch's convention: counts from 0
        for idx, x, y in loader:                     # items are (index, *item)
            losses = F.cross_entropy(model(x), y, reduction="none")
            opt.zero_grad(); s.loss(idx, losses).backward(); opt.step()

Epoch edges. Sampler epoch e (0-based, as DistributedSampler's) is the policy's epoch e + 1.
Entering an epoch (`set_epoch` with a new value, or iterating again after the current epoch
was iterated) first folds what was observed into the scores (`policy.sync`, summed over the
ranks), then asks the policy for the epoch's plan, once. That is the engine's order (plan,
train, sync) with the sync deferred to the next epoch's start, because a DataLoader draws
indices ahead of training and cannot tell the sampler when the last batch has trained.
`sync()` may be called at the epoch's end as well (the Lightning callback does); `state_dict()`
syncs first. A sync with nothing new to fold is skipped.

The sampler runs in the DataLoader's main process (workers receive indices, never the
sampler), so `num_workers > 0` and persistent workers change nothing.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DistributedSampler, Sampler

from .policy import EpochPlan, Policy, global_mean, require_int


class IndexedDataset(Dataset):
    """Wraps a map-style dataset so that item i becomes (i, *item): the index first, then the
    item's own fields (or the item itself when it is not a tuple/list)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        item = self.dataset[index]
        return (index, *item) if isinstance(item, (tuple, list)) else (index, item)


class PruningSampler(Sampler[int]):
    """Yields, each epoch, the policy's plan in an order shuffled by `seed + epoch`; `len()`
    is the number of samples of the current epoch (`set_epoch` first to know it in advance)."""

    def __init__(self, policy: Policy, seed: int = 0):
        # Sampler.__init__ is skipped on purpose: under multiple inheritance (the distributed
        # variant) the next __init__ in line is DistributedSampler's, which needs a dataset
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy (fineprune_cli.create_policy(...)), got {type(policy).__name__}")
        require_int(seed, "seed", 0, 2**63 - 1)
        self.policy, self.seed = policy, seed
        self.epoch: int | None = None  # 0-based; None before the first plan
        self.plan: EpochPlan | None = None  # the current epoch's plan
        self.order = torch.empty(0, dtype=torch.long)  # this rank's indices for the epoch
        self.consumed = False  # the current epoch has been iterated
        self.iterated = False  # ... by this process (not restored by load_state_dict)
        self.synced = True  # nothing observed since the last sync
        self.seen = 0  # samples passed to loss() in this epoch
        self.pad_last = False  # this rank's last index is padding (distributed)

    # --- epochs ---
    def set_epoch(self, epoch: int) -> None:
        """Enter epoch `epoch` (0-based); a no-op when it is already the current one and not
        yet iterated."""
        if self.epoch is not None and epoch < self.epoch:
            raise ValueError(
                f"epoch {epoch} is before the sampler's epoch {self.epoch}: a policy "
                "plans each epoch once, forward only (load_state_dict to go back)"
            )
        if epoch == self.epoch and self.consumed and (self.seen or not self.iterated):
            # trained already (here, or before the state was saved): a loop resumed at the saved
            # epoch. As a no-op, the next iteration would train epoch + 1's plan, and the sampler
            # would run one epoch ahead of the loop from then on. (Iterated but not trained is
            # fine: a DataLoader with persistent workers draws indices before set_epoch.)
            raise ValueError(
                f"set_epoch({epoch}): epoch {epoch} was already iterated (a state saved after "
                f"it was loaded?); a resumed loop continues with set_epoch({epoch + 1})"
            )
        if epoch != self.epoch:
            self._enter(epoch)

    def __iter__(self):
        if self.epoch is None:
            self._enter(0)
        elif self.consumed:  # iterated again without set_epoch: the next epoch
            self._enter(self.epoch + 1)
        self.consumed = self.iterated = True
        return iter(self.order.tolist())

    def __len__(self) -> int:
        if self.epoch is None:
            self._enter(0)
        return self.order.numel()

    def _enter(self, epoch: int) -> None:
        self._require_losses()
        self.sync()
        self.plan = self.policy.plan(epoch + 1)
        self.epoch, self.consumed, self.iterated, self.seen = epoch, False, False, 0
        self.order = self._shard(self._shuffled(self.plan.indices, epoch))

    def _require_losses(self) -> None:
        """An epoch iterated without a single loss() call: the loop never hands the sampler its
        indices (a dataset without IndexedDataset), and a policy that scores losses would go on
        choosing from empty scores, which is random pruning under its name."""
        if self.iterated and self.seen == 0 and self.policy.observes and self.order.numel():
            raise RuntimeError(
                f"epoch {self.epoch} was iterated but loss() never received its samples: wrap "
                "the dataset in IndexedDataset and call sampler.loss(idx, losses) for each batch"
            )

    def _shuffled(self, indices: torch.Tensor, epoch: int) -> torch.Tensor:
        # a fresh generator per epoch (as DistributedSampler): every rank, and a resumed run,
        # draws the same order without carrying generator state around
        gen = torch.Generator().manual_seed(self.seed + epoch)
        indices = indices.cpu()
        return indices[torch.randperm(indices.numel(), generator=gen)]

    def _shard(self, order: torch.Tensor) -> torch.Tensor:
        return order

    # --- training steps ---
    def loss(self, indices: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
        """Observe one batch's per-sample losses (reduction='none') and return the loss to
        backpropagate: the plan's weighted mean, or the plain mean for unweighted policies.
        Call it once per batch, in the order the loader yields them."""
        if self.plan is None:
            raise RuntimeError("no epoch planned yet: iterate the sampler's DataLoader first")
        if (
            not isinstance(indices, torch.Tensor)
            or indices.dtype.is_floating_point
            or indices.dtype in (torch.bool, torch.complex64, torch.complex128)
        ):
            raise TypeError(
                "loss() needs the batch's sample indices (an integer tensor, the first field of "
                f"IndexedDataset's items), got {getattr(indices, 'dtype', type(indices).__name__)}"
            )
        n = self.policy.num_samples
        if indices.numel() and not (0 <= int(indices.min()) and int(indices.max()) < n):
            raise ValueError(
                f"loss() got sample indices outside [0, {n}): pass the first field of IndexedDataset's items"
            )
        if losses.dim() != 1 or losses.numel() != indices.numel():
            raise ValueError(
                f"loss() needs one loss per sample (reduction='none'): got shape "
                f"{tuple(losses.shape)} for {indices.numel()} indices"
            )
        if self.policy.observes:
            idx, observed = self._real(indices, losses.detach())
            self.policy.observe(idx, observed, self._batch_mean(observed))
            self.synced = False
        self.seen += indices.numel()
        return self.plan.loss(indices, losses)

    def _real(self, indices: torch.Tensor, losses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch without the padding index, which trains but is not observed twice."""
        last = self.order.numel() - 1 - self.seen  # the padding's position in this batch
        if not self.pad_last or not 0 <= last < indices.numel():
            return indices, losses
        keep = torch.ones(indices.numel(), dtype=torch.bool, device=indices.device)
        keep[last] = False
        return indices[keep], losses[keep.to(losses.device)]

    def _batch_mean(self, losses: torch.Tensor) -> torch.Tensor | None:
        return None  # the policy's own batch mean

    def _reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def sync(self) -> None:
        """Fold the observations made so far into the policy's scores (an epoch edge; under
        data parallelism a collective, so every rank calls it at the same point)."""
        if not self.synced:
            self.policy.sync(self._reduce)
            self.synced = True

    # --- resume ---
    def state_dict(self) -> dict:
        """Policy and epoch; taken at an epoch edge (it syncs first)."""
        self.sync()
        plan = (
            None
            if self.plan is None
            else {
                "indices": self.plan.indices.clone(),
                "pruned": self.plan.pruned,
                "weights": None if self.plan.weights is None else self.plan.weights.clone(),
            }
        )
        return {
            "policy": self.policy.state_dict(),
            "epoch": self.epoch,
            "consumed": self.consumed,
            "seed": self.seed,
            "plan": plan,
        }

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.seed, self.epoch, self.consumed = state["seed"], state["epoch"], state["consumed"]
        self.synced, self.seen, self.iterated, plan = True, 0, False, state["plan"]
        if plan is None:
            self.plan, self.order = None, torch.empty(0, dtype=torch.long)
            return
        dev = self.policy.device
        weights = None if plan["weights"] is None else plan["weights"].to(dev)
        self.plan = EpochPlan(plan["indices"].to(dev), weights, plan["pruned"])
        self.order = self._shard(self._shuffled(self.plan.indices, self.epoch))


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

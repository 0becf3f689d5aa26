"""Fine-pruning in a DataLoader pipeline: a dataset wrapper that hands out each item's index,
and a sampler that yields a policy's plan epoch by epoch (its data-parallel variant: distsampler).

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

A policy that re-scores samples it left out (IES) asks for a forward-only pass over them after
each epoch's training: `refresh(losses)` runs it through the loop's own loss function, and an
epoch entered without it is refused, since those samples would keep their last losses for good.

The sampler runs in the DataLoader's main process (workers receive indices, never the
sampler), so `num_workers > 0` and persistent workers change nothing.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils.data import Dataset, Sampler

from .policy import EpochPlan, Policy, require_int


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
        if policy.selects_batches:  # a plan of every sample: a loop of whole batches trains regular under its name
            raise ValueError(
                f"{policy.name} chooses rows inside each training step (a forward without gradients "
                "first), which a sampler cannot do: its plan is every sample, so a DataLoader loop would "
                "train regular batches under its name; use it in a loop of your own "
                "(batch_keep, select_batch: docs/howto/own-loop.md) or fineprune train"
            )
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
        self.refreshed = False  # the epoch's forward-only pass ran (or none was asked for)
        self.folded = False  # the epoch's observations were folded in: too late for its pass

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
        self._require_refresh()
        self.sync()
        self.plan = self.policy.plan(epoch + 1)
        self.epoch, self.consumed, self.iterated, self.seen = epoch, False, False, 0
        self.refreshed = self.folded = False
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

    def _require_refresh(self) -> None:
        if self.iterated and self.seen and not self.refreshed and self.to_refresh() is not None:
            raise RuntimeError(
                f"{self.policy.name} re-scores the samples it left out of epoch {self.epoch} with a "
                "forward-only pass: call sampler.refresh(losses) after the epoch's last batch "
                "(docs/howto/dataloader.md)"
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

    # --- the forward-only pass ---
    def to_refresh(self) -> torch.Tensor | None:
        """The samples (this rank's share) the policy asks a forward-only pass over after the
        current epoch's training; None: none."""
        wanted = None if self.plan is None or self.epoch is None else self.policy.refresh(self.epoch + 1)
        return None if wanted is None else self._share(wanted.cpu())

    def refresh(self, losses: Callable[[torch.Tensor], torch.Tensor], batch_size: int = 256) -> int:
        """The forward-only pass the policy asks for after the epoch's training (IES: the samples
        sitting out, whose losses must go on moving for them to come back): `losses(indices)`
        returns those training samples' per-sample losses (evaluation mode; the engine's pass
        uses no augmentation), called without gradients in batches of `batch_size`. Call it after
        the epoch's last batch and before `sync()` or `state_dict()`; the samples observed here."""
        if self.plan is None:
            raise RuntimeError("no epoch planned yet: refresh() follows an epoch's training")
        if self.folded:
            raise RuntimeError("refresh() after sync() or state_dict(): run the forward-only pass before them")
        indices, self.refreshed = self.to_refresh(), True
        if indices is None:
            return 0
        with torch.no_grad():
            for idx in indices.split(batch_size):
                out = losses(idx)
                if out.dim() != 1 or out.numel() != idx.numel():
                    raise ValueError(f"refresh: losses() must give one loss per sample, got shape {tuple(out.shape)}")
                self.policy.observe(idx, out.detach())
        self.synced = False
        return indices.numel()

    def _share(self, indices: torch.Tensor) -> torch.Tensor:
        return indices

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
            self.synced = self.folded = True

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

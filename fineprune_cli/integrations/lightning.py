"""Fine-pruning in PyTorch Lightning (the optional extra `fineprune[lightning]`).

    sampler = PruningSampler(policy)     # DistributedPruningSampler under a DDP strategy
    loader = DataLoader(IndexedDataset(data), batch_size=128, sampler=sampler)
    trainer = L.Trainer(max_epochs=epochs, callbacks=[PruningCallback(sampler)])
    trainer.fit(module, loader)          # module.training_step returns per-sample losses

The module's `training_step` returns one loss per sample (reduction='none'), or a dict whose
"loss" is that vector; for the fit, the callback wraps that method on the module instance (and
removes the wrapper afterwards) so that Lightning backpropagates `sampler.loss(...)`: the
policy observes the batch and the plan's (weighted) mean is what trains. Nothing of PyTorch
or Lightning is patched.

What else it does, and why:
- Lightning calls `set_epoch(current_epoch)` on the loader's sampler itself; the callback does
  too, and syncs the policy at each epoch's end (all ranks at once, as the engine does).
- Lightning counts an epoch's batches once, before the first epoch, and ends every epoch at that
  count; a pruning plan changes the count each epoch, so at each epoch's start the callback
  puts the sampler's count where Lightning keeps its own (`recount`; Lightning 2.6 has no
  public setter, so this reads two of the fit loop's private attributes, checked by the tests).
- A DistributedPruningSampler is a DistributedSampler, so Lightning's DDP strategy keeps it
  (no `use_distributed_sampler=False` needed); a plain PruningSampler under several processes
  is refused: Lightning would wrap it in a sampler of its own, and with no all-reduce of the
  observations the ranks' scores, and so their plans, would drift apart.
- Its checkpoint state is the sampler's (policy, epoch, plan): `ckpt_path=` resumes the plans.
- A policy that re-scores the samples it left out (IES) gets its forward-only pass at each
  epoch's end, before the sync: the left-out samples of the train loader's dataset, collated by
  its collate_fn, in evaluation mode without gradients, each batch's per-sample losses from
  `losses(module, batch)` (default: the module's own training_step, its `self.log` calls
  skipped there so that the pass logs nothing). Under DDP each rank takes its share and calls
  the module itself, not the DDP wrapper, so shares of unequal length wait for no collective.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any, Callable

import lightning.pytorch as pl
import torch

from ..pruning.distsampler import DistributedPruningSampler
from ..pruning.sampler import PruningSampler


def first_field(batch: Any) -> torch.Tensor:
    """The indices of a batch of IndexedDataset items: (index, *item) collates index first."""
    return batch[0]


class PruningCallback(pl.Callback):
    """Plugs `sampler`'s policy into a LightningModule; `indices(batch)` finds the batch's sample
    indices (the first field, as IndexedDataset puts them, by default)."""

    def __init__(
        self,
        sampler: PruningSampler,
        indices: Callable[[Any], torch.Tensor] = first_field,
        losses: Callable[[pl.LightningModule, Any], Any] | None = None,
    ):
        self.sampler, self.indices, self.losses = sampler, indices, losses
        self.step: Callable[..., Any] | None = None  # the module's own training_step, unwrapped

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        if self.sampler.policy.selects_batches:
            raise ValueError(
                f"{self.sampler.policy.name} chooses rows inside each training step (a forward without "
                "gradients first), which this callback cannot do; use it in a loop of your own "
                "(batch_keep, select_batch: docs/howto/own-loop.md)"
            )
        if trainer.world_size > 1 and not isinstance(self.sampler, DistributedPruningSampler):
            raise ValueError(
                f"{trainer.world_size} processes train: use DistributedPruningSampler, "
                "so that the ranks share one plan and each takes its own shard"
            )
        step = self.step = pl_module.training_step

        @functools.wraps(step)  # keeps the signature Lightning inspects (batch_idx or not)
        def training_step(batch: Any, *args: Any, **kwargs: Any) -> Any:
            return self.reduced(batch, step(batch, *args, **kwargs))

        pl_module.training_step = training_step

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":
            vars(pl_module).pop("training_step", None)  # the class's method again

    def reduced(self, batch: Any, output: Any) -> Any:
        """`output` with its per-sample losses replaced by the loss to backpropagate."""
        if output is None:  # Lightning skips the step
            return None
        losses = output["loss"] if isinstance(output, Mapping) else output
        loss = self.sampler.loss(self.indices(batch), losses)
        return {**output, "loss": loss} if isinstance(output, Mapping) else loss

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.sampler.set_epoch(trainer.current_epoch)
        self.recount(trainer)

    def recount(self, trainer: pl.Trainer) -> None:
        """This epoch's batch count, where Lightning keeps the count it took before the first
        epoch: the loader's limit, the fit loop's `max_batches`, the fetcher's length (which a
        resumed fit does not take again) and the batch that triggers validation. Lightning
        has no public setter for these (2.6); where one is missing nothing is changed."""
        combined = getattr(trainer.fit_loop, "_combined_loader", None)
        if combined is None or combined.limits is None:
            return
        combined.limits = [
            _limited(len(dl), trainer.limit_train_batches) if _holds(dl, self.sampler) else limit
            for dl, limit in zip(combined.flattened, combined.limits)
        ]
        batches = max(combined.limits)  # Lightning's default mode, max_size_cycle
        trainer.fit_loop.max_batches = batches
        fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
        if getattr(fetcher, "length", None) is not None:
            fetcher.length = batches
        if isinstance(trainer.val_check_interval, float) and trainer.val_check_batch is not None:
            trainer.val_check_batch = max(1, int(batches * trainer.val_check_interval))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.refresh(trainer, pl_module)
        self.sampler.sync()

    def refresh(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The forward-only pass the policy asks for after the epoch (none for most policies)."""
        if self.sampler.to_refresh() is None:
            return
        loader = next((dl for dl in _train_loaders(trainer) if _holds(dl, self.sampler)), None)
        if loader is None:
            raise ValueError(
                f"{self.sampler.policy.name} re-scores left-out samples: no train loader holds the sampler"
            )

        def losses(indices: torch.Tensor) -> torch.Tensor:
            batch = loader.collate_fn([loader.dataset[i] for i in indices.tolist()])
            batch = pl_module.transfer_batch_to_device(batch, pl_module.device, 0)
            out = self.losses(pl_module, batch) if self.losses else _call_step(self.step, batch)
            return out["loss"] if isinstance(out, Mapping) else out

        was = pl_module.training
        pl_module.eval()
        quiet = {name: vars(pl_module).pop(name, None) for name in ("log", "log_dict")}
        pl_module.log = pl_module.log_dict = _nothing  # type: ignore[method-assign]
        try:
            self.sampler.refresh(losses, loader.batch_size or 256)
        finally:
            for name, own in quiet.items():
                vars(pl_module).pop(name, None)
                if own is not None:
                    setattr(pl_module, name, own)
            pl_module.train(was)

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state_dict)


def _call_step(step: Any, batch: Any) -> Any:
    """training_step(batch[, batch_idx]), as Lightning calls it by its signature."""
    takes_index = len(inspect.signature(step).parameters) > 1
    return step(batch, 0) if takes_index else step(batch)


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _train_loaders(trainer: pl.Trainer) -> list[Any]:
    combined = getattr(trainer.fit_loop, "_combined_loader", None)
    if combined is not None:
        return list(combined.flattened)
    loaders = trainer.train_dataloader
    return list(
        loaders.values()
        if isinstance(loaders, Mapping)
        else loaders
        if isinstance(loaders, (list, tuple))
        else [loaders]
    )


def _holds(loader: Any, sampler: PruningSampler) -> bool:
    batch_sampler = getattr(loader, "batch_sampler", None)
    return getattr(loader, "sampler", None) is sampler or getattr(batch_sampler, "sampler", None) is sampler


def _limited(batches: int, limit: int | float) -> int:
    """`limit_train_batches` applied as Lightning applies it (a count, or a share)."""
    return min(batches, limit) if isinstance(limit, int) else int(batches * limit)

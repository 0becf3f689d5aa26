"""The device-resident trainer: SGD on index slices of tensors that live on the device.

Each step computes per-sample losses (reduction='none'), backpropagates their mean (weighted
when the epoch's plan carries weights) and hands them, with the batch's sample indices, to
the policy's `observe`. Augmentation is one batched gather; metrics accumulate on the device
and are read once per epoch, so a step never waits for the host.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ...errors import ConfigError
from ...pruning.policy import EpochPlan, global_mean
from ..inputs.devicedata import DeviceData
from ..setup.config import TrainConfig
from .lrschedule import lr_at, warmup_length
from .selective import Selecting, kept_rows, padded_shape
from .world import SINGLE, World, all_sum, shard_range, step_slices

Observe = Callable[..., None]  # (indices, losses[, global batch mean when data-parallel])


def predicted(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(argmax == label, top softmax probability) of each sample, detached."""
    confidence, guess = torch.softmax(logits.detach().float(), dim=1).max(dim=1)
    return guess == labels, confidence


class Trainer:
    channels: int | None = None  # the data's (set by whoever built the data and the model)
    classes: int | None = None
    model_shapes: str | None = None  # a user's own model (models.shapes_hash), recorded by its run

    def __init__(
        self,
        model: torch.nn.Module,
        data: DeviceData | Any,
        cfg: TrainConfig,
        device: torch.device,
        seed: int = 0,
        compile: bool = False,
        compile_mode: str = "auto",
        static_batches: bool | None = None,
        world: World = SINGLE,
        bf16: bool | None = None,
    ):
        if world.active and cfg.batch_size % world.size:
            raise ConfigError(f"--batch-size {cfg.batch_size} must divide evenly over {world.size} processes")
        self.device, self.data, self.cfg, self.world = device, data, cfg, world
        self.cuda = device.type == "cuda"
        self.bf16 = self.cuda if bf16 is None else bf16  # bf16 autocast; the data is bf16 on CUDA
        self.memory_format = torch.channels_last if self.cuda else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format)
        self.optimizer = torch.optim.SGD(
            self.model.parameters(),
            lr=cfg.lr,
            momentum=cfg.momentum,
            weight_decay=cfg.weight_decay,
            fused=self.cuda or None,
        )
        mode = compile_mode if compile_mode != "auto" else ("reduce-overhead" if self.cuda else "default")
        net = self.model
        if world.active:  # gradients are averaged across ranks inside backward()
            net = DistributedDataParallel(self.model, device_ids=[device.index] if self.cuda else None)
        self.forward = torch.compile(net, mode=mode) if compile else net
        # evaluation bypasses DDP: its forward broadcasts buffers, a collective that a rank with
        # no test samples in its shard never joins (the others would wait for it)
        plain = torch.compile(self.model, mode=mode) if compile and world.active else self.forward
        self.eval_forward = plain if world.active else self.forward
        # compiled steps see one batch shape: the partial last batch is padded and masked
        self.static_batches = compile if static_batches is None else static_batches
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.seed = seed
        self.all = torch.arange(data.num_train, device=device)
        self.warmup_steps = warmup_length(cfg, data.num_train)
        self.steps = 0
        self.skipped = 0  # samples the last epoch's selective steps forwarded without training

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def train_epoch(
        self,
        epoch: int,
        plan: EpochPlan | None = None,
        observe: Observe | None = None,
        lr: float | None = None,
        predictions: bool = False,
        select: Selecting | None = None,
    ) -> torch.Tensor:
        """One pass over the plan's samples (all if None) in shuffled batches; returns the
        summed (unweighted) training loss as a device tensor, read once after the epoch.
        `lr`: the epoch's lr before warm-up (default: the milestone schedule's); `predictions`:
        observe each sample's correctness and confidence as well; `select`: a policy that chooses
        each step's rows (selective.py), whose left-out rows `skipped` counts (all ranks')."""
        indices = self.all if plan is None else plan.indices
        weights = None if plan is None else plan.weights
        order = indices[torch.randperm(indices.numel(), generator=self.generator, device=self.device)]
        self.model.train()
        loss_sum = torch.zeros((), device=self.device)
        batches = [(idx.numel(), self._pad(idx, order)) for idx in self._batches(order)]
        inputs = self.data.batches([idx for _, idx in batches], self.augment_generator(epoch))
        self.skipped = 0
        for step, ((real, idx), x) in enumerate(zip(batches, inputs)):
            self.set_lr(lr_at(self.cfg, epoch, self.steps, self.warmup_steps, lr))
            x = x.contiguous(memory_format=self.memory_format)
            keep = None if select is None else select.batch_keep(epoch, step, real)
            if select is not None and keep is not None:
                shape = padded_shape(self, select, epoch, step, keep)
                x, idx = kept_rows(self, select, x, idx, real, keep, shape)
                self.skipped += (real - keep) * self.world.size
                real = keep
            with self.autocast():
                logits = self.forward(x)
                losses = F.cross_entropy(logits, self.data.train_y[idx], reduction="none")
            losses = losses[:real]  # padding (if any) contributes no loss and no gradient
            total = losses.sum()
            weighted = total if weights is None else (losses * weights[idx[:real]].to(losses.dtype)).sum()
            self.optimizer.zero_grad(set_to_none=True)
            (weighted / real).backward()
            self.optimizer.step()
            loss_sum += total.detach()
            self.steps += 1
            if observe is not None:
                seen = predicted(logits[:real], self.data.train_y[idx[:real]]) if predictions else ()
                self._observe(observe, idx[:real], losses.detach(), total.detach(), real, seen)
        return all_sum(loss_sum, self.world)

    def steps_in(self, samples: int) -> int:
        """Optimizer steps `train_epoch` takes over `samples` samples, by host arithmetic (a
        progress bar's total): whole global batches, plus the last partial one where it gives
        this rank a sample (`step_slices` drops it otherwise)."""
        full, rest = divmod(samples, self.cfg.batch_size)
        return full + int(rest >= self.world.size)

    @torch.no_grad()
    def refresh(self, indices: torch.Tensor, observe: Observe) -> None:
        """A forward-only pass over `indices` (this rank its share): evaluation mode, no
        augmentation; each batch observed with its losses, correctness and confidence."""
        self.model.eval()
        self._share_buffers()
        lo, hi = shard_range(indices.numel(), self.world)
        size = self.cfg.eval_batch_size
        batches = list(indices[lo:hi].split(size))
        # compiled: one shape, whatever the hidden set's size (the rest is sliced off)
        full = [b.repeat(-(-size // b.numel()))[:size] for b in batches] if self.static_batches else batches
        for idx, x in zip(batches, self.data.plain_batches(full)):
            y = self.data.train_y[idx]
            with self.autocast():
                logits = self.eval_forward(x.contiguous(memory_format=self.memory_format))[: idx.numel()]
            losses = F.cross_entropy(logits.float(), y, reduction="none")
            observe(idx, losses, None, *predicted(logits, y))

    def augment_generator(self, epoch: int) -> torch.Generator:
        """One process draws its crops and flips from the generator of its sample order. The
        ranks of a data-parallel run share that order's generator (they must draw the same
        order), so each draws its augmentation from its own, seeded by seed, rank and epoch: a
        resumed run draws the same, and no rank's state needs a checkpoint."""
        if not self.world.active:
            return self.generator
        gen = torch.Generator(device=self.device)
        return gen.manual_seed(((self.seed * 1_000_003 + epoch) * 4_099 + self.world.rank + 1) % 2**63)

    def _observe(
        self,
        observe: Observe,
        idx: torch.Tensor,
        losses: torch.Tensor,
        total: torch.Tensor,
        real: int,
        seen: tuple = (),
    ) -> None:
        if not self.world.active:
            if seen:
                observe(idx, losses, None, *seen)
            else:
                observe(idx, losses)  # as before predictions existed: the other policies' calls unchanged
            return
        # compare with the global batch's mean, as one process training the whole batch would
        observe(idx, losses, global_mean(total, real, lambda t: all_sum(t, self.world)), *seen)

    def _batches(self, order: torch.Tensor) -> list[torch.Tensor]:
        if self.world.active:
            return step_slices(order, self.cfg.batch_size, self.world)
        return list(order.split(self.cfg.batch_size))

    @property
    def rank_batch(self) -> int:
        """Samples this process runs per full step: its slice of the global batch."""
        return self.cfg.batch_size // self.world.size

    def _pad(self, idx: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        """Fill a short last batch up to this rank's full batch (`rank_batch`, not the global
        batch: N ranks would each do N times the work) with samples from the epoch's start.
        They pass through the model (batch-norm statistics see them) but are sliced away
        before the loss, so they train nothing; the shape never changes, so nothing recompiles."""
        short = self.rank_batch - idx.numel()
        if short <= 0 or (not self.static_batches and idx.numel() > 1):
            return idx
        if not self.static_batches:
            short = 1  # batch norm cannot train on a batch of one: a second sample, sliced away
        return torch.cat([idx, order[:short].repeat(-(-short // order.numel()))[:short]])

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Test loss (mean) and accuracy (percent), with one host read at the end."""
        self.model.eval()
        self._share_buffers()
        loss_sum = torch.zeros((), device=self.device)
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        lo, hi = shard_range(self.data.test_y.numel(), self.world)  # each rank its part
        size = self.cfg.eval_batch_size
        x_all, y_all = self.data.test_batches(lo, hi, size), self.data.test_y[lo:hi].split(size)
        for x, y in zip(x_all, y_all):
            with self.autocast():
                logits = self.eval_forward(x.contiguous(memory_format=self.memory_format))
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
            correct += (logits.argmax(1) == y).sum()
        n = self.data.test_y.numel()
        loss, hits = all_sum(torch.stack([loss_sum, correct.to(loss_sum.dtype)]), self.world).tolist()
        return loss / n, 100.0 * hits / n

    def _share_buffers(self) -> None:
        if self.world.active:  # every rank evaluates with rank 0's batch-norm statistics, as DDP's forward did
            for buffer in self.model.buffers():
                torch.distributed.broadcast(buffer, 0)

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.steps = state["steps"]

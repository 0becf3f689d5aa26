"""The device-resident trainer: SGD on index slices of tensors that live on the device.

Each step computes per-sample losses (reduction='none') and hands them, with the batch's
sample indices, to a hook (the fine-pruning tracker). Metrics accumulate on the device and
are read once per epoch, so a step never waits for the host.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from .augment import CropFlip, pad_images
from .config import TrainConfig
from .data import Dataset
from .distributed import SINGLE, World, all_sum, shard_range, step_slices
from .errors import ConfigError

Hook = Callable[..., None]  # (indices, losses[, global batch mean when data-parallel])
CROP_PAD = 4  # pixels of zero padding for the random crop (the paper's CIFAR recipe)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name} asked for, but CUDA is not available here; use --device cpu")
    return device


def _compile_mode(mode: str, cuda: bool) -> str:
    """'auto': CUDA graphs on the GPU (reduce-overhead), inductor's default on the CPU."""
    if mode == "auto":
        return "reduce-overhead" if cuda else "default"
    return mode


def wants_augment(mode: str, dataset: Dataset) -> bool:
    """'auto' augments 32x32 RGB data, as the paper's CIFAR recipe does."""
    if mode == "auto":
        return dataset.in_channels == 3 and dataset.image_size == 32
    return mode == "crop-flip"


@dataclass
class DeviceData:
    """Normalised tensors on the device; the training images are pre-padded when augmenting."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    crop: CropFlip | None

    @classmethod
    def build(cls, dataset: Dataset, device: torch.device, augment: bool) -> "DeviceData":
        # bf16 storage on CUDA halves memory and gather traffic; the conv casts to bf16 anyway
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        x = dataset.train_x.to(device)
        mean = x.float().mean(dim=(0, 2, 3)) / 255
        std = x.float().std(dim=(0, 2, 3)).clamp_min(1e-3) / 255

        def norm(images: torch.Tensor) -> torch.Tensor:
            z = (images.to(device).float() / 255 - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)
            return z.to(dtype).contiguous()

        train_x, crop = norm(dataset.train_x), None
        if augment:
            train_x = pad_images(train_x, CROP_PAD, (0 - mean) / std)
            crop = CropFlip(dataset.image_size, CROP_PAD, device)
        return cls(train_x, dataset.train_y.to(device), norm(dataset.test_x),
                   dataset.test_y.to(device), crop)

    @property
    def num_train(self) -> int:
        return self.train_y.numel()

    def batch(self, idx: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return self.train_x[idx] if self.crop is None else self.crop(self.train_x, idx, gen)


class Trainer:
    def __init__(self, model: torch.nn.Module, data: DeviceData, cfg: TrainConfig,
                 device: torch.device, seed: int = 0, compile: bool = False,
                 compile_mode: str = "auto", static_batches: bool | None = None,
                 world: World = SINGLE):
        if world.active and cfg.batch_size % world.size:
            raise ConfigError(f"--batch-size {cfg.batch_size} must divide evenly over {world.size} processes")
        self.device, self.data, self.cfg, self.world = device, data, cfg, world
        self.cuda = device.type == "cuda"
        self.memory_format = torch.channels_last if self.cuda else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format)
        self.optimizer = torch.optim.SGD(
            self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
            weight_decay=cfg.weight_decay, fused=self.cuda or None)
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(
            self.optimizer, milestones=list(cfg.milestones), gamma=cfg.gamma)
        net = self.model
        if world.active:  # gradients are averaged across ranks inside backward()
            net = DistributedDataParallel(self.model, device_ids=[device.index] if self.cuda else None)
        self.forward = torch.compile(net, mode=_compile_mode(compile_mode, self.cuda)) if compile else net
        # compiled steps see one batch shape: the partial last batch is padded and masked
        self.static_batches = compile if static_batches is None else static_batches
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self._all = torch.arange(data.num_train, device=device)
        steps_per_epoch = -(-data.num_train // cfg.batch_size)
        self.warmup_steps = round(cfg.warmup_epochs * steps_per_epoch)
        self.steps = 0

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.cuda:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def train_epoch(self, indices: torch.Tensor | None = None, hook: Hook | None = None) -> torch.Tensor:
        """One pass over `indices` (all samples if None) in shuffled batches; returns the
        summed training loss as a device tensor (read it once, after the epoch)."""
        indices = self._all if indices is None else indices
        order = indices[torch.randperm(indices.numel(), generator=self.generator, device=self.device)]
        self.model.train()
        loss_sum = torch.zeros((), device=self.device)
        scheduled = self.lr
        for idx in self._batches(order):
            if self.steps < self.warmup_steps:
                self._set_lr(scheduled * (self.steps + 1) / self.warmup_steps)
            real, idx = idx.numel(), self._pad(idx, order)
            x = self.data.batch(idx, self.generator).contiguous(memory_format=self.memory_format)
            with self.autocast():
                losses = F.cross_entropy(self.forward(x), self.data.train_y[idx], reduction="none")
            losses = losses[:real]  # padding (if any) contributes no loss and no gradient
            total = losses.sum()
            self.optimizer.zero_grad(set_to_none=True)
            (total / real).backward()
            self.optimizer.step()
            loss_sum += total.detach()
            self.steps += 1
            if hook is not None and self.world.active:  # compare with the global batch's mean
                # torch.full is a fill kernel; torch.tensor would copy from the host and sync
                count = torch.full((), float(real), device=self.device, dtype=total.dtype)
                both = all_sum(torch.stack([total.detach(), count]), self.world)
                hook(idx[:real], losses.detach(), both[0] / both[1])
            elif hook is not None:
                hook(idx[:real], losses.detach())
        self._set_lr(scheduled)  # the milestone schedule continues from the scheduled value
        self.scheduler.step()
        return all_sum(loss_sum, self.world)

    def _batches(self, order: torch.Tensor) -> list[torch.Tensor]:
        if self.world.active:
            return step_slices(order, self.cfg.batch_size, self.world)
        return list(order.split(self.cfg.batch_size))

    def _pad(self, idx: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        """Fill a short last batch up to batch_size with samples from the epoch's start.
        They pass through the model (batch-norm statistics see them) but are sliced away
        before the loss, so they train nothing; the shape never changes, so nothing recompiles."""
        short = self.cfg.batch_size - idx.numel()
        if not self.static_batches or short <= 0:
            return idx
        return torch.cat([idx, order[:short].repeat(-(-short // order.numel()))[:short]])

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Test loss (mean) and accuracy (percent), with one host read at the end."""
        self.model.eval()
        loss_sum = torch.zeros((), device=self.device)
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        lo, hi = shard_range(self.data.test_y.numel(), self.world)  # each rank its part
        x_all, y_all = self.data.test_x[lo:hi], self.data.test_y[lo:hi]
        for x, y in zip(x_all.split(self.cfg.eval_batch_size), y_all.split(self.cfg.eval_batch_size)):
            with self.autocast():
                logits = self.forward(x.contiguous(memory_format=self.memory_format))
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
            correct += (logits.argmax(1) == y).sum()
        n = self.data.test_y.numel()
        loss, hits = all_sum(torch.stack([loss_sum, correct.to(loss_sum.dtype)]), self.world).tolist()
        return loss / n, 100.0 * hits / n

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "generator": self.generator.get_state(),
                "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        self.steps = state["steps"]

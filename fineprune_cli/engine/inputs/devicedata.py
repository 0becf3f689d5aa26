"""The device-resident data: the normalised images and labels on the device, and the
batched random crop + flip that augments them (the paper's CIFAR recipe). The trainer reads
its batches from here; the streaming loader (stream.py) and the dry run's probe build theirs
with the same pieces, so every path augments alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from .data import Dataset

CROP_PAD = 4  # pixels of zero padding for the random crop at 32x32 (the paper's CIFAR recipe)


def wants_augment(mode: str, channels: int) -> bool:
    """'auto' augments RGB data of any size (the paper's CIFAR recipe, scaled by `crop_pad`);
    grey images (Fashion-MNIST) train as they are, as in the paper."""
    if mode == "auto":
        return channels == 3
    return mode == "crop-flip"


def crop_pad(size: int) -> int:
    """The random crop's padding: the CIFAR recipe's 4 px at 32x32 in proportion (48x48: 6), at
    least 1 so that every size is shifted."""
    return max(1, size * CROP_PAD // 32)


def pad_images(x: torch.Tensor, pad: int, fill: torch.Tensor) -> torch.Tensor:
    """Pad N x C x H x W by `pad` pixels with a per-channel fill (normalised black = zero padding)."""
    n, c, h, w = x.shape
    out = fill.to(x.dtype).view(1, c, 1, 1).expand(n, c, h + 2 * pad, w + 2 * pad).contiguous()
    out[:, :, pad : pad + h, pad : pad + w] = x
    return out


class CropFlip:
    """Random crop of a pre-padded batch plus horizontal flip of half of it, in one gather:
    no per-sample Python, no DataLoader."""

    def __init__(self, size: int, pad: int, device: torch.device):
        self.size, self.pad = size, pad
        self.ramp = torch.arange(size, device=device)

    def __call__(self, padded: torch.Tensor, idx: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        b, dev = idx.numel(), idx.device
        shift = torch.randint(0, 2 * self.pad + 1, (2, b), generator=gen, device=dev)
        flip = torch.randint(0, 2, (b, 1), generator=gen, device=dev).bool()
        rows = shift[0, :, None] + self.ramp  # B x H
        cols = shift[1, :, None] + self.ramp  # B x W
        cols = torch.where(flip, cols.flip(1), cols)  # reversed columns = mirrored crop
        chans = torch.arange(padded.shape[1], device=dev)
        return padded[
            idx[:, None, None, None], chans[None, :, None, None], rows[:, None, :, None], cols[:, None, None, :]
        ]


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
            pad = crop_pad(dataset.image_size)
            train_x = pad_images(train_x, pad, (0 - mean) / std)
            crop = CropFlip(dataset.image_size, pad, device)
        return cls(train_x, dataset.train_y.to(device), norm(dataset.test_x), dataset.test_y.to(device), crop)

    @property
    def num_train(self) -> int:
        return self.train_y.numel()

    def batch(self, idx: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return self.train_x[idx] if self.crop is None else self.crop(self.train_x, idx, gen)

    def batches(self, batches: list[torch.Tensor], gen: torch.Generator) -> Iterator[torch.Tensor]:
        """The inputs of each batch of sample indices, in order (StreamData decodes them instead)."""
        return (self.batch(idx, gen) for idx in batches)

    def plain_batches(self, batches: list[torch.Tensor]) -> Iterator[torch.Tensor]:
        """The inputs without augmentation (the stored images, unpadded)."""
        if self.crop is None:
            return (self.train_x[idx] for idx in batches)
        pad, size = self.crop.pad, self.crop.size  # the padding stored: 4 px at 32x32, in proportion elsewhere
        return (self.train_x[idx, :, pad : pad + size, pad : pad + size] for idx in batches)

    def test_batches(self, lo: int, hi: int, size: int) -> Iterator[torch.Tensor]:
        return iter(self.test_x[lo:hi].split(size))

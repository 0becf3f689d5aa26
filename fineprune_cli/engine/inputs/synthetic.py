"""A deterministic, learnable stand-in for CIFAR-10, for tests and speed benchmarks."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import torch.nn.functional as F

from ..records.files import atomic_torch_save, cache_home, filling

VERSION = 1  # part of the cache file's name: bump it whenever the generator below changes


@functools.lru_cache(maxsize=2)
def synthetic_tensors(
    num_train: int, num_test: int, num_classes: int, image_size: int, channels: int, seed: int
) -> tuple[torch.Tensor, ...]:
    """Cached per process and on disk: generating 60,000 images takes seconds, and every
    process of a data-parallel or subprocess test would pay it again. Callers never modify
    the tensors in place."""
    path = cache_home() / (
        f"synthetic-v{VERSION}-{num_train}-{num_test}-{num_classes}-{image_size}-{channels}-{seed}.pt"
    )
    saved = _read(path)
    if saved is not None:
        return saved
    # the processes of a run on a fresh cache start together: one generates, the others wait for
    # its file (each of N ranks generating took N times the seconds, on the cores they share)
    with filling(path):
        saved = _read(path)
        if saved is not None:
            return saved
        tensors = _generate(num_train, num_test, num_classes, image_size, channels, seed)
        try:
            atomic_torch_save(list(tensors), path)
        except OSError:
            pass  # a read-only home still works, only without the cache
    return tensors


def _read(path: Path) -> tuple[torch.Tensor, ...] | None:
    try:
        saved = torch.load(path, weights_only=True)
        if isinstance(saved, (list, tuple)) and len(saved) == 4:
            return tuple(saved)
    except Exception:  # missing, half-copied or foreign: generate again
        pass
    return None


def _generate(
    num_train: int, num_test: int, num_classes: int, image_size: int, channels: int, seed: int
) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(num_classes, channels, 4, 4, generator=g)
    templates = F.interpolate(coarse, size=(image_size, image_size), mode="bilinear", align_corners=False)
    # a bank of noise images drawn from per sample: drawing 60,000 fresh ones took seconds
    bank = torch.randn(4096, channels, image_size, image_size, generator=g)

    def split(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, num_classes, (n,), generator=g)
        x = torch.empty(n, channels, image_size, image_size, dtype=torch.uint8)
        for lo in range(0, n, 4096):  # chunks keep the float intermediates small
            yc = y[lo : lo + 4096]
            scale = 0.3 + 1.4 * torch.rand(len(yc), 1, 1, 1, generator=g)
            noise = bank[torch.randint(0, len(bank), (len(yc),), generator=g)]
            xc = templates[yc] * scale + 0.6 * noise
            shifts = torch.randint(-3, 4, (2,), generator=g).tolist()
            x[lo : lo + 4096] = (torch.roll(xc, shifts, dims=(2, 3)).clamp(0, 1) * 255).round()
        return x, y

    return (*split(num_train), *split(num_test))

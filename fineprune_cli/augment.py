"""Batched augmentation on the training device: random crop with zero padding + horizontal flip.

The training set is stored pre-padded, so one gather per batch does crop and flip together;
no per-sample Python, no DataLoader.
"""

from __future__ import annotations

import torch


def pad_images(x: torch.Tensor, pad: int, fill: torch.Tensor) -> torch.Tensor:
    """Pad N x C x H x W by `pad` pixels with a per-channel fill (normalised black = zero padding)."""
    n, c, h, w = x.shape
    out = fill.to(x.dtype).view(1, c, 1, 1).expand(n, c, h + 2 * pad, w + 2 * pad).contiguous()
    out[:, :, pad:pad + h, pad:pad + w] = x
    return out


class CropFlip:
    """Crops an H x W window at a random offset of a padded batch and flips half of them."""

    def __init__(self, size: int, pad: int, device: torch.device):
        self.size, self.pad = size, pad
        self.ramp = torch.arange(size, device=device)

    def __call__(self, padded: torch.Tensor, idx: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        b, dev = idx.numel(), idx.device
        shift = torch.randint(0, 2 * self.pad + 1, (2, b), generator=gen, device=dev)
        flip = torch.randint(0, 2, (b, 1), generator=gen, device=dev).bool()
        rows = shift[0, :, None] + self.ramp                     # B x H
        cols = shift[1, :, None] + self.ramp                     # B x W
        cols = torch.where(flip, cols.flip(1), cols)             # reversed columns = mirrored crop
        chans = torch.arange(padded.shape[1], device=dev)
        return padded[idx[:, None, None, None], chans[None, :, None, None],
                      rows[:, None, :, None], cols[:, None, None, :]]

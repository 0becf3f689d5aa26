"""Crafted files for the hostile cases and the tests: image folders whose decoding is easy to
get wrong (palette PNGs, grey and colour mixed, test images of another size, alpha, 16 bits),
header bombs, FIFOs where a file is expected.

    from crafted import FOLDERS            # name -> builder(root) of a train/test image folder
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image


def _classes(
    root: Path,
    per_class: int,
    draw: Callable[[str, int, int], Image.Image],
    labels=("a", "b"),
    name: Callable[[int], str] = lambda i: f"{i}.png",
) -> Path:
    for split, n in (("train", per_class), ("test", max(per_class // 2, 2))):
        for c, label in enumerate(labels):
            (root / split / label).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                draw(split, c, i).save(root / split / label / name(i))
    return root


def palette_folder(root: Path, per_class: int = 6) -> Path:
    """Red against green, every pixel palette index 0: trained on the indices, the two classes
    are the same image."""

    def draw(split: str, c: int, i: int) -> Image.Image:
        im = Image.new("P", (8, 8), 0)
        first = (200 + i, 10, 10) if c == 0 else (10, 200 + i, 10)
        im.putpalette([*first, 0, 0, 255] + [0] * 762)
        return im

    return _classes(root, per_class, draw)


def grey_first_folder(root: Path, per_class: int = 6) -> Path:
    """A colour folder whose first training file is grey (class a's 0.png)."""

    def draw(split: str, c: int, i: int) -> Image.Image:
        if split == "train" and c == 0 and i == 0:
            return Image.new("L", (8, 8), 120)
        return Image.new("RGB", (8, 8), (180, 30 + 5 * i, 20) if c == 0 else (20, 30 + 5 * i, 180))

    return _classes(root, per_class, draw)


def alpha_folder(root: Path, per_class: int = 6) -> Path:
    """Grey + alpha, RGBA and 16-bit grey PNGs in one folder, and a grey JPEG."""

    def draw(split: str, c: int, i: int) -> Image.Image:
        kind = i % 4
        if kind == 0:
            return Image.new("LA", (8, 8), (60 + 100 * c, 128))
        if kind == 1:
            return Image.new("RGBA", (8, 8), (200 * c, 50, 200 - 200 * c, 77))
        if kind == 2:
            return Image.fromarray(np.full((8, 8), 20000 + 30000 * c, dtype=np.uint16))
        return Image.new("L", (8, 8), 40 + 150 * c)

    return _classes(root, per_class, draw, name=lambda i: f"{i}.jpg" if i % 4 == 3 else f"{i}.png")


def grey_folder(root: Path, per_class: int = 6) -> Path:
    """Grey PNGs and JPEGs only: the folder's mode is grey, one channel."""

    def draw(split: str, c: int, i: int) -> Image.Image:
        return Image.new("L", (8, 8), 50 + 120 * c + i)

    return _classes(root, per_class, draw, name=lambda i: f"{i}.jpg" if i % 2 else f"{i}.png")


def bigger_test_images_folder(root: Path, per_class: int = 6) -> Path:
    """Training images 8 x 8, test images 12 x 12."""

    def draw(split: str, c: int, i: int) -> Image.Image:
        side = 8 if split == "train" else 12
        return Image.new("RGB", (side, side), (200 * c, 90, 200 - 200 * c))

    return _classes(root, per_class, draw)


FOLDERS = {"palette": palette_folder, "grey-first": grey_first_folder, "alpha": alpha_folder, "grey": grey_folder}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_bomb(width: int = 60000, height: int = 60000, colour_type: int = 2) -> bytes:
    """A valid PNG header declaring width x height pixels, an empty IDAT: 57 bytes."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", b"") + _chunk(b"IEND", b"")


def jpeg_header_bomb(width: int = 65000, height: int = 65000, components: int = 3) -> bytes:
    """SOI and a baseline frame header declaring width x height, nothing after."""
    frame = struct.pack(">BHHB", 8, height, width, components) + b"\x01\x11\x00" * components
    return b"\xff\xd8" + b"\xff\xc0" + struct.pack(">H", len(frame) + 2) + frame + b"\xff\xd9"


def make_fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def swap_class_folders(split_dir: Path, a: str = "a", b: str = "b") -> None:
    """Exchange two class folders' names: the same files, every label flipped."""
    tmp = split_dir / (a + ".swap")
    (split_dir / a).rename(tmp)
    (split_dir / b).rename(split_dir / a)
    tmp.rename(split_dir / b)

"""Image-folder datasets: DIR/{train,test}/<class>/*.jpg|png decoded into uint8 tensors.

Decoding tens of thousands of JPEGs takes a minute, so the tensors are cached, keyed on every
file's relative path, label, size and modification time.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import TypeAlias

from ...errors import DataError
from ...lazytorch import torch
from ..records.files import cache_home, filling, quiet_stderr
from .imageheader import PNG_SIGNATURE, check_png_chunks, read_header

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
Folder: TypeAlias = "tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[str]]"  # a string: no torch yet


def list_folder(root: Path) -> dict[str, list[tuple[Path, int]]]:
    """{'train': [(file, label)], 'test': [...], 'train_classes': [...], 'test_classes': [...]},
    checked: both splits, at least two classes, no empty class, the same classes in both."""
    splits = {}
    for split in ("train", "test"):
        d = root / split
        if not d.is_dir():
            raise DataError(f"{root} must hold train/<class>/*.jpg|png and test/<class>/*.jpg|png ({d} is missing)")
        classes = sorted(p.name for p in d.iterdir() if p.is_dir())
        if len(classes) < 2:  # one class would train to a meaningless 100%
            raise DataError(f"{d} needs at least two class folders, found {len(classes)}")
        splits[split] = [
            (f, i)
            for i, c in enumerate(classes)
            for f in sorted((d / c).iterdir())
            if f.suffix.lower() in IMAGE_SUFFIXES
        ]
        odd = [f for f, _ in splits[split] if not f.is_file()]
        if odd:  # a FIFO would block the reader, a device never end
            raise DataError(f"{odd[0]} is not a regular file")
        empty = sorted(set(classes) - {classes[i] for _, i in splits[split]})
        if empty:  # a class with no images would be reported as learned when it was never seen
            raise DataError(f"{d / empty[0]} holds no .jpg/.png images")
        splits[split + "_classes"] = classes
    if splits["train_classes"] != splits["test_classes"]:
        raise DataError(f"{root}: train and test have different class folders")
    return splits


def listing_hash(root: Path, items: list[tuple[Path, int]], ctime: bool = False) -> str:
    """Every file's path (relative), label, size and mtime (and with `ctime` its ctime), hashed:
    renaming a class folder or moving a file between classes changes it, as editing a file does."""
    digest = hashlib.sha256()
    for f, label in items:
        st = f.stat()
        changed = f"\0{st.st_ctime_ns}" if ctime else ""
        digest.update(f"{f.relative_to(root)}\0{label}\0{st.st_size}\0{st.st_mtime_ns}{changed}\n".encode())
    return digest.hexdigest()


def _fingerprint(root: Path, listing: dict) -> str:
    # v2: images converted to the folder's mode (palette PNGs were cached as their indices); v3:
    # the ctime too, which an edit moves even where the old mtime is set back
    return "v3-" + "-".join(listing_hash(root, listing[split], ctime=True) for split in ("train", "test"))


def identity(root: Path, listing: dict) -> dict[str, str]:
    """What a checkpoint records of its data: each split's listing hash (with the file count,
    so a refusal can say what changed)."""
    return {
        split: f"{len(listing[split])} files, {listing_hash(root, listing[split])[:16]}" for split in ("train", "test")
    }


def _cached(saved: dict, fingerprint: str) -> Folder | None:
    """The cache's dataset when it was made from these files and has the right shapes."""
    if saved.get("fingerprint") != fingerprint:
        return None
    parts = [saved[k] for k in ("train_x", "train_y", "test_x", "test_y")]
    ok = (
        all(isinstance(t, torch.Tensor) for t in parts)
        and parts[0].dim() == parts[2].dim() == 4
        and parts[0].dtype == parts[2].dtype == torch.uint8
        and len(parts[0]) == len(parts[1])
        and len(parts[2]) == len(parts[3])
        and parts[0].shape[1:] == parts[2].shape[1:]
    )
    return (*parts, list(saved["classes"])) if ok else None


def as_uint8(image: torch.Tensor) -> torch.Tensor:
    """16-bit PNGs decode to uint16: scale to 8 bits (a plain cast would wrap modulo 256)."""
    if image.dtype == torch.uint8:
        return image
    top = torch.iinfo(image.dtype).max if not image.dtype.is_floating_point else 1.0
    return (image.double() * (255.0 / top)).round().clamp(0, 255).to(torch.uint8)


def folder_mode(listing: dict, size: int | None) -> tuple[str, tuple[int, int]]:
    """('RGB' when any image of the folder (both splits) is colour, else 'GRAY'; the images'
    (height, width)), from the files' headers: every image is converted to that mode on both
    data paths. Each header is checked first (pixel limit, format); without a resize target
    all images must have one size."""
    colour, first = False, None
    for path, _ in listing["train"] + listing["test"]:
        header = read_header(path)
        colour = colour or header.colour
        shape = (header.height, header.width)
        first = first or (path, shape)
        if size is None and shape != first[1]:
            raise DataError(f"{path} is {shape}, {first[0]} is {first[1]}: pass --image-size N to resize them all")
    return ("RGB" if colour else "GRAY"), (first[1] if first else (0, 0))


def read_image(path: Path, mode: str, size: int | None = None) -> torch.Tensor:
    """One image file as uint8 C x H x W in `mode` ('RGB' or 'GRAY'), resized to size x size
    when given; any failure is a DataError naming the file. The decoder's own messages (libpng
    prints to the process's stderr) are kept off the terminal: the error says it in one line."""
    from torchvision.transforms.v2.functional import resize

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read image {path}: {exc.strerror or exc}") from None
    read_header(path, raw)  # these very bytes: a file swapped since the folder's scan is caught too
    try:
        with quiet_stderr():
            image = as_uint8(_decode(raw, mode))
        if size is not None and tuple(image.shape[1:]) != (size, size):
            image = resize(image, [size, size], antialias=True)
    except Exception as exc:
        reason = str(exc).strip().rsplit(", ", 1)[-1][:200] or type(exc).__name__
        raise DataError(f"cannot decode image {path}: {reason}") from None
    return image


def _decode(raw: bytes, mode: str) -> torch.Tensor:
    """JPEGs through torchvision (libjpeg-turbo); PNGs through Pillow: torchvision's PNG decoder
    kills the process (SIGSEGV) on any error in the image data (a bad zlib stream or filter
    byte, too little data), where Pillow raises."""
    if raw[:8] != PNG_SIGNATURE:
        from torchvision.io import ImageReadMode, decode_image

        return decode_image(torch.frombuffer(bytearray(raw), dtype=torch.uint8), mode=getattr(ImageReadMode, mode))
    import numpy as np
    from PIL import Image

    check_png_chunks(raw)
    with Image.open(io.BytesIO(raw), formats=["PNG"]) as image:
        image.load()
        if image.mode.startswith("I"):  # 16-bit grey: scaled to 8 bits by as_uint8, not clipped
            grey = torch.from_numpy(np.asarray(image, dtype=np.uint16).copy())[None]
            return grey.expand(3, -1, -1).contiguous() if mode == "RGB" else grey
        pixels = np.asarray(image.convert("RGB" if mode == "RGB" else "L"))
    return torch.from_numpy(pixels.copy()).reshape(*pixels.shape[:2], -1).permute(2, 0, 1).contiguous()


def _decode_all(items: list[tuple[Path, int]], mode: str, size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    if not items:
        raise DataError("image folder split has no .jpg/.jpeg/.png files")
    first = read_image(items[0][0], mode, size)
    out = torch.empty(len(items), *first.shape, dtype=torch.uint8)
    out[0] = first
    for i, (path, _) in enumerate(items[1:], 1):
        image = read_image(path, mode, size)
        if image.shape != first.shape:  # the header said otherwise: a crafted or odd file
            raise DataError(
                f"{path} decodes to {tuple(image.shape[1:])}, other images to "
                f"{tuple(first.shape[1:])}: pass --image-size N to resize them all"
            )
        out[i] = image
    return out, torch.tensor([label for _, label in items], dtype=torch.long)


def load_image_folder(data_dir: Path | None, image_size: int | None = None) -> Folder:
    """(train_x, train_y, test_x, test_y, class names) of DIR/{train,test}/<class>/*.jpg|png,
    decoded once (resized to image_size x image_size when given) and then read from the user's
    cache folder while the files stay the same."""
    if data_dir is None:
        raise DataError("--dataset folder needs --data-dir DIR holding train/<class>/ and test/<class>/")
    if not data_dir.is_dir():
        raise DataError(f"image folder {data_dir} does not exist")
    listing = list_folder(data_dir)
    fingerprint = _fingerprint(data_dir, listing) + ("" if image_size is None else f"-{image_size}")
    cache = cache_path(data_dir, image_size)
    found = _read_cache(cache, fingerprint)
    if found is not None:
        return found
    # the ranks of a run on a fresh cache start together: one decodes, the others read its file
    with filling(cache):
        return _read_cache(cache, fingerprint) or _decode_and_keep(listing, image_size, fingerprint, cache)


def _read_cache(cache: Path, fingerprint: str) -> Folder | None:
    if not cache.is_file():
        return None
    try:
        return _cached(torch.load(cache, weights_only=True), fingerprint)
    except Exception:
        return None  # a stale or broken cache is simply rebuilt


def _decode_and_keep(listing: dict, image_size: int | None, fingerprint: str, cache: Path) -> Folder:
    mode, _ = folder_mode(listing, image_size)
    train_x, train_y = _decode_all(listing["train"], mode, image_size)
    test_x, test_y = _decode_all(listing["test"], mode, image_size)
    classes = listing["train_classes"]
    _save_cache(
        cache,
        {
            "fingerprint": fingerprint,
            "train_x": train_x,
            "train_y": train_y,
            "test_x": test_x,
            "test_y": test_y,
            "classes": classes,
        },
    )
    return train_x, train_y, test_x, test_y, classes


def cache_path(data_dir: Path, image_size: int | None = None) -> Path:
    """The cache lives in the user's cache folder, never beside the images: reading a dataset
    named by a shared config file writes nothing where that file points."""
    home = cache_home()
    key = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    size = "" if image_size is None else f"-{image_size}px"  # each size its own cache
    return Path(home) / f"folder-{data_dir.resolve().name[:40]}-{key}{size}.pt"


def _save_cache(path: Path, obj: dict) -> None:
    from ..records.files import atomic_torch_save

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_torch_save(obj, path)
    except OSError:
        pass  # a read-only dataset folder still works, only without the cache

"""Image-folder datasets: DIR/{train,test}/<class>/*.jpg|png decoded into uint8 tensors.

Decoding tens of thousands of JPEGs takes a minute, so the tensors are cached, keyed on every
file's relative path, label, size and modification time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from ..errors import DataError
from .files import cache_home

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
Folder = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[str]]


def list_folder(root: Path) -> dict[str, list[tuple[Path, int]]]:
    """{'train': [(file, label)], 'test': [...], 'train_classes': [...], 'test_classes': [...]},
    checked: both splits, at least two classes, no empty class, the same classes in both."""
    splits = {}
    for split in ("train", "test"):
        d = root / split
        if not d.is_dir():
            raise DataError(f"{root} must hold train/<class>/*.jpg|png and test/<class>/*.jpg|png "
                            f"({d} is missing)")
        classes = sorted(p.name for p in d.iterdir() if p.is_dir())
        if len(classes) < 2:  # one class would train to a meaningless 100%
            raise DataError(f"{d} needs at least two class folders, found {len(classes)}")
        splits[split] = [(f, i) for i, c in enumerate(classes) for f in sorted((d / c).iterdir())
                         if f.suffix.lower() in IMAGE_SUFFIXES]
        empty = sorted(set(classes) - {classes[i] for _, i in splits[split]})
        if empty:  # a class with no images would be reported as learned when it was never seen
            raise DataError(f"{d / empty[0]} holds no .jpg/.png images")
        splits[split + "_classes"] = classes
    if splits["train_classes"] != splits["test_classes"]:
        raise DataError(f"{root}: train and test have different class folders")
    return splits


def _fingerprint(root: Path, listing: dict) -> str:
    """Every file's path (relative), label, size and mtime, hashed: renaming a class folder or
    moving a file between classes changes it, as editing a file does."""
    digest = hashlib.sha256()
    for split in ("train", "test"):
        for f, label in listing[split]:
            st = f.stat()
            digest.update(f"{split}\0{f.relative_to(root)}\0{label}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _cached(saved: dict, fingerprint: str) -> Folder | None:
    """The cache's dataset when it was made from these files and has the right shapes."""
    if saved.get("fingerprint") != fingerprint:
        return None
    parts = [saved[k] for k in ("train_x", "train_y", "test_x", "test_y")]
    ok = (all(isinstance(t, torch.Tensor) for t in parts) and parts[0].dim() == parts[2].dim() == 4
          and parts[0].dtype == parts[2].dtype == torch.uint8 and len(parts[0]) == len(parts[1])
          and len(parts[2]) == len(parts[3]) and parts[0].shape[1:] == parts[2].shape[1:])
    return (*parts, list(saved["classes"])) if ok else None


def as_uint8(image: torch.Tensor) -> torch.Tensor:
    """16-bit PNGs decode to uint16: scale to 8 bits (a plain cast would wrap modulo 256)."""
    if image.dtype == torch.uint8:
        return image
    top = torch.iinfo(image.dtype).max if not image.dtype.is_floating_point else 1.0
    return (image.double() * (255.0 / top)).round().clamp(0, 255).to(torch.uint8)


def read_image(path: Path, mode: str = "UNCHANGED", size: int | None = None) -> torch.Tensor:
    """One image file as uint8 C x H x W (mode: torchvision's ImageReadMode name), resized to
    size x size when given; any failure is a DataError naming the file."""
    from torchvision.io import ImageReadMode, decode_image
    from torchvision.transforms.v2.functional import resize

    try:
        data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
        image = as_uint8(decode_image(data, mode=getattr(ImageReadMode, mode)))
        if size is not None and tuple(image.shape[1:]) != (size, size):
            image = resize(image, [size, size], antialias=True)
    except Exception:
        raise DataError(f"cannot decode image {path}") from None
    return image


def _decode_all(items: list[tuple[Path, int]], size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    images = [read_image(path, size=size) for path, _ in items]
    if not images:
        raise DataError("image folder split has no .jpg/.jpeg/.png files")
    channels = 3 if any(im.shape[0] >= 3 for im in images) else 1
    shape = images[0].shape[1:]
    out = torch.empty(len(images), channels, *shape, dtype=torch.uint8)
    for i, (im, (path, _)) in enumerate(zip(images, items)):
        if im.shape[1:] != shape:
            raise DataError(f"{path} is {tuple(im.shape[1:])}, other images are {tuple(shape)}: "
                            "pass --image-size N to resize them all")
        im = im[:3] if im.shape[0] >= 3 else im[:1]
        out[i] = im.expand(channels, *shape) if im.shape[0] == 1 else im[:channels]
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
    if cache.is_file():
        try:
            found = _cached(torch.load(cache, weights_only=True), fingerprint)
            if found is not None:
                return found
        except Exception:
            pass  # a stale or broken cache is simply rebuilt
    train_x, train_y = _decode_all(listing["train"], image_size)
    test_x, test_y = _decode_all(listing["test"], image_size)
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DataError(f"{data_dir}: train images are {tuple(train_x.shape[1:])}, test {tuple(test_x.shape[1:])}")
    classes = listing["train_classes"]
    _save_cache(cache, {"fingerprint": fingerprint, "train_x": train_x, "train_y": train_y,
                        "test_x": test_x, "test_y": test_y, "classes": classes})
    return train_x, train_y, test_x, test_y, classes


def cache_path(data_dir: Path, image_size: int | None = None) -> Path:
    """The cache lives in the user's cache folder, never beside the images: reading a dataset
    named by a shared config file writes nothing where that file points."""
    home = cache_home()
    key = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    size = "" if image_size is None else f"-{image_size}px"  # each size its own cache
    return Path(home) / f"folder-{data_dir.resolve().name[:40]}-{key}{size}.pt"


def _save_cache(path: Path, obj: dict) -> None:
    from .files import atomic_torch_save

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_torch_save(obj, path)
    except OSError:
        pass  # a read-only dataset folder still works, only without the cache

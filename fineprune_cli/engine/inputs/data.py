"""Datasets as uint8 tensors: Fashion-MNIST (IDX), CIFAR-10/100 (pickle), image folders, synthetic.

Everything is decoded once into N x C x H x W uint8 tensors; the trainer moves them to the
device and never touches files again.
"""

from __future__ import annotations

import functools
import gzip
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import DataError
from ..setup.sections import DATASETS
from .imagefolder import load_image_folder
from .synthetic import synthetic_tensors

FASHION_MNIST_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_CLASSES = [
    "t-shirt/top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle boot",
]


@dataclass
class Dataset:
    name: str
    train_x: torch.Tensor  # uint8 N x C x H x W
    train_y: torch.Tensor  # int64 N
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    classes: list[str]

    @property
    def in_channels(self) -> int:
        return self.train_x.shape[1]

    @property
    def image_size(self) -> int:
        return self.train_x.shape[2]

    @property
    def num_train(self) -> int:
        return self.train_y.numel()


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    download: bool = False,
    subset: int | None = None,
    seed: int = 0,
    test_subset: int | None = None,
    image_size: int | None = None,
) -> Dataset:
    loaders = {
        "fashion-mnist": _fashion_mnist,
        "cifar10": _cifar10,
        "cifar100": _cifar100,
        "folder": lambda d, dl: _folder(d, image_size),
        "synthetic": lambda d, dl: make_synthetic(),
    }
    if name not in loaders:
        raise DataError(f"unknown dataset '{name}'; choose one of: {', '.join(DATASETS)}")
    ds = loaders[name](Path(data_dir) if data_dir is not None else None, download)
    if subset is not None:
        idx = balanced_subset(ds.train_y, subset, seed)
        ds.train_x, ds.train_y = ds.train_x[idx].contiguous(), ds.train_y[idx].contiguous()
    if test_subset is not None:  # a fixed test subset: the same for every seed
        idx = balanced_subset(ds.test_y, test_subset, 0, "--test-subset")
        ds.test_x, ds.test_y = ds.test_x[idx].contiguous(), ds.test_y[idx].contiguous()
    return ds


def balanced_subset(labels: torch.Tensor, n: int, seed: int, option: str = "--subset") -> torch.Tensor:
    """A fixed, seeded subset with floor(n / C) samples per class, the remainder to the first classes."""
    if not 1 <= n <= labels.numel():
        raise DataError(f"{option} must be between 1 and {labels.numel()}, got {n}")
    classes = torch.unique(labels)
    if n < len(classes):  # fewer samples than classes: some class would be missing entirely
        raise DataError(f"{option} must be at least the number of classes ({len(classes)}), got {n}")
    g = torch.Generator().manual_seed(seed)
    per, extra = divmod(n, len(classes))
    picks = []
    for i, c in enumerate(classes.tolist()):
        members = torch.nonzero(labels == c).flatten()
        want = per + (1 if i < extra else 0)
        if want > members.numel():
            raise DataError(f"--subset {n}: class {c} has only {members.numel()} samples")
        picks.append(members[torch.randperm(members.numel(), generator=g)[:want]])
    return torch.sort(torch.cat(picks)).values


# --- Fashion-MNIST (IDX) -------------------------------------------------------------------

_IDX_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (optionally gzip): magic 0x0000 08 NDIM, NDIM big-endian sizes, uint8 data.
    Read-only (callers copy), and decoded once a process while the file stays as it was:
    compare trains its runs in one process, and gunzipping Fashion-MNIST again took 0.4 s of a
    tiny run's 1.4 s of CPU."""
    try:
        st = path.stat()
    except OSError as exc:
        raise DataError(f"cannot read IDX file {path}: {exc}") from None
    return _decoded_idx(path, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


@functools.lru_cache(maxsize=4)  # Fashion-MNIST's four files: 55 MB
def _decoded_idx(path: Path, stamp: tuple[int, ...]) -> np.ndarray:
    """`stamp`: the file's stat, so a file replaced or rewritten is read again."""
    try:
        raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError(f"cannot read IDX file {path}: {exc}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or not 1 <= raw[3] <= 4:
        raise DataError(f"{path} is not a uint8 IDX file (bad magic number)")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise DataError(f"{path} is truncated (header)")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    size = int(np.prod(dims))
    body = raw[4 + 4 * ndim :]
    if len(body) != size:
        raise DataError(f"{path} is truncated or padded: {len(body)} bytes of data, expected {size}")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)  # over bytes: read-only


def _find_idx(dirs: list[Path], stem: str) -> Path | None:
    for d in dirs:
        for name in (stem + ".gz", stem):
            if (d / name).is_file():
                return d / name
    return None


def _fashion_dirs(data_dir: Path | None) -> list[Path]:
    return [data_dir, data_dir / "FashionMNIST" / "raw"] if data_dir else [FASHION_MNIST_SYSTEM_DIR]


def _cifar_files(data_dir: Path | None, hundred: bool) -> tuple[Path, list[str], str]:
    """The CIFAR pickle folder, its training batches and its test batch."""
    sub = (data_dir or Path("data")) / ("cifar-100-python" if hundred else "cifar-10-batches-py")
    train_files = ["train"] if hundred else [f"data_batch_{i}" for i in range(1, 6)]
    return sub, train_files, "test" if hundred else "test_batch"


def source_files(dataset: str, data_dir: Path | None) -> list[Path] | None:
    """The files a built-in dataset is read from, where they all exist (their content is the
    dataset's identity, `engine.inputs.dataid`); None for the others or while any is missing."""
    if dataset == "fashion-mnist":
        found = [_find_idx(_fashion_dirs(data_dir), stem) for stem in _IDX_FILES.values()]
    elif dataset in ("cifar10", "cifar100"):
        sub, train, test = _cifar_files(data_dir, dataset == "cifar100")
        found = [sub / f if (sub / f).is_file() else None for f in [*train, test]]
    else:
        return None
    return None if any(f is None for f in found) else [f for f in found if f is not None]


def _fashion_mnist(data_dir: Path | None, download: bool) -> Dataset:
    dirs = _fashion_dirs(data_dir)
    paths = {k: _find_idx(dirs, stem) for k, stem in _IDX_FILES.items()}
    if any(p is None for p in paths.values()) and download:
        import torchvision

        torchvision.datasets.FashionMNIST(root=str(data_dir or "data"), download=True)
        dirs.append(Path(data_dir or "data") / "FashionMNIST" / "raw")
        paths = {k: _find_idx(dirs, stem) for k, stem in _IDX_FILES.items()}
    missing = [stem for k, stem in _IDX_FILES.items() if paths[k] is None]
    if missing:
        where = " or ".join(str(d) for d in dirs)
        raise DataError(
            f"Fashion-MNIST files ({missing[0]}[.gz], ...) not found in {where}: "
            "apt-get install dataset-fashion-mnist, or pass --download with --data-dir DIR"
        )
    arrays = {k: torch.from_numpy(read_idx(p).copy()) for k, p in paths.items()}
    for split in ("train", "test"):
        if arrays[f"{split}_x"].shape[0] != arrays[f"{split}_y"].shape[0]:
            raise DataError(f"{paths[split + '_x']} and its labels disagree on the number of samples")
    return Dataset(
        "fashion-mnist",
        arrays["train_x"].unsqueeze(1).contiguous(),
        arrays["train_y"].long(),
        arrays["test_x"].unsqueeze(1).contiguous(),
        arrays["test_y"].long(),
        10,
        FASHION_CLASSES,
    )


# --- CIFAR-10/100 (torchvision's python pickles) -------------------------------------------


class _ArraysOnly(pickle.Unpickler):
    """CIFAR batches hold dicts, lists, bytes and numpy arrays; refuse anything else, so a
    planted pickle cannot run code."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            data = _ArraysOnly(f, encoding="bytes").load()
    except FileNotFoundError:
        raise DataError(f"missing CIFAR file {path}") from None
    except Exception as exc:  # any unpickling failure means a corrupt or foreign file
        raise DataError(f"cannot read CIFAR file {path}: corrupt or truncated ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path} is not a CIFAR batch (no dict inside)")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in data.items()}


def _cifar_arrays(path: Path, label_key: str) -> tuple[torch.Tensor, torch.Tensor]:
    d = _unpickle(path)
    try:
        x = np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        y = np.asarray(d[label_key], dtype=np.int64)
    except (KeyError, ValueError) as exc:
        raise DataError(f"{path} lacks CIFAR fields ({exc})") from None
    if len(x) != len(y):
        raise DataError(f"{path}: {len(x)} images but {len(y)} labels")
    return torch.from_numpy(x.copy()), torch.from_numpy(y.copy())


def _cifar(data_dir: Path | None, download: bool, hundred: bool) -> Dataset:
    root = data_dir or Path("data")
    sub, train_files, test_file = _cifar_files(data_dir, hundred)
    offline = (
        ("; offline, CIFAR-10 (JPEG q75): make cifar10-jpeg, then --dataset folder --data-dir .data/cifar10-jpeg")
        if not hundred
        else ""
    )
    if not sub.is_dir() and download:
        _fetch_cifar(root, hundred, offline)
    if not sub.is_dir():
        raise DataError(
            f"{sub} not found: pass --download (needs internet) or put torchvision's "
            f"cifar-{'100' if hundred else '10'}-python files there (--data-dir sets the parent)"
            f"{offline}"
        )
    label_key = "fine_labels" if hundred else "labels"
    parts = [_cifar_arrays(sub / f, label_key) for f in train_files]
    test_x, test_y = _cifar_arrays(sub / test_file, label_key)
    meta = sub / ("meta" if hundred else "batches.meta")
    names_key = "fine_label_names" if hundred else "label_names"
    n = 100 if hundred else 10
    classes = [str(i) for i in range(n)]
    if meta.is_file():
        names = _unpickle(meta).get(names_key)
        if names:
            classes = [c.decode() if isinstance(c, bytes) else str(c) for c in names]
    return Dataset(
        "cifar100" if hundred else "cifar10",
        torch.cat([p[0] for p in parts]),
        torch.cat([p[1] for p in parts]),
        test_x,
        test_y,
        n,
        classes,
    )


def _fetch_cifar(root: Path, hundred: bool, offline: str) -> None:
    """torchvision's download; no network (or a broken archive) is one line, not a traceback."""
    import torchvision

    cls = torchvision.datasets.CIFAR100 if hundred else torchvision.datasets.CIFAR10
    try:
        cls(root=str(root), download=True)
    except (OSError, RuntimeError) as exc:  # URLError is an OSError; a bad checksum a RuntimeError
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"cannot download CIFAR-{'100' if hundred else '10'} into {root} "
            f"(no internet?): {' '.join(str(reason).split())}{offline}"
        ) from None


def _cifar10(data_dir: Path | None, download: bool) -> Dataset:
    return _cifar(data_dir, download, hundred=False)


def _cifar100(data_dir: Path | None, download: bool) -> Dataset:
    return _cifar(data_dir, download, hundred=True)


# --- image folders (engine/inputs/imagefolder.py) ----------------------------------------------


def _folder(data_dir: Path | None, image_size: int | None) -> Dataset:
    train_x, train_y, test_x, test_y, classes = load_image_folder(data_dir, image_size)
    return Dataset("folder", train_x, train_y, test_x, test_y, len(classes), classes)


def make_synthetic(
    num_train: int = 50000,
    num_test: int = 10000,
    num_classes: int = 10,
    image_size: int = 32,
    channels: int = 3,
    seed: int = 0,
) -> Dataset:
    """Class templates (smooth random patterns) x per-sample brightness + noise, shifted per chunk.

    Learnable, not trivial, and identical on every call: its own generator, not the global RNG.
    """
    tensors = synthetic_tensors(num_train, num_test, num_classes, image_size, channels, seed)
    return Dataset("synthetic", *tensors, num_classes, [f"pattern{i}" for i in range(num_classes)])

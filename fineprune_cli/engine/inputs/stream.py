"""Streaming image folders: DataLoader workers decode the files of each batch, every epoch.

The trainer still draws the epoch's order and batches (plan -> shuffle -> batches, as on the
device path) and hands them here; the batches become the DataLoader's batch sampler, so a
sample a pruned epoch leaves out is never read nor decoded. The workers return uint8 images;
the main process copies them to the device (pinned, non-blocking on CUDA), normalises them and
applies the device path's batched crop + flip with the trainer's generator, so a stream equals
the device-resident run draw for draw.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader

from ...errors import DataError
from ..setup.config import DataConfig
from .data import balanced_subset, load_dataset, source_files
from .dataid import files_identity, folder_identity, is_content
from .devicedata import CropFlip, DeviceData, crop_pad, pad_images, wants_augment
from .imagefolder import folder_mode, identity, list_folder, read_image

STATS_SAMPLES = 2048  # images whose pixels give the normalisation (all of them when fewer)
MEMORY_SHARE = 0.5  # `auto` holds the data on the device when it takes under this share of free memory


class FolderImages(torch.utils.data.Dataset):
    """(path, label) items decoded on demand to uint8 C x size x size; decode errors come back
    as values (a message naming the file), so the main process raises them as one line."""

    def __init__(self, items: list[tuple[Path, int]], mode: str, size: int | None):
        self.paths = [str(p) for p, _ in items]  # plain strings: cheap to send to workers
        self.mode, self.size = mode, size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[str, Any]:
        try:
            return self.paths[i], read_image(Path(self.paths[i]), self.mode, self.size)
        except DataError as exc:
            return self.paths[i], str(exc)


def collate(items: list[tuple[str, Any]]) -> torch.Tensor | str:
    """One uint8 batch, or the message of its first bad image."""
    for _, image in items:
        if isinstance(image, str):
            return image
    shape = items[0][1].shape
    for path, image in items:
        if image.shape != shape:
            return (
                f"{path} is {tuple(image.shape[1:])}, other images are {tuple(shape[1:])}: "
                "pass --image-size N to resize them all"
            )
    return torch.stack([image for _, image in items])


class _Batches:
    """A batch sampler whose batches the trainer sets before each pass (persistent workers
    keep the sampler object, so it is changed in place)."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class StreamData:
    """The trainer's data (as DeviceData): labels on the device, images decoded per batch."""

    def __init__(
        self,
        train: list[tuple[Path, int]],
        test: list[tuple[Path, int]],
        size: int | None,
        mode: str,
        device: torch.device,
        crop_size: int | None,
        workers: int,
    ):
        """size: the resize target (None: as decoded); mode: the folder's ('RGB' or 'GRAY');
        crop_size: augment with crop + flip."""
        self.device, self.num_test = device, len(test)
        self.dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.images = FolderImages(train + test, mode, size)  # one pool of workers for both splits
        self.train_y = torch.tensor([y for _, y in train], dtype=torch.long).to(device)
        self.test_y = torch.tensor([y for _, y in test], dtype=torch.long).to(device)
        self.sampler = _Batches()
        # the worker count is the user's choice (--workers); torch's advice against more workers
        # than cores would be a second line under every run
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        self.loader = DataLoader(
            self.images,
            batch_sampler=self.sampler,
            num_workers=workers,
            collate_fn=collate,
            pin_memory=device.type == "cuda",
            persistent_workers=workers > 0,
        )
        self.mean, self.std = self._stats(len(train))
        self.crop = None if crop_size is None else CropFlip(crop_size, crop_pad(crop_size), device)

    @property
    def num_train(self) -> int:
        return self.train_y.numel()

    def _stats(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel mean and std of the training pixels as DeviceData computes them, over up to
        STATS_SAMPLES evenly spaced images (all of them, in order, when fewer: the same figures)."""
        picks = torch.linspace(0, n - 1, min(n, STATS_SAMPLES)).round().long().unique().tolist()
        x = torch.cat(list(self._decode([picks[i : i + 256] for i in range(0, len(picks), 256)])))
        x = x.to(self.device).float()
        mean = x.mean(dim=(0, 2, 3)) / 255
        std = x.std(dim=(0, 2, 3)).clamp_min(1e-3) / 255
        return mean.view(1, -1, 1, 1), std.view(1, -1, 1, 1)

    def _decode(self, batches: list[list[int]]) -> Iterator[torch.Tensor]:
        self.sampler.batches = batches
        for images in self.loader:
            if isinstance(images, str):
                raise DataError(images)
            yield images.to(self.device, non_blocking=True)

    def _norm(self, images: torch.Tensor) -> torch.Tensor:
        return ((images.float() / 255 - self.mean) / self.std).to(self.dtype).contiguous()

    def batches(self, batches: list[torch.Tensor], gen: torch.Generator) -> Iterator[torch.Tensor]:
        """Decode exactly these samples, batch by batch, and augment them on the device."""
        sizes = [b.numel() for b in batches]
        flat = torch.cat(batches).cpu() if batches else torch.empty(0, dtype=torch.long)
        fill = (0 - self.mean.flatten()) / self.std.flatten()
        for x in self._decode([part.tolist() for part in flat.split(sizes)]):
            x = self._norm(x)
            if self.crop is not None:  # the device path's gather on a padded batch: same draws
                ramp = torch.arange(x.shape[0], device=self.device)
                x = self.crop(pad_images(x, self.crop.pad, fill), ramp, gen)
            yield x

    def plain_batches(self, batches: list[torch.Tensor]) -> Iterator[torch.Tensor]:
        """Decode these samples without augmentation."""
        return (self._norm(x) for x in self._decode([b.tolist() for b in batches]))

    def test_batches(self, lo: int, hi: int, size: int) -> Iterator[torch.Tensor]:
        base = self.num_train  # the test images follow the training images in self.images
        chunks = [list(range(base + i, base + min(i + size, hi))) for i in range(lo, hi, size)]
        return (self._norm(x) for x in self._decode(chunks))


def _free_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return min(_available_ram(), _address_space_left())


def _available_ram() -> int:
    try:  # MemAvailable counts the page cache the kernel would give up; MemFree does not
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _address_space_left() -> int:
    """What `ulimit -v` (RLIMIT_AS) still allows this process; unbounded when unset."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return 1 << 62
    try:
        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        used = 0
    return max(limit - used, 0)


def device_bytes(n: int, channels: int, size: int, device: torch.device) -> int:
    """DeviceData's peak: the uint8 images, two float32 temporaries while normalising, and the
    padded copy it keeps (bf16 on CUDA, float32 on CPU)."""
    element = 2 if device.type == "cuda" else 4
    return n * channels * (size * size * 9 + (size + 2 * crop_pad(size)) ** 2 * element)


def batch_bytes(batch: int, channels: int, size: int) -> int:
    """A rough floor for one training step's memory on either path: the batch as float32 in
    its normalised, padded and cropped copies and the first layers' activations (16 floats a
    pixel and channel); a model's deeper layers come on top."""
    return batch * channels * (size + 2 * crop_pad(size)) ** 2 * 16 * 4


def choose_loader(loader: str, n: int, batch: int, channels: int, size: int, device: torch.device) -> str:
    """`auto`: the device path when the decoded data fits in MEMORY_SHARE of free memory, else
    streaming. Either is checked against free memory before anything is decoded: a loader that
    cannot fit is refused in one line that says which one would."""
    free, step = _free_memory(device), batch_bytes(batch, channels, size)
    data = device_bytes(n, channels, size, device)
    if loader == "auto":
        loader = "device" if data <= MEMORY_SHARE * free else "stream"
    need = data + step if loader == "device" else step
    if need > free:
        instead = (
            "--loader stream fits" if loader == "device" and step <= free else "lower --image-size or --batch-size"
        )
        what = (
            f"{n} images of {size} x {size} held on {device.type}"
            if loader == "device"
            else f"a batch of {batch} images of {size} x {size}"
        )
        raise DataError(f"{what} need about {_gb(need)}, {_gb(free)} is free: {instead}")
    return loader


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GB"


def load_data(
    d: DataConfig, seed: int, device: torch.device, batch: int = 128
) -> tuple[DeviceData | StreamData, int, int]:
    """The trainer's data for these settings, with the model's input channels and classes
    (`batch`: the largest batch a step takes, for the memory check)."""
    if d.dataset == "folder":
        listing = folder_listing(d)
        mode, shape = folder_mode(listing, d.image_size)
        channels, size = (3 if mode == "RGB" else 1), d.image_size or max(shape)
        train, test = _subsets(listing, d, seed)
        n = len(listing["train"]) + len(listing["test"])  # the device path decodes all, then picks
        batch = min(batch, max(len(train), len(test)))
        if choose_loader(d.loader, n, batch, channels, size, device) == "stream":
            crop = size if wants_augment(d.augment, channels) else None
            classes = len(listing["train_classes"])
            return StreamData(train, test, d.image_size, mode, device, crop, d.workers), channels, classes
    ds = load_dataset(
        d.dataset, d.data_dir, d.download, d.subset, seed=seed, test_subset=d.test_subset, image_size=d.image_size
    )
    augment = wants_augment(d.augment, ds.in_channels)
    return DeviceData.build(ds, device, augment), ds.in_channels, ds.num_classes


def data_identity(d: DataConfig, recorded: dict[str, str] | None = None) -> dict[str, str]:
    """The data's identity by content (`engine.inputs.dataid`), which a run records and a resume or a
    comparison must find again; {} for synthetic data. `recorded`: a run's identity to compare
    with; one recorded before identities were by content gets an image folder's listing, the
    kind it holds."""
    if d.dataset == "folder":
        root = Path(d.data_dir) if d.data_dir is not None else Path()
        listing = folder_listing(d)
        return identity(root, listing) if recorded and not is_content(recorded) else folder_identity(root, listing)
    files = source_files(d.dataset, Path(d.data_dir) if d.data_dir else None)
    return files_identity(files) if files else {}


def folder_listing(d: DataConfig) -> dict:
    if d.data_dir is None:
        raise DataError("--dataset folder needs --data-dir DIR holding train/<class>/ and test/<class>/")
    root = Path(d.data_dir)
    if not root.is_dir():
        raise DataError(f"image folder {root} does not exist")
    return list_folder(root)


def _subsets(listing: dict, d: DataConfig, seed: int) -> tuple[list, list]:
    """--subset and --test-subset pick the same samples as on the device path."""
    train, test = listing["train"], listing["test"]
    if d.subset is not None:
        keep = balanced_subset(torch.tensor([y for _, y in train]), d.subset, seed)
        train = [train[i] for i in keep.tolist()]
    if d.test_subset is not None:
        keep = balanced_subset(torch.tensor([y for _, y in test]), d.test_subset, 0, "--test-subset")
        test = [test[i] for i in keep.tolist()]
    return train, test

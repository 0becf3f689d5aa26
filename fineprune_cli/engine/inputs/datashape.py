"""A dataset's shape as the loader will see it, without loading it: the dry run's estimates and
the check of a user's model (`build.check_factory`) need no pixels."""

from __future__ import annotations

from ..setup.sections import DataConfig

# (training images, test images, channels, image size, classes) of the built-in datasets
KNOWN = {
    "fashion-mnist": (60000, 10000, 1, 28, 10),
    "cifar10": (50000, 10000, 3, 32, 10),
    "cifar100": (50000, 10000, 3, 32, 100),
    "synthetic": (50000, 10000, 3, 32, 10),
}


def shape_of(d: DataConfig) -> tuple[int, int, int, int, int]:
    """(training images, test images, channels, size, classes), without loading the data."""
    if d.dataset == "folder":  # as the loader sees it: the file list and the headers, no pixels
        from .imagefolder import folder_mode
        from .stream import folder_listing

        listing = folder_listing(d)
        mode, shape = folder_mode(listing, d.image_size)
        n, tests = len(listing["train"]), len(listing["test"])
        channels, classes = 3 if mode == "RGB" else 1, len(listing["train_classes"])
        size = d.image_size or max(shape)
    else:
        n, tests, channels, size, classes = KNOWN[d.dataset]
    return (min(n, d.subset) if d.subset else n), min(tests, d.test_subset or tests), channels, size, classes

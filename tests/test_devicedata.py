"""The device-resident data: padding, the batched crop + flip, normalisation."""

import torch

from conftest import toy_dataset
from fineprune_cli.engine.inputs.devicedata import CropFlip, DeviceData, pad_images


def test_pad_images_fills_each_channel():
    x = torch.zeros(2, 3, 4, 4)
    out = pad_images(x, 2, torch.tensor([1.0, 2.0, 3.0]))
    assert out.shape == (2, 3, 8, 8)
    assert out[0, 1, 0, 0] == 2.0 and out[1, 2, 7, 7] == 3.0 and out[0, 0, 3, 3] == 0.0


def test_crop_flip_returns_a_shifted_possibly_mirrored_window():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(16, 3, 8, 8, generator=g)
    padded = pad_images(x, 2, torch.zeros(3))
    out = CropFlip(8, 2, torch.device("cpu"))(padded, torch.arange(16), g)
    flips = 0
    for i in range(16):
        windows = [padded[i, :, dy : dy + 8, dx : dx + 8] for dy in range(5) for dx in range(5)]
        plain = any(torch.equal(out[i], w) for w in windows)
        mirrored = any(torch.equal(out[i], w.flip(-1)) for w in windows)
        assert plain or mirrored
        flips += mirrored and not plain
    assert 0 < flips < 16


def test_device_data_normalises_and_pads_for_augmentation():
    ds = toy_dataset()
    plain = DeviceData.build(ds, torch.device("cpu"), augment=False)
    aug = DeviceData.build(ds, torch.device("cpu"), augment=True)
    assert plain.train_x.shape == (96, 3, 32, 32) and aug.train_x.shape == (96, 3, 40, 40)
    assert plain.train_x.mean(dim=(0, 2, 3)).abs().max() < 1e-4
    assert torch.allclose(plain.train_x.std(dim=(0, 2, 3)), torch.ones(3), atol=1e-3)


def test_the_plain_batches_are_the_stored_images_at_every_size():
    """KAKURENBO's refresh reads the images unaugmented: at 48x48 they are padded by 6 px, and a
    fixed 4 px cut gave off-centre windows, padding on two sides and a strip of each image lost."""
    for size in (32, 48, 28):
        ds = toy_dataset(n=8, size=size)
        plain = DeviceData.build(ds, torch.device("cpu"), augment=False)
        aug = DeviceData.build(ds, torch.device("cpu"), augment=True)
        idx = [torch.arange(4), torch.arange(4, 8)]
        for got, want in zip(aug.plain_batches(idx), plain.plain_batches(idx)):
            assert torch.equal(got, want), size

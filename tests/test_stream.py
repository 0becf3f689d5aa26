"""The streaming data path (engine/inputs/stream.py): decoding in DataLoader workers, only the kept samples."""

import json
import sys
from pathlib import Path

import pytest
import torch
from torchvision.io import write_jpeg, write_png

from conftest import SignalAt, invoke, metrics_rows
from fineprune_cli import PruneConfig, create_policy
from fineprune_cli.engine.inputs import stream
from fineprune_cli.engine.records.fingerprint import fingerprint
from fineprune_cli.engine.setup.config import DataConfig, TrainConfig
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.errors import DataError
from fineprune_cli.models import create


def mixed_folder(root, per_class=(24, 8), sizes=((12, 12), (20, 16), (9, 30)), classes=3):
    """Images of three sizes (PNG and JPEG) whose class shows in their mean colour: learnable."""
    g = torch.Generator().manual_seed(0)
    for split, n in zip(("train", "test"), per_class):
        for c in range(classes):
            (root / split / f"c{c}").mkdir(parents=True)
            for i in range(n):
                h, w = sizes[i % len(sizes)]
                img = torch.randint(0, 80, (3, h, w), generator=g, dtype=torch.uint8)
                img[c] += 150
                path = str(root / split / f"c{c}" / f"{i}")
                write_png(img, path + ".png") if i % 2 else write_jpeg(img, path + ".jpg")
    return root


def same_size_folder(root, n=20, size=8):
    return mixed_folder(root, per_class=(n, 6), sizes=((size, size),), classes=2)


def _data(root, device=torch.device("cpu"), batch=128, **kw):
    cfg = DataConfig(dataset="folder", data_dir=str(root), **{"loader": "stream", "workers": 0, **kw})
    return stream.load_data(cfg, 0, device, batch)


def _trainer(data, channels, classes, batch=16):
    cfg = TrainConfig(epochs=2, batch_size=batch, lr=0.05, milestones=[], warmup_epochs=0)
    torch.manual_seed(0)
    return Trainer(create("lenet", channels, classes), data, cfg, torch.device("cpu"), seed=3)


def test_mixed_sizes_train_through_the_cli_with_image_size(tmp_path):
    mixed_folder(tmp_path / "imgs")
    out = tmp_path / "run"
    r = invoke(
        [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            tmp_path / "imgs",
            "--image-size",
            16,
            "--loader",
            "stream",
            "--workers",
            1,
            "--epochs",
            2,
            "--batch-size",
            16,
            "--milestones",
            "",
            "--out",
            out,
            "--prune",
            "--window",
            3,
            "--start",
            2,
            "--block",
            1,
            "--prune-fraction",
            0.5,
        ]
    )
    assert r.exit_code == 0, r.output
    rows = metrics_rows(out)
    assert [int(row["samples"]) for row in rows] == [72, 36]  # epoch 2 prunes half
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["final_accuracy"] > 50


def test_a_pruned_epoch_decodes_only_its_kept_samples(tmp_path, monkeypatch):
    data, c, k = _data(mixed_folder(tmp_path), image_size=16)
    trainer = _trainer(data, c, k)
    decoded = []
    real = stream.FolderImages.__getitem__
    monkeypatch.setattr(stream.FolderImages, "__getitem__", lambda self, i: decoded.append(i) or real(self, i))
    policy = create_policy(
        "random", data.num_train, PruneConfig(window=1, start=0, block=1, count=1, prune_fraction=0.3), seed=1
    )
    plan, seen = policy.plan(1), []
    trainer.train_epoch(1, plan, lambda idx, losses: seen.append(idx))
    kept = sorted(plan.indices.tolist())
    assert plan.samples == 50 < data.num_train == 72
    assert sorted(decoded) == kept  # each kept sample once, no other
    assert sorted(torch.cat(seen).tolist()) == kept  # observe gets the plan's indices


def test_streaming_equals_the_device_path_draw_for_draw(tmp_path):
    """Same images, same order, same crops: identical losses, observed indices and accuracy."""
    same_size_folder(tmp_path)
    results = []
    for loader in ("device", "stream"):
        data, c, k = _data(tmp_path, loader=loader, augment="crop-flip")
        trainer, seen = _trainer(data, c, k), []
        losses = [
            trainer.train_epoch(e, None, lambda idx, loss: seen.append((idx, loss))).item()  # noqa: B023 (used only within this iteration)
            for e in (1, 2)
        ]
        results.append((losses, seen, trainer.evaluate()))
    (dev_loss, dev_seen, dev_eval), (st_loss, st_seen, st_eval) = results
    assert type(_data(tmp_path, loader="device")[0]).__name__ == "DeviceData"
    assert dev_loss == st_loss and dev_eval == st_eval
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(dev_seen, st_seen))


def test_a_broken_image_is_named_when_streamed(tmp_path):
    mixed_folder(tmp_path)
    (tmp_path / "train" / "c1" / "zz-broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(DataError, match="cannot decode image .*zz-broken.jpg"):
        _data(tmp_path, image_size=16)  # the normalisation sample holds every file of this folder


def test_a_broken_image_through_the_cli_is_one_line(tmp_path):
    mixed_folder(tmp_path / "imgs")
    (tmp_path / "imgs" / "test" / "c0" / "zz-broken.png").write_bytes(b"\x89PNG broken")
    r = invoke(
        [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            tmp_path / "imgs",
            "--image-size",
            16,
            "--loader",
            "stream",
            "--workers",
            1,
            "--epochs",
            1,
            "--out",
            tmp_path / "run",
        ]
    )
    assert r.exit_code == 2 and "zz-broken.png" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("loader", ["device", "stream"])
def test_mixed_sizes_without_image_size_are_one_clear_error(tmp_path, loader):
    mixed_folder(tmp_path / "imgs")
    r = invoke(
        [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            tmp_path / "imgs",
            "--loader",
            loader,
            "--workers",
            0,
            "--epochs",
            1,
            "--out",
            tmp_path / "run",
        ]
    )
    assert r.exit_code == 2 and "pass --image-size N" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_auto_holds_small_data_on_the_device_and_streams_what_does_not_fit(tmp_path, monkeypatch):
    same_size_folder(tmp_path)
    assert type(_data(tmp_path, loader="auto")[0]).__name__ == "DeviceData"
    monkeypatch.setattr(stream, "_free_memory", lambda device: 100_000)  # 52 images of 8x8 RGB need more
    assert isinstance(_data(tmp_path, loader="auto", batch=1)[0], stream.StreamData)


def test_image_size_resizes_on_the_device_path_too(tmp_path):
    data, c, k = _data(mixed_folder(tmp_path), loader="device", image_size=16)
    assert data.train_x.shape == (72, 3, 16 + 4, 16 + 4) and data.crop is not None  # resized, padded 16/8 = 2 px


def test_loader_options_are_refused_off_folders_and_keep_old_fingerprints():
    r = invoke(["train", "--model", "lenet", "--dataset", "synthetic", "--loader", "stream"])
    assert r.exit_code == 2 and "--dataset folder only" in r.output
    old = {"data": {"dataset": "folder"}, "run": {"seed": 0}}
    new = {"data": {"dataset": "folder", "image_size": None, "loader": "auto", "workers": 3}, "run": {"seed": 0}}
    assert fingerprint(old) == fingerprint(new)
    assert fingerprint(old) != fingerprint({**new, "data": {**new["data"], "loader": "stream"}})


def test_a_broken_image_found_mid_epoch_is_one_line(tmp_path, monkeypatch):
    """In a large folder the normalisation sample misses most files: the error comes from a worker."""
    mixed_folder(tmp_path / "imgs")
    broken = tmp_path / "imgs" / "train" / "c1" / "zz-broken.jpg"  # file 48 of 73
    write_jpeg(torch.zeros(3, 16, 16, dtype=torch.uint8), str(broken))
    broken.write_bytes(broken.read_bytes()[:-40])  # its header is whole (the folder's scan passes), its data cut
    monkeypatch.setattr(stream, "STATS_SAMPLES", 2)  # samples files 0 and 72: both good
    r = invoke(
        [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            tmp_path / "imgs",
            "--image-size",
            16,
            "--loader",
            "stream",
            "--workers",
            1,
            "--epochs",
            1,
            "--out",
            tmp_path / "run",
        ]
    )
    assert r.exit_code == 2 and "cannot decode image" in r.output and "zz-broken.jpg" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert (tmp_path / "run" / "summary.json").is_file()  # it did fail inside the run


@pytest.mark.slow
def test_a_streamed_run_interrupted_and_resumed_equals_the_whole_run(tmp_path):
    from fineprune_cli.engine.setup.config import build_config
    from fineprune_cli.engine.training.checkpoint import Interrupted
    from fineprune_cli.runner import resume, train

    mixed_folder(tmp_path / "imgs")

    def cfg(out):
        return build_config(
            None,
            {
                "model.name": "lenet",
                "data.dataset": "folder",
                "data.data_dir": str(tmp_path / "imgs"),
                "data.image_size": 16,
                "data.loader": "stream",
                "data.workers": 1,
                "train.epochs": 4,
                "train.batch_size": 16,
                "train.milestones": [],
                "run.device": "cpu",
                "run.out": str(out),
                "prune.enabled": True,
                "prune.window": 4,
                "prune.start": 1,
                "prune.block": 1,
            },
        )

    train(cfg(tmp_path / "whole"), show_progress=False)
    with pytest.raises(Interrupted, match="stopped after epoch 2 of 4"):
        train(cfg(tmp_path / "cut"), show_progress=False, bar=SignalAt(2))
    resume(tmp_path / "cut", show_progress=False)
    whole, cut = (metrics_rows(tmp_path / name, drop_timing=True) for name in ("whole", "cut"))
    assert cut == whole and [int(r["pruned"]) for r in whole] == [1, 1, 1, 1]  # counts carried over


# -- the folder's mode, one rule on both paths (issue 25) -------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "reliability"))
from crafted import FOLDERS, bigger_test_images_folder, make_fifo, palette_folder, png_header_bomb  # noqa: E402


def _stream_images(data):
    """Every image the stream path decodes, in the folder's order (train, then test)."""
    return [data.images[i][1] for i in range(len(data.images))]


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_device_and_stream_give_identical_tensors_image_by_image(tmp_path, name):
    from fineprune_cli.engine.inputs.imagefolder import load_image_folder

    FOLDERS[name](tmp_path)
    train_x, _, test_x, _, _ = load_image_folder(tmp_path)
    streamed = _stream_images(_data(tmp_path)[0])
    device = list(train_x) + list(test_x)
    assert len(streamed) == len(device)
    for i, (a, b) in enumerate(zip(device, streamed)):
        assert a.shape == b.shape and torch.equal(a, b), f"{name}: image {i}"
    assert train_x.shape[1] == (1 if name == "grey" else 3)  # RGB as soon as one image is colour


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_a_one_epoch_run_gives_identical_metrics_on_both_paths(tmp_path, name):
    FOLDERS[name](tmp_path / "imgs")
    for loader in ("device", "stream"):
        r = invoke(
            [
                "train",
                "--model",
                "lenet",
                "--dataset",
                "folder",
                "--data-dir",
                tmp_path / "imgs",
                "--loader",
                loader,
                "--workers",
                0,
                "--epochs",
                1,
                "--batch-size",
                4,
                "--lr",
                0.01,
                "--out",
                tmp_path / loader,
            ]
        )  # lr: RGB folders are augmented now; at 0.1 one diverged
        assert r.exit_code == 0, r.output
    assert metrics_rows(tmp_path / "device", drop_timing=True) == metrics_rows(tmp_path / "stream", drop_timing=True)


def test_palette_pngs_train_on_their_colours_not_their_indices(tmp_path):
    data, channels, _ = _data(palette_folder(tmp_path), loader="device")
    assert channels == 3
    red, green = data.test_x[data.test_y == 0][0], data.test_x[data.test_y == 1][0]
    assert red[0, 0, 0] > red[1, 0, 0] and green[1, 0, 0] > green[0, 0, 0]  # normalised, still apart


def test_a_grey_first_training_file_does_not_stream_a_colour_folder_in_grey(tmp_path):
    FOLDERS["grey-first"](tmp_path)
    data, channels, _ = _data(tmp_path)
    assert channels == 3 and all(im.shape[0] == 3 for im in _stream_images(data))


@pytest.mark.parametrize("loader", ["device", "stream"])
def test_test_images_of_another_size_are_refused_on_both_paths(tmp_path, loader):
    bigger_test_images_folder(tmp_path)
    with pytest.raises(DataError, match=r"test/a/0.png is \(12, 12\), .*train/a/0.png is \(8, 8\).*--image-size"):
        _data(tmp_path, loader=loader)


@pytest.mark.parametrize("loader", ["device", "stream", "auto"])
def test_a_header_bomb_is_refused_before_any_decoding(tmp_path, loader, monkeypatch):
    from fineprune_cli.engine.inputs import imagefolder

    same_size_folder(tmp_path)
    (tmp_path / "test" / "c1" / "bomb.png").write_bytes(png_header_bomb())
    monkeypatch.setattr(imagefolder, "_decode", lambda *a: pytest.fail("decoded"))
    with pytest.raises(DataError, match="bomb.png declares 60000 x 60000 pixels"):
        _data(tmp_path, loader=loader)


def test_a_fifo_in_an_image_folder_is_refused_not_read(tmp_path):
    same_size_folder(tmp_path)
    make_fifo(tmp_path / "train" / "c0" / "pipe.png")
    with pytest.raises(DataError, match="pipe.png is not a regular file"):
        _data(tmp_path)


@pytest.mark.parametrize("loader", ["device", "stream"])
def test_a_loader_that_does_not_fit_in_memory_is_refused_saying_which_fits(tmp_path, loader, monkeypatch):
    same_size_folder(tmp_path)
    monkeypatch.setattr(stream, "_free_memory", lambda device: 100_000)
    monkeypatch.setattr(stream, "load_dataset", lambda *a, **k: pytest.fail("decoded"))
    with pytest.raises(
        DataError,
        match="52 images of 8 x 8 held on cpu need about .* free: --loader stream fits"
        if loader == "device"
        else "a batch of 40 images of 8 x 8 .* lower --image-size or --batch-size",
    ):
        _data(tmp_path, loader=loader, batch=1 if loader == "device" else 128)

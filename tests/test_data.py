"""Each loader against small files the test writes in the real format."""

import gzip
import os
import pickle
import struct

import numpy as np
import pytest
import torch
from torchvision.io import write_png

from fineprune_cli.engine.inputs import data, imagefolder
from fineprune_cli.engine.inputs.data import DataError, balanced_subset, load_dataset, make_synthetic, read_idx


def _idx_bytes(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 8, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_fashion(d, n_train=6, n_test=4, gz=True):
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for name, arr in arrays.items():
        if gz:
            with gzip.open(d / f"{name}.gz", "wb") as f:
                f.write(_idx_bytes(arr))
        else:
            (d / name).write_bytes(_idx_bytes(arr))
    return arrays


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_idx_round_trip(tmp_path, gz):
    arrays = _write_fashion(tmp_path, gz=gz)
    ds = load_dataset("fashion-mnist", tmp_path)
    assert ds.train_x.shape == (6, 1, 28, 28) and ds.test_x.shape == (4, 1, 28, 28)
    assert np.array_equal(ds.train_x[:, 0].numpy(), arrays["train-images-idx3-ubyte"])
    assert ds.train_y.tolist() == list(range(6)) and ds.train_y.dtype == torch.int64


def test_idx_files_are_decoded_once_a_process_until_they_change(tmp_path, monkeypatch):
    """compare trains its runs in one process: the second load reads no file, a rewritten
    file is read again, and what callers get is theirs to change."""
    import gzip as gz

    arrays = _write_fashion(tmp_path)
    first = load_dataset("fashion-mnist", tmp_path)
    first.train_x.zero_()
    monkeypatch.setattr(gz, "open", lambda *a: pytest.fail("decoded again"))
    again = load_dataset("fashion-mnist", tmp_path)
    assert np.array_equal(again.train_x[:, 0].numpy(), arrays["train-images-idx3-ubyte"])
    monkeypatch.undo()
    changed = _write_fashion(tmp_path, n_train=8)
    assert np.array_equal(
        load_dataset("fashion-mnist", tmp_path).train_x[:, 0].numpy(), changed["train-images-idx3-ubyte"]
    )


def test_truncated_idx_names_the_file(tmp_path):
    _write_fashion(tmp_path, gz=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataError, match="train-images-idx3-ubyte is truncated"):
        load_dataset("fashion-mnist", tmp_path)
    path.write_bytes(b"\x01\x02")
    with pytest.raises(DataError, match="bad magic"):
        read_idx(path)


def test_missing_fashion_mnist_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion-mnist", tmp_path)


def _cifar_batch(path, n, label_key, seed):
    rng = np.random.default_rng(seed)
    d = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), label_key: list(rng.integers(0, 10, n))}
    with open(path, "wb") as f:
        pickle.dump(d, f)
    return d


def test_cifar10_pickles_round_trip_chw(tmp_path):
    sub = tmp_path / "cifar-10-batches-py"
    sub.mkdir()
    batches = [_cifar_batch(sub / f"data_batch_{i}", 3, b"labels", i) for i in range(1, 6)]
    test = _cifar_batch(sub / "test_batch", 2, b"labels", 9)
    with open(sub / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)]}, f)
    ds = load_dataset("cifar10", tmp_path)
    assert ds.train_x.shape == (15, 3, 32, 32) and ds.test_x.shape == (2, 3, 32, 32)
    first = batches[0][b"data"][1].reshape(3, 32, 32)  # R plane, then G, then B
    assert np.array_equal(ds.train_x[1].numpy(), first)
    assert ds.test_y.tolist() == [int(v) for v in test[b"labels"]] and ds.classes[3] == "c3"


def test_cifar100_uses_fine_labels(tmp_path):
    sub = tmp_path / "cifar-100-python"
    sub.mkdir()
    train = _cifar_batch(sub / "train", 4, b"fine_labels", 1)
    _cifar_batch(sub / "test", 2, b"fine_labels", 2)
    ds = load_dataset("cifar100", tmp_path)
    assert ds.num_classes == 100 and ds.train_y.tolist() == [int(v) for v in train[b"fine_labels"]]


def test_corrupt_pickle_and_missing_cifar(tmp_path):
    with pytest.raises(DataError, match="cifar-10-batches-py not found"):
        load_dataset("cifar10", tmp_path)
    sub = tmp_path / "cifar-10-batches-py"
    sub.mkdir()
    for i in range(1, 6):
        _cifar_batch(sub / f"data_batch_{i}", 2, b"labels", i)
    (sub / "test_batch").write_bytes(pickle.dumps({b"data": 1})[:5])
    with pytest.raises(DataError, match="test_batch: corrupt or truncated"):
        load_dataset("cifar10", tmp_path)


def _image_folder(root, size=8):
    g = torch.Generator().manual_seed(0)
    for split, n in (("train", 3), ("test", 2)):
        for cls in ("zebra", "apple"):
            (root / split / cls).mkdir(parents=True)
            for i in range(n):
                write_png(
                    torch.randint(0, 256, (3, size, size), generator=g, dtype=torch.uint8),
                    str(root / split / cls / f"{i}.png"),
                )


def test_image_folder_labels_and_cache(tmp_path, monkeypatch):
    _image_folder(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    ds = load_dataset("folder", tmp_path)
    assert ds.classes == ["apple", "zebra"] and ds.train_y.tolist() == [0, 0, 0, 1, 1, 1]
    assert ds.train_x.shape == (6, 3, 8, 8) and imagefolder.cache_path(tmp_path).is_file()
    assert sorted(tmp_path.rglob("*")) == before  # the dataset folder is only read
    monkeypatch.setattr(imagefolder, "_decode_all", lambda items, size=None: pytest.fail("decoded again"))
    again = load_dataset("folder", tmp_path)
    assert torch.equal(again.train_x, ds.train_x) and torch.equal(again.test_y, ds.test_y)


def test_processes_that_miss_the_folder_cache_together_decode_it_once(tmp_path, monkeypatch):
    """As the synthetic set's: the ranks of a run on a fresh cache each decoded every image. Two
    threads stand in for two processes (each opens the lock file on its own)."""
    import threading
    import time

    _image_folder(tmp_path / "data")
    monkeypatch.setenv("FINEPRUNE_CACHE", str(tmp_path / "cache"))
    decode, calls = imagefolder._decode_all, []

    def slow(items, mode, size=None):
        calls.append(len(items))
        time.sleep(0.5)  # the other call arrives meanwhile
        return decode(items, mode, size)

    monkeypatch.setattr(imagefolder, "_decode_all", slow)
    got = []
    threads = [threading.Thread(target=lambda: got.append(imagefolder.load_image_folder(tmp_path / "data")))
               for _ in range(2)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [6, 4] and len(got) == 2  # train and test, decoded once
    assert all(torch.equal(a, b) for a, b in zip(got[0][:4], got[1][:4]))


def test_cache_follows_files_that_move_between_classes(tmp_path):
    """Count, bytes and newest mtime survive a move between class folders; labels must not."""
    _image_folder(tmp_path)
    first = load_dataset("folder", tmp_path)
    src, dst = tmp_path / "train" / "apple" / "0.png", tmp_path / "train" / "zebra" / "9.png"
    stat = src.stat()
    src.rename(dst)
    os.utime(dst, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same mtime as before
    moved = load_dataset("folder", tmp_path)
    assert first.train_y.tolist() == [0, 0, 0, 1, 1, 1] and moved.train_y.tolist() == [0, 0, 1, 1, 1, 1]


def test_a_cache_of_the_wrong_shape_is_rebuilt(tmp_path):
    _image_folder(tmp_path)
    good = load_dataset("folder", tmp_path)
    cache = imagefolder.cache_path(tmp_path)
    saved = torch.load(cache, weights_only=True)
    saved["train_x"] = saved["train_x"][:, 0]  # 3-D: not images
    torch.save(saved, cache)
    assert torch.equal(load_dataset("folder", tmp_path).train_x, good.train_x)


def test_unreadable_image_names_the_file(tmp_path):
    _image_folder(tmp_path)
    bad = tmp_path / "train" / "apple" / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(DataError, match="broken.jpg"):
        load_dataset("folder", tmp_path)


def test_folder_layout_errors(tmp_path):
    with pytest.raises(DataError, match="needs --data-dir"):
        load_dataset("folder")
    with pytest.raises(DataError, match="train/<class>"):
        load_dataset("folder", tmp_path)


def test_synthetic_is_deterministic_and_learnable():
    a, b = make_synthetic(num_train=2000, num_test=500), make_synthetic(num_train=2000, num_test=500)
    assert torch.equal(a.train_x, b.train_x) and a.train_x.shape == (2000, 3, 32, 32)
    x = a.train_x.float().flatten(1)
    means = torch.stack([x[a.train_y == c].mean(0) for c in range(10)])
    pred = torch.cdist(a.test_x.float().flatten(1), means).argmin(1)
    acc = (pred == a.test_y).float().mean().item()
    assert 0.3 < acc < 0.995  # learnable, well above chance (0.1)


def test_balanced_subset():
    labels = torch.arange(1000) % 10
    idx = balanced_subset(labels, 105, seed=1)
    counts = torch.bincount(labels[idx], minlength=10).tolist()
    assert counts == [11] * 5 + [10] * 5
    assert torch.equal(idx, balanced_subset(labels, 105, seed=1))
    assert not torch.equal(idx, balanced_subset(labels, 105, seed=2))
    with pytest.raises(DataError):
        balanced_subset(labels, 1001, seed=0)


def test_unknown_dataset():
    with pytest.raises(DataError, match="choose one of: fashion-mnist"):
        load_dataset("mnist")


@pytest.mark.skipif(
    not data.FASHION_MNIST_SYSTEM_DIR.is_dir(), reason="Debian's dataset-fashion-mnist is not installed"
)
def test_system_fashion_mnist():
    ds = load_dataset("fashion-mnist")
    assert (ds.num_train, ds.test_y.numel(), ds.in_channels, ds.image_size) == (60000, 10000, 1, 28)


def test_test_subset_is_balanced_and_fixed():
    a = load_dataset("synthetic", subset=100, seed=1, test_subset=200)
    b = load_dataset("synthetic", subset=100, seed=2, test_subset=200)
    assert a.test_y.numel() == 200 and torch.bincount(a.test_y, minlength=10).tolist() == [20] * 10
    assert torch.equal(a.test_x, b.test_x)  # the same test samples for every seed
    assert not torch.equal(a.train_x, b.train_x)
    with pytest.raises(DataError, match="--test-subset must be between"):
        load_dataset("synthetic", test_subset=10**6)


def test_sixteen_bit_pngs_are_scaled_not_wrapped(tmp_path):
    from PIL import Image

    _image_folder(tmp_path, size=2)
    deep = np.array([[65535, 32768], [256, 0]], dtype=np.uint16)  # wrapped: 255, 0, 0, 0
    for split in ("train", "test"):
        for cls in ("apple", "zebra"):
            for f in (tmp_path / split / cls).iterdir():
                Image.fromarray(deep).save(f)
    ds = load_dataset("folder", tmp_path)
    assert ds.train_x[0, 0].flatten().tolist() == [255, 128, 1, 0]


def test_a_class_folder_without_images_is_refused(tmp_path):
    _image_folder(tmp_path)
    for f in (tmp_path / "train" / "zebra").iterdir():
        f.unlink()
    with pytest.raises(DataError, match="zebra holds no .jpg/.png images"):
        load_dataset("folder", tmp_path)


def test_a_subset_smaller_than_the_classes_is_refused():
    with pytest.raises(DataError, match="at least the number of classes \\(10\\), got 3"):
        load_dataset("synthetic", subset=3)


def test_a_single_class_folder_is_refused(tmp_path):
    _image_folder(tmp_path)
    for split in ("train", "test"):
        for f in (tmp_path / split / "zebra").iterdir():
            f.unlink()
        (tmp_path / split / "zebra").rmdir()
    with pytest.raises(DataError, match="needs at least two class folders, found 1"):
        load_dataset("folder", tmp_path)


def test_synthetic_data_is_kept_on_disk_and_read_back_identical(tmp_path, monkeypatch):
    """Every subprocess and rank generated 60,000 images again (seconds each); the second
    process now reads the first one's file, which must give the very same tensors."""
    from fineprune_cli.engine.inputs import synthetic

    monkeypatch.setenv("FINEPRUNE_CACHE", str(tmp_path))
    fresh = synthetic.synthetic_tensors.__wrapped__(300, 100, 10, 8, 3, 5)
    assert len(list(tmp_path.glob("synthetic-v*-300-100-10-8-3-5.pt"))) == 1
    monkeypatch.setattr(synthetic, "_generate", lambda *a: pytest.fail("generated again"))
    again = synthetic.synthetic_tensors.__wrapped__(300, 100, 10, 8, 3, 5)
    assert all(torch.equal(a, b) for a, b in zip(fresh, again))
    (next(tmp_path.glob("synthetic-*.pt"))).write_bytes(b"half a file")
    monkeypatch.undo()
    monkeypatch.setenv("FINEPRUNE_CACHE", str(tmp_path))
    repaired = synthetic.synthetic_tensors.__wrapped__(300, 100, 10, 8, 3, 5)
    assert all(torch.equal(a, b) for a, b in zip(fresh, repaired))


def test_processes_that_miss_the_synthetic_cache_together_generate_it_once(tmp_path, monkeypatch):
    """The ranks of a run on a fresh cache start at once: each generated the images (seconds of
    CPU apiece, on shared cores); one generates now and the others read its file. Two threads
    stand in for two processes: each call opens the lock file on its own."""
    import threading
    import time

    from fineprune_cli.engine.inputs import synthetic

    monkeypatch.setenv("FINEPRUNE_CACHE", str(tmp_path))
    generate, calls = synthetic._generate, []

    def slow(*args):
        calls.append(args)
        time.sleep(0.5)  # the other call arrives meanwhile
        return generate(*args)

    monkeypatch.setattr(synthetic, "_generate", slow)
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(synthetic.synthetic_tensors.__wrapped__(300, 100, 10, 8, 3, 5)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 2
    assert all(torch.equal(a, b) for a, b in zip(*got))


def test_missing_cifar10_names_the_offline_route(tmp_path):
    with pytest.raises(DataError) as err:
        load_dataset("cifar10", tmp_path)
    message = str(err.value)
    assert "\n" not in message and "--download" in message
    assert "make cifar10-jpeg, then --dataset folder --data-dir .data/cifar10-jpeg" in message


def test_a_failed_cifar_download_is_one_line_with_the_offline_route(tmp_path, monkeypatch):
    """No internet: torchvision raises URLError (an OSError) from deep inside urllib."""
    import urllib.error

    import torchvision

    def offline(*args, **kwargs):
        raise urllib.error.URLError(OSError(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", offline)
    with pytest.raises(DataError) as err:
        load_dataset("cifar10", tmp_path, download=True)
    message = str(err.value)
    assert message.startswith(f"cannot download CIFAR-10 into {tmp_path} (no internet?): ")
    assert "Temporary failure in name resolution" in message and "\n" not in message
    assert message.endswith("make cifar10-jpeg, then --dataset folder --data-dir .data/cifar10-jpeg")

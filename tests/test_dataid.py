"""A dataset's identity by content (engine/inputs/dataid.py): a copy at another path with new mtimes is
the same data, one changed byte or one moved or renamed file is other data; the digests are
cached and read again only for files that changed; runs recorded before identities were by content
are checked as they were; and a report puts runs made on two copies of one folder in one context."""

import os
import shutil
import time

import pytest
import torch
from torchvision.io import read_image, write_png

from conftest import invoke
from fineprune_cli.analysis.group.groups import group
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.engine.inputs import dataid
from fineprune_cli.engine.inputs.imagefolder import identity as listing_identity
from fineprune_cli.engine.inputs.imagefolder import list_folder
from fineprune_cli.engine.inputs.stream import data_identity
from fineprune_cli.engine.setup.config import DataConfig


def folder(root, n=8, size=8):
    """Two classes whose mean colour differs (learnable in a couple of epochs)."""
    g = torch.Generator().manual_seed(0)
    for split, count in (("train", n), ("test", 4)):
        for c in range(2):
            (root / split / f"c{c}").mkdir(parents=True)
            for i in range(count):
                img = torch.randint(0, 80, (3, size, size), generator=g, dtype=torch.uint8)
                img[c] += 150
                write_png(img, str(root / split / f"c{c}" / f"{i}.png"))
    return root


def copy(src, dst):
    """A copy with new mtimes, as cp without -p, a fresh unpacking or a git checkout gives."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    later = time.time_ns() + 10**9
    for f in dst.rglob("*.png"):
        os.utime(f, ns=(later, later))
    return dst


def ident(root):
    return dataid.folder_identity(root, list_folder(root))


def test_a_copy_with_new_mtimes_is_the_same_data_and_one_changed_byte_is_not(tmp_path):
    a = folder(tmp_path / "a")
    b = copy(a, tmp_path / "b")
    assert ident(a) == ident(b) and dataid.is_content(ident(a))
    assert listing_identity(a, list_folder(a)) != listing_identity(b, list_folder(b))  # the old kind split them
    changed = copy(a, tmp_path / "c")
    png = changed / "train" / "c0" / "3.png"
    raw = bytearray(png.read_bytes())
    raw[-20] ^= 1  # one byte (a CRC no reader checks here: the identity still sees it)
    png.write_bytes(bytes(raw))
    assert ident(changed)["train"] != ident(a)["train"] and ident(changed)["test"] == ident(a)["test"]


def test_a_file_moved_to_another_class_or_renamed_is_other_data(tmp_path):
    a = folder(tmp_path / "a")
    moved = copy(a, tmp_path / "moved")
    (moved / "train" / "c0" / "0.png").rename(moved / "train" / "c1" / "99.png")
    renamed = copy(a, tmp_path / "renamed")
    (renamed / "train" / "c0" / "0.png").rename(renamed / "train" / "c0" / "x0.png")
    base = ident(a)["train"]
    assert ident(moved)["train"] != base and ident(renamed)["train"] != base
    assert ident(moved)["train"].startswith("16 files, content ")


def test_digests_are_read_again_only_for_files_that_changed(tmp_path, monkeypatch):
    a = folder(tmp_path / "a")
    read = []
    real = dataid._digest
    monkeypatch.setattr(dataid, "_digest", lambda p: read.append(p) or real(p))
    first = ident(a)
    assert len(read) == 24  # 16 training and 8 test images, each read once
    read.clear()
    assert ident(a) == first and read == []  # the cache, keyed on path, size and mtime
    png = a / "test" / "c1" / "2.png"
    png.write_bytes(png.read_bytes() + b"\0")
    assert ident(a)["test"] != first["test"] and read == [png]


def test_a_run_recorded_with_a_listing_is_checked_against_a_listing(tmp_path):
    """Runs made before identities were by content recorded the listing (with mtimes): a resume or
    a comparison compares them with the listing, as before, not with the content hash."""
    a = folder(tmp_path / "a")
    d = DataConfig(dataset="folder", data_dir=str(a))
    old = listing_identity(a, list_folder(a))
    assert not dataid.is_content(old)
    assert data_identity(d, recorded=old) == old
    assert data_identity(d) == ident(a) and data_identity(d, recorded=ident(a)) == ident(a)


def test_a_built_in_datasets_identity_is_its_source_files_content(tmp_path):
    """Fashion-MNIST's four IDX files: the same bytes in another folder are the same data."""
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (tmp_path / "a").mkdir(exist_ok=True)
        (tmp_path / "a" / name).write_bytes(name.encode() * 3)
    copy(tmp_path / "a", tmp_path / "b")
    ids = [data_identity(DataConfig(dataset="fashion-mnist", data_dir=str(tmp_path / x))) for x in ("a", "b")]
    assert ids[0] == ids[1] and ids[0]["files"].startswith("4 files, content ")
    (tmp_path / "b" / "t10k-labels-idx1-ubyte").write_bytes(b"other")
    assert data_identity(DataConfig(dataset="fashion-mnist", data_dir=str(tmp_path / "b"))) != ids[0]
    assert data_identity(DataConfig(dataset="synthetic")) == {}  # made from its settings


@pytest.mark.slow  # six tiny training runs
def test_runs_on_a_copy_add_up_in_one_context_and_a_changed_pixel_does_not(tmp_path):
    a = folder(tmp_path / "a")
    b = copy(a, tmp_path / "b")
    c = copy(a, tmp_path / "c")
    png = c / "train" / "c0" / "1.png"
    img = read_image(str(png))
    img[0, 0, 0] ^= 1  # one channel of one pixel of one image, re-encoded
    write_png(img, str(png))
    for root, seed in ((a, 0), (b, 1), (c, 2)):
        for policy in ("regular", "fine"):
            args = ["train", "--model", "lenet", "--dataset", "folder", "--data-dir", root, "--epochs", "2"]
            args += ["--batch-size", "8", "--device", "cpu", "--seed", seed, "--window", "1", "--start", "0"]
            args += ["--out", tmp_path / "runs" / f"{policy}-{root.name}-seed{seed}"]
            result = invoke(args + (["--prune"] if policy == "fine" else []))
            assert result.exit_code == 0, result.output
    groups = group(load_runs([tmp_path / "runs"])[0])
    sizes = sorted(sorted(len(seeds) for seeds in by.values()) for by in groups.values())
    assert sizes == [[1, 1], [2, 2]]  # a and b together (seeds 0 and 1), c on its own


def _edit_keeping_size_and_mtime(png):
    """One byte changed, then the file's size and mtime set back as they were (issue 49, class 2)."""
    st = png.stat()
    raw = bytearray(png.read_bytes())
    raw[-20] ^= 1
    png.write_bytes(bytes(raw))
    os.utime(png, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (png.stat().st_size, png.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_an_edit_whose_mtime_is_set_back_is_still_other_data(tmp_path, monkeypatch):
    # The digest cache trusted size and mtime, so the old identity came back and compare reused
    # runs made on the old bytes. Catches a cache keyed without the ctime.
    monkeypatch.setenv("FINEPRUNE_CACHE", str(tmp_path / "cache"))
    a = folder(tmp_path / "a")
    before = ident(a)  # digests cached
    _edit_keeping_size_and_mtime(a / "train" / "c0" / "3.png")
    assert ident(a)["train"] != before["train"] and ident(a)["test"] == before["test"]


def test_decoded_images_follow_an_edit_whose_mtime_is_set_back(tmp_path):
    # The image cache's key held size and mtime only: a fresh run trained on the old pixels.
    from fineprune_cli.engine.inputs.data import load_dataset

    a = folder(tmp_path / "a")
    first = load_dataset("folder", a)
    png = a / "train" / "c0" / "1.png"
    img = read_image(str(png))
    img[0, 0, 0] ^= 1
    st = png.stat()
    write_png(img, str(png))
    os.utime(png, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = load_dataset("folder", a)
    assert not torch.equal(again.train_x, first.train_x)


@pytest.mark.slow  # two tiny compares
def test_compare_on_the_same_bytes_at_another_path_reuses_its_finished_runs(tmp_path):
    # Refused as "made with other settings (data.data_dir)" though the runs record the data by
    # content. Catches data_dir compared where the content identity decides.
    a = folder(tmp_path / "a")
    args = ["compare", "--model", "lenet", "--dataset", "folder", "--epochs", "2", "--batch-size", "8"]
    args += ["--device", "cpu", "--policies", "regular", "--out", tmp_path / "cmp", "--data-dir"]
    assert invoke([*args, a]).exit_code == 0
    moved = shutil.move(str(a), str(tmp_path / "elsewhere"))
    again = invoke([*args, moved])
    assert again.exit_code == 0 and "1 of 1 runs already finished" in again.output, again.output

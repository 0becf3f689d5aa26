"""Hostile cases of issue 25, files: crafted image files and folders (refused, or trained and
checked pixel by pixel on both data paths), FIFOs and devices where records are read, damaged
records under report and estimate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from cases import TINY, Case, Train, flags, with_run
from crafted import FOLDERS, bigger_test_images_folder, jpeg_header_bomb, make_fifo, png_header_bomb
from PIL import Image


def make_pruned(base: Path, train: Train) -> Path:
    """A pruned finished run (score snapshots, a schedule)."""
    pruned = base / "pruned"
    train(
        [
            "--model",
            "lenet",
            "--dataset",
            "synthetic",
            "--subset",
            "64",
            "--test-subset",
            "32",
            "--device",
            "cpu",
            "--epochs",
            "2",
            "--prune",
            "--window",
            "2",
            "--start",
            "1",
            "--out",
            str(pruned),
        ],
        base,
    )
    return pruned


def make_folder_run(base: Path, train: Train) -> Path:
    """An interrupted run on an image folder named relatively (`imgs`), so a case's copy of
    both can change the data."""
    folder_run = base / "folder-run"
    FOLDERS["grey"](folder_run / "imgs")
    train(
        [
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            "imgs",
            "--device",
            "cpu",
            "--epochs",
            "2",
            "--batch-size",
            "4",
            "--out",
            "run",
        ],
        folder_run,
    )
    summary = json.loads((folder_run / "run" / "summary.json").read_text())
    summary["status"] = "interrupted"
    (folder_run / "run" / "summary.json").write_text(json.dumps(summary))
    return folder_run


# -- crafted image files in an otherwise good folder -----------------------------------------


def _png(size=(8, 8)) -> bytes:
    from io import BytesIO

    buf = BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    from io import BytesIO

    buf = BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(buf, "JPEG")
    return buf.getvalue()


def _bad_crc() -> bytes:
    raw = bytearray(_png())
    raw[29] ^= 0xFF
    return bytes(raw)


def _garbage_idat() -> bytes:
    import struct
    import zlib

    data = b"this is not zlib data at all"
    chunk = struct.pack(">I", len(data)) + b"IDAT" + data + struct.pack(">I", zlib.crc32(b"IDAT" + data))
    return png_header_bomb(8, 8)[:33] + chunk + png_header_bomb(8, 8)[-12:]


CRAFTED: dict[str, tuple[str, Callable[[], bytes], str]] = {  # name: (file, bytes, words)
    "png-bomb-60000": ("bad.png", png_header_bomb, "declares 60000 x 60000 pixels"),
    "png-bomb-wide": ("bad.png", lambda: png_header_bomb(2**31 - 1, 1), "declares 2147483647 x 1"),
    "png-bomb-limit-plus-one": ("bad.png", lambda: png_header_bomb(8193, 8192), "more than the limit"),
    "png-zero-width": ("bad.png", lambda: png_header_bomb(0, 8), "declares 0 x 8"),
    "png-colour-type-5": ("bad.png", lambda: png_header_bomb(8, 8, 5), "colour type 5"),
    "png-truncated-header": ("bad.png", lambda: _png()[:20], "truncated PNG header"),
    "png-bad-crc": ("bad.png", _bad_crc, "cannot decode image"),
    "png-truncated-data": ("bad.png", lambda: _png()[:-20], "cannot decode image"),
    "png-garbage-data": ("bad.png", _garbage_idat, "cannot decode image"),
    "jpeg-bomb": ("bad.jpg", jpeg_header_bomb, "declares 65000 x 65000"),
    "jpeg-zero-height": ("bad.jpg", lambda: jpeg_header_bomb(8, 0), "declares 8 x 0"),
    "jpeg-no-frame": ("bad.jpg", lambda: b"\xff\xd8\xff\xd9", "no JPEG frame header"),
    "jpeg-truncated": ("bad.jpg", lambda: _jpeg()[:-30], "cannot decode image"),
    "gif-named-png": ("bad.png", lambda: b"GIF89a\x08\x00\x08\x00" + b"\x00" * 20, "not a PNG or JPEG"),
    "empty-file": ("bad.png", lambda: b"", "not a PNG or JPEG"),
    "text-named-jpg": ("bad.jpg", lambda: b"hello", "not a PNG or JPEG"),
}
LOADERS = {
    "device": ["--loader", "device"],
    "stream": ["--loader", "stream", "--workers", "0"],
    "auto": ["--loader", "auto", "--workers", "0"],
}


def folder_case(
    name: str, edit: Callable[[Path], None], extra: list[str], words=(), expect: str = "refused", check=None
) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates["folder"], work / "imgs")
        edit(work / "imgs")
        return [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            "imgs",
            "--device",
            "cpu",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--lr",
            "0.01",
            "--out",
            "run",
            *extra,
        ]
        # lr 0.01: RGB folders of any size are augmented now; at 0.1 the palette folder diverged

    return Case(name, (), words, setup, expect=expect, check=check)


def _put(file: str, data: Callable[[], bytes]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / "train" / "dog" / file).write_bytes(data())

    return edit


def _special(kind: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        target = folder / "train" / "dog" / "odd.png"
        if kind == "fifo":
            make_fifo(target)
        elif kind == "folder":
            target.mkdir()
        elif kind == "dangling":
            target.symlink_to(folder / "nowhere.png")
        else:
            target.symlink_to(target)

    return edit


def _replaced_by(builder: Callable[[Path], Path]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        shutil.rmtree(folder)
        builder(folder)

    return edit


def _same_on_both_paths(name: str) -> Callable[[Path], str | None]:
    """The run finished, and both data paths decode every image to the same tensor, which is
    the image's own pixels in the folder's mode (PIL's conversion is the reference)."""

    def check(work: Path) -> str | None:
        from fineprune_cli.engine.inputs.imagefolder import list_folder, load_image_folder
        from fineprune_cli.engine.inputs.stream import load_data
        from fineprune_cli.engine.setup.config import DataConfig

        if json.loads((work / "run" / "summary.json").read_text())["status"] != "complete":
            return "the run did not complete"
        train_x, _, test_x, _, _ = load_image_folder(work / "imgs")
        cfg = DataConfig(dataset="folder", data_dir=str(work / "imgs"), loader="stream", workers=0)
        data = load_data(cfg, 0, torch.device("cpu"))[0]
        listing = list_folder(work / "imgs")
        mode = "RGB" if train_x.shape[1] == 3 else "L"
        for i, (a, (path, _)) in enumerate(zip(list(train_x) + list(test_x), listing["train"] + listing["test"])):
            if not torch.equal(a, data.images[i][1]):
                return f"{name}: {path.name} differs between the device and stream paths"
            pil = Image.open(path)
            if pil.mode in ("I;16", "I"):  # 16-bit: scaled to 8 bits, not compared here
                continue
            ref = torch.from_numpy(np.array(pil.convert(mode))).reshape(8, 8, -1).permute(2, 0, 1)
            if path.suffix == ".png" and not torch.equal(a, ref):
                return f"{name}: {path.name} decodes to other pixels than the image holds"
        return None

    return check


def _image_cases() -> list[Case]:
    cases = []
    for name, (file, data, words) in CRAFTED.items():
        for loader, extra in LOADERS.items():
            cases.append(folder_case(f"image-{name}-{loader}", _put(file, data), extra, [file, words]))
    for kind in ("fifo", "folder", "dangling", "loop"):
        for loader in ("device", "stream"):
            cases.append(
                folder_case(
                    f"image-{kind}-{loader}", _special(kind), LOADERS[loader], ["odd.png", "not a regular file"]
                )
            )
    for loader in ("device", "stream"):
        cases.append(
            folder_case(
                f"image-test-bigger-{loader}",
                _replaced_by(bigger_test_images_folder),
                LOADERS[loader],
                ["test/a/0.png is (12, 12)", "--image-size"],
            )
        )
        for name, builder in FOLDERS.items():
            cases.append(
                folder_case(
                    f"folder-{name}-{loader}",
                    _replaced_by(builder),
                    LOADERS[loader],
                    expect="done",
                    check=_same_on_both_paths(name),
                )
            )
    return cases


# -- FIFOs and devices where a file is read --------------------------------------------------


def _fifo(filename: str) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        (run / filename).unlink(missing_ok=True)
        make_fifo(run / filename)

    return edit


def _left_out(words: str) -> Callable[[Path], str | None]:
    def check(work: Path) -> str | None:
        index = (work / "rep" / "index.md").read_text()
        return None if "Runs left out" in index and words in index else f"index.md does not leave the run out ({words})"

    return check


def _reported(work: Path) -> str | None:
    index = (work / "rep" / "index.md").read_text()
    return None if "1 complete run in 1 row" in index else "index.md lacks the run"


def report_case(name: str, edit, check, template: str = "pruned", plots: bool = True) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates[template], work / "run")
        edit(work / "run", outside)
        return ["report", "run", "--out", "rep", *([] if plots else ["--no-plots"])]

    return Case(name, (), (), setup, expect="done", check=check)


def _notes(kind: str):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates["run"], work / "run")
        path = {"dev-zero": "/dev/zero", "dev-null": "/dev/null"}.get(kind, "notes.md")
        if kind == "fifo":
            make_fifo(work / "notes.md")
        elif kind == "folder":
            (work / "notes.md").mkdir()
        return ["report", "run", "--out", "rep", "--notes", path]

    return setup


def _config_fifo(command: list[str]):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        make_fifo(work / "c.yaml")
        return [*command, "--config", "c.yaml"]

    return setup


def _fifo_cases() -> list[Case]:
    cases = [
        report_case(f"report-fifo-{f}", _fifo(f), _left_out("not a regular file"), plots=False)
        for f in ("metrics.csv", "config.yaml", "summary.json")
    ]
    cases.append(report_case("report-fifo-snapshot", _fifo("dropping_counts_window1.pt"), _reported))
    for f in ("metrics.csv", "config.yaml", "summary.json"):
        cases.append(
            with_run(f"estimate-fifo-{f}", _fifo(f), ["estimate", "--run", "run"], ["not a regular file"], status=None)
        )
    for f in ("checkpoint.pt", "config.yaml", "summary.json"):
        cases.append(with_run(f"resume-fifo-{f}", _fifo(f), ["train", "--resume", "run"], ["not a regular file"]))
    for kind in ("fifo", "dev-zero", "dev-null", "folder"):
        cases.append(
            Case(
                f"report-notes-{kind}",
                (),
                ["--notes", "not a regular file" if kind != "folder" else "--notes"],
                _notes(kind),
            )
        )
    cases.append(Case("train-config-fifo", (), ["not a regular file"], _config_fifo(["train", *TINY])))
    cases.append(
        Case(
            "compare-config-fifo",
            (),
            ["not a regular file"],
            _config_fifo(["compare", "--model", "lenet", "--dataset", "synthetic"]),
        )
    )
    cases.append(flags("train-config-dev-zero", "train", *TINY, "--config", "/dev/zero", words=["not a regular file"]))
    return cases


# -- damaged records under report and estimate ------------------------------------------------


def _snapshot(value) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        for f in run.glob("dropping_counts_window*.pt"):
            torch.save(value, f)

    return edit


def _summary_text(field: str, text: str) -> Callable[[Path, Path], None]:
    """Set a summary.json field to raw JSON text (numbers Python's json would not write)."""

    def edit(run: Path, outside: Path) -> None:
        data = json.loads((run / "summary.json").read_text())
        data[field] = "@@@"
        (run / "summary.json").write_text(json.dumps(data).replace('"@@@"', text))

    return edit


def _both(*edits) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        for e in edits:
            e(run, outside)

    return edit


def _ucb(run: Path, outside: Path) -> None:
    for name, old, new in (
        ("summary.json", '"policy": "fine"', '"policy": "ucb"'),
        ("config.yaml", "policy: fine", "policy: ucb"),
    ):
        (run / name).write_text((run / name).read_text().replace(old, new))


SNAPSHOTS = {
    "empty": torch.tensor([]),
    "nan": torch.full((64,), float("nan")),
    "inf": torch.full((64,), float("inf")),
    "dict": {"a": torch.tensor([1])},
    "text": "counts",
    "2d": torch.zeros(8, 8),
    "negative": torch.full((64,), -3),
    "huge": torch.full((64,), 1e300, dtype=torch.float64),
    "bool": torch.zeros(64, dtype=torch.bool),
}
SCHEDULES = {
    "list": "[1, 2]",
    "text-window": '{"window": "x"}',
    "negative-window": '{"window": -2}',
    "bool-window": '{"window": true}',
    "huge-window": '{"window": 1e400}',
}
COUNTS = {
    "num-train-1e400": ("num_train", "1" + "0" * 400, "num_train and epochs"),
    "num-train-zero": ("num_train", "0", "num_train and epochs"),
    "num-train-negative": ("num_train", "-1", "num_train and epochs"),
    "epochs-1e30": ("epochs", "1" + "0" * 30, "num_train and epochs"),
    "skipped-1e400": ("samples_skipped", "1" + "0" * 400, "samples_skipped"),
    "skipped-negative": ("samples_skipped", "-5", "samples_skipped"),
}


def _record_cases() -> list[Case]:
    cases = [report_case(f"report-snapshot-{k}", _snapshot(v), _reported) for k, v in SNAPSHOTS.items()]
    cases += [
        report_case(
            f"report-schedule-{k}",
            _summary_text("schedule", v),
            _left_out("'schedule' has the wrong type") if k == "list" else _reported,
        )
        for k, v in SCHEDULES.items()
    ]
    for name, (field, text, words) in COUNTS.items():
        cases.append(report_case(f"report-{name}", _summary_text(field, text), _left_out(words), plots=False))
        cases.append(
            with_run(
                f"estimate-ucb-{name}",
                _both(_ucb, _summary_text(field, text)),
                ["estimate", "--run", "run"],
                [words],
                status=None,
            )
        )
    for what, field in (("model", "model"), ("label", "dataset_label")):
        cases.append(
            report_case(f"report-long-{what}-name", _summary_text(field, json.dumps("n" * 300 + "[x]")), _reported)
        )
    return cases


FILE_CASES: list[Case] = _image_cases() + _fifo_cases() + _record_cases()

"""Hostile cases of issue 25: crafted image files and folders, FIFOs where records are read,
damaged records under report and estimate, launch flags and the launcher's environment, data
that changed under a run, duplicate comparison arms, a folder another writer holds, too little
memory. Most must be refused in one line; the crafted folders a careless tool gets silently
wrong, and report over damaged records, must succeed, and their check looks at the result.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from PIL import Image

from cases import TINY, Case, flags, train, with_run
from crafted import (FOLDERS, bigger_test_images_folder, jpeg_header_bomb, make_fifo, png_header_bomb,
                     swap_class_folders)

HELD: list[int] = []   # lock files the harness holds during a case; closed after it


def make_round3_templates(base: Path) -> dict[str, Path]:
    """A pruned finished run (score snapshots, a schedule) and an interrupted run on an image
    folder named relatively (`imgs`), so a case's copy of both can change the data."""
    out = {}
    pruned = base / "pruned"
    argv = ["--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--test-subset", "32", "--device",
            "cpu", "--epochs", "2", "--prune", "--window", "2", "--start", "1", "--out", str(pruned)]
    subprocess.run([sys.executable, "-m", "fineprune_cli", "train", *argv], check=True, capture_output=True,
                   timeout=300)
    out["pruned"] = pruned
    folder_run = base / "folder-run"
    FOLDERS["grey"](folder_run / "imgs")
    argv = ["--model", "lenet", "--dataset", "folder", "--data-dir", "imgs", "--device", "cpu", "--epochs", "2",
            "--batch-size", "4", "--out", "run"]
    subprocess.run([sys.executable, "-m", "fineprune_cli", "train", *argv], check=True, capture_output=True,
                   timeout=300, cwd=folder_run)
    summary = json.loads((folder_run / "run" / "summary.json").read_text())
    summary["status"] = "interrupted"
    (folder_run / "run" / "summary.json").write_text(json.dumps(summary))
    out["folder-run"] = folder_run
    return out


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


CRAFTED: dict[str, tuple[str, Callable[[], bytes], str]] = {   # name: (file, bytes, words)
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
LOADERS = {"device": ["--loader", "device"], "stream": ["--loader", "stream", "--workers", "0"],
           "auto": ["--loader", "auto", "--workers", "0"]}


def folder_case(name: str, edit: Callable[[Path], None], extra: list[str], words=(),
                expect: str = "refused", check=None) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates["folder"], work / "imgs")
        edit(work / "imgs")
        return ["train", "--model", "lenet", "--dataset", "folder", "--data-dir", "imgs", "--device", "cpu",
                "--epochs", "1", "--batch-size", "4", "--out", "run", *extra]
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
        from fineprune_cli.engine.config import DataConfig
        from fineprune_cli.engine.imagefolder import list_folder, load_image_folder
        from fineprune_cli.engine.stream import load_data

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
            if pil.mode in ("I;16", "I"):   # 16-bit: scaled to 8 bits, not compared here
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
            cases.append(folder_case(f"image-{kind}-{loader}", _special(kind), LOADERS[loader],
                                     ["odd.png", "not a regular file"]))
    for loader in ("device", "stream"):
        cases.append(folder_case(f"image-test-bigger-{loader}", _replaced_by(bigger_test_images_folder),
                                 LOADERS[loader], ["test/a/0.png is (12, 12)", "--image-size"]))
        for name, builder in FOLDERS.items():
            cases.append(folder_case(f"folder-{name}-{loader}", _replaced_by(builder), LOADERS[loader],
                                     expect="done", check=_same_on_both_paths(name)))
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
    return None if "1 complete runs" in index else "index.md lacks the run"


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
    cases = [report_case(f"report-fifo-{f}", _fifo(f), _left_out("not a regular file"), plots=False)
             for f in ("metrics.csv", "config.yaml", "summary.json")]
    cases.append(report_case("report-fifo-snapshot", _fifo("dropping_counts_window1.pt"), _reported))
    for f in ("metrics.csv", "config.yaml", "summary.json"):
        cases.append(with_run(f"estimate-fifo-{f}", _fifo(f), ["estimate", "--run", "run"], ["not a regular file"],
                              status=None))
    for f in ("checkpoint.pt", "config.yaml", "summary.json"):
        cases.append(with_run(f"resume-fifo-{f}", _fifo(f), ["train", "--resume", "run"], ["not a regular file"]))
    for kind in ("fifo", "dev-zero", "dev-null", "folder"):
        cases.append(Case(f"report-notes-{kind}", (), ["--notes", "not a regular file"
                                                        if kind != "folder" else "--notes"], _notes(kind)))
    cases.append(Case("train-config-fifo", (), ["not a regular file"], _config_fifo(["train", *TINY])))
    cases.append(Case("compare-config-fifo", (), ["not a regular file"],
                      _config_fifo(["compare", "--model", "lenet", "--dataset", "synthetic"])))
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
    for name, old, new in (("summary.json", '"policy": "fine"', '"policy": "ucb"'),
                           ("config.yaml", "policy: fine", "policy: ucb")):
        (run / name).write_text((run / name).read_text().replace(old, new))


SNAPSHOTS = {"empty": torch.tensor([]), "nan": torch.full((64,), float("nan")), "inf": torch.full((64,), float("inf")),
             "dict": {"a": torch.tensor([1])}, "text": "counts", "2d": torch.zeros(8, 8), "negative": torch.full((64,), -3),
             "huge": torch.full((64,), 1e300, dtype=torch.float64), "bool": torch.zeros(64, dtype=torch.bool)}
SCHEDULES = {"list": "[1, 2]", "text-window": '{"window": "x"}', "negative-window": '{"window": -2}',
             "bool-window": '{"window": true}', "huge-window": '{"window": 1e400}'}
COUNTS = {"num-train-1e400": ("num_train", "1" + "0" * 400, "num_train and epochs"),
          "num-train-zero": ("num_train", "0", "num_train and epochs"),
          "num-train-negative": ("num_train", "-1", "num_train and epochs"),
          "epochs-1e30": ("epochs", "1" + "0" * 30, "num_train and epochs"),
          "skipped-1e400": ("samples_skipped", "1" + "0" * 400, "samples_skipped"),
          "skipped-negative": ("samples_skipped", "-5", "samples_skipped")}


def _record_cases() -> list[Case]:
    cases = [report_case(f"report-snapshot-{k}", _snapshot(v), _reported) for k, v in SNAPSHOTS.items()]
    cases += [report_case(f"report-schedule-{k}", _summary_text("schedule", v),
                          _left_out("'schedule' has the wrong type") if k == "list" else _reported)
              for k, v in SCHEDULES.items()]
    for name, (field, text, words) in COUNTS.items():
        cases.append(report_case(f"report-{name}", _summary_text(field, text), _left_out(words), plots=False))
        cases.append(with_run(f"estimate-ucb-{name}", _both(_ucb, _summary_text(field, text)),
                              ["estimate", "--run", "run"], [words], status=None))
    for what, field in (("model", "model"), ("label", "dataset_label")):
        cases.append(report_case(f"report-long-{what}-name", _summary_text(field, json.dumps("n" * 300 + "[x]")),
                                 _reported))
    return cases


# -- launch flags and the launcher's environment -----------------------------------------------

def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


ENDPOINTS = {"no-port": "node0", "empty-port": "node0:", "no-host": ":29500", "port-zero": "node0:0",
             "port-65536": "node0:65536", "port-negative": "node0:-1", "port-word": "node0:http",
             "port-arabic": "node0:\u0663", "ipv6-no-port": "[::1]"}
MULTI = ["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0"]
ENVS = {"rank-negative": ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1"),
        "rank-past-world": ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2"),
        "rank-word": ({"RANK": "zero", "WORLD_SIZE": "2"}, "RANK='zero'"),
        "rank-unset": ({"WORLD_SIZE": "2"}, "RANK is unset"),
        "world-word": ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
        "world-negative": ({"RANK": "0", "WORLD_SIZE": "-3"}, "WORLD_SIZE=-3"),
        "world-float": ({"RANK": "0", "WORLD_SIZE": "2.0"}, "WORLD_SIZE='2.0'"),
        "local-rank-word": ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "x"}, "LOCAL_RANK='x'"),
        "lone-rank-negative": ({"RANK": "-1"}, "RANK=-1"),
        "master-port-huge": ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000"),
        "master-port-word": ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "p"}, "MASTER_PORT='p'"),
        "slurm-procid-past": ({"SLURM_PROCID": "5", "SLURM_NTASKS": "2"}, "SLURM_PROCID=5"),
        "slurm-ntasks-word": ({"SLURM_PROCID": "0", "SLURM_NTASKS": "x"}, "SLURM_NTASKS='x'")}


def _launch_cases() -> list[Case]:
    cases = [train("nproc-4096", "--nproc-per-node", "4096", words=["--nproc-per-node must be between 1 and 256"]),
             train("nproc-257", "--nproc-per-node", "257", words=["--nproc-per-node"]),
             train("node-rank-past-nnodes", *MULTI[:4], "--node-rank", "2", "--rdzv-endpoint", "h:29500",
                   words=["--node-rank must be between 0 and 1"]),
             train("node-rank-negative", *MULTI[:4], "--node-rank", "-1", "--rdzv-endpoint", "h:29500",
                   words=["--node-rank"]),
             train("node-rank-without-nnodes", "--nproc-per-node", "2", "--node-rank", "1", words=["--node-rank"]),
             train("nnodes-huge", *MULTI[:2], "--nnodes", "100000", "--node-rank", "0", "--rdzv-endpoint", "h:1",
                   words=["--nnodes"])]
    cases += [train(f"endpoint-{k}", *MULTI, "--rdzv-endpoint", v, words=["--rdzv-endpoint must be host:port"])
              for k, v in ENDPOINTS.items()]
    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    cases += [Case(f"env-{k}", ["train", *TINY], [words], env={**base, **env}) for k, (env, words) in ENVS.items()]
    cases.append(Case("env-no-master-addr", ["train", *TINY, "--dist-timeout", "5"], ["set MASTER_ADDR"],
                      env={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": None}))
    cases.append(Case("env-unreachable-peer", ["train", *TINY, "--dist-timeout", "2"], ["could not join the process group"],
                      env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port()}))
    scale = ["scale", "--model", "lenet", "--dataset", "synthetic", "--dist-mode", "async"]
    cases += [flags("scale-num-ps-65", *scale, "--num-ps", "65", words=["--num-ps must be between 1 and 64"]),
              flags("scale-nproc-4096", *scale, "--nproc", "4096", words=["--nproc takes positive integers up to 256"]),
              flags("scale-endpoint-no-port", *scale, "--nnodes", "2", "--rdzv-endpoint", "node0",
                    words=["--rdzv-endpoint must be host:port"]),
              flags("scale-node-rank-past", *scale, "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1",
                    words=["--node-rank"])]
    return cases


# -- data that changed under a run, duplicate arms, a held folder, little memory ---------------

def _folder_run(edit: Callable[[Path], None]):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        for name in ("imgs", "run"):
            shutil.copytree(templates["folder-run"] / name, work / name, symlinks=True)
        edit(work / "imgs")
        return ["train", "--resume", "run"]
    return setup


def _touch(folder: Path) -> None:
    path = folder / "train" / "a" / "0.png"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))


DATA_EDITS = {"train-classes-swapped": (lambda f: swap_class_folders(f / "train"), "the train images"),
              "test-classes-swapped": (lambda f: swap_class_folders(f / "test"), "the test images"),
              "file-added": (lambda f: shutil.copy(f / "train" / "a" / "0.png", f / "train" / "a" / "new.png"),
                             "13 files"),
              "file-removed": (lambda f: (f / "train" / "b" / "1.jpg").unlink(), "11 files"),
              "file-edited": (_touch, "the train images"),
              "folder-gone": (lambda f: shutil.rmtree(f), "does not exist")}


def _held(argv: list[str], run_files: bool):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        if run_files:
            shutil.copytree(templates["run"], work / "run")
            summary = json.loads((work / "run" / "summary.json").read_text())
            summary["status"] = "interrupted"
            (work / "run" / "summary.json").write_text(json.dumps(summary))
        (work / "run").mkdir(exist_ok=True)
        fd = os.open(work / "run" / ".lock", os.O_CREAT | os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)   # the forked case opens its own: the lock conflicts
        HELD.append(fd)
        return argv
    return setup


def _other_cases() -> list[Case]:
    cases = [Case(f"resume-data-{k}", (), ["resume refused" if k != "folder-gone" else "", w], _folder_run(e))
             for k, (e, w) in DATA_EDITS.items()]
    cmp = ["compare", "--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--epochs", "1"]
    cases += [flags("compare-seed-twice", *cmp, "--seeds", "0,1,0", words=["is listed twice"]),
              flags("compare-policy-twice", *cmp, "--policies", "fine,regular,fine", words=["is listed twice"]),
              flags("compare-model-twice", *cmp[:2], "lenet,lenet", *cmp[3:], words=["is listed twice"]),
              flags("compare-dataset-twice", *cmp[:4], "synthetic,synthetic", *cmp[5:], words=["is listed twice"]),
              flags("compare-frontier-same-percent", *cmp, "--frontier", "0.2,0.201", words=["share it"])]
    cases += [Case("writer-holds-new-folder", (), ["being written by another"], _held(["train", *TINY], False)),
              Case("writer-holds-resumed-folder", (), ["being written by another"],
                   _held(["train", "--resume", "run"], True))]
    for name, extra, words in (
            ("image-size-512-device", ["--image-size", "512", "--loader", "device"],
             "held on cpu need about 0.4 GB, 0.3 GB is free: --loader stream fits"),
            ("image-size-4096-device", ["--image-size", "4096", "--loader", "device"], "lower --image-size"),
            ("image-size-4096-auto", ["--image-size", "4096"], "lower --image-size or --batch-size"),
            ("image-size-2048-stream", ["--image-size", "2048", "--loader", "stream"], "a batch of 6 images")):
        cases.append(folder_case(f"memory-{name}", lambda f: None, extra, [words]))
        cases[-1].memory_mb = 350    # the headroom of a small machine (RLIMIT_AS)
    return cases


ROUND3: list[Case] = _image_cases() + _fifo_cases() + _record_cases() + _launch_cases() + _other_cases()

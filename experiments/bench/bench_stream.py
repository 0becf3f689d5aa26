"""Streaming vs device-resident data on an image folder, and what a streamed pruned epoch costs.

One run, one model (LeNet by default), the trainer's own `train_epoch`:
- device-resident: the folder decoded once into tensors (that one-time decode, or reading its
  cache, is not timed), then full epochs;
- streaming: DataLoader workers decode every batch's JPEGs, epoch after epoch; full epochs and
  pruned epochs (the `random` policy at --fraction, pruning every epoch) alternate, so the
  pruned/full ratio compares epochs of the same run. Ideal ratio: 1 - fraction.
The first epoch of each path (worker start, allocator warm-up) is left out; medians are shown.
Then (--mixed N) a generated folder of N images of mixed sizes trains through `fineprune train`'s
own code with --image-size 64 --loader stream, and the same folder with one broken file shows
the error naming it.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import ROOT, median

from fineprune_cli import PruneConfig, create_policy
from fineprune_cli.engine.inputs.stream import load_data
from fineprune_cli.engine.records.files import atomic_write_text
from fineprune_cli.engine.records.record import git_commit
from fineprune_cli.engine.setup.config import DataConfig, TrainConfig
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.models import create


def timed_epochs(trainer: Trainer, plans: list) -> list[float]:
    seconds = []
    for epoch, plan in enumerate(plans, start=1):
        t0 = time.perf_counter()
        trainer.train_epoch(epoch, plan).item()  # .item(): the epoch is done when it is read
        seconds.append(time.perf_counter() - t0)
    return seconds


def measure(args: argparse.Namespace, loader: str) -> dict[str, list[float] | int]:
    device = torch.device("cpu")
    d = DataConfig(
        dataset="folder",
        data_dir=args.data_dir,
        subset=args.subset,
        test_subset=100,
        loader=loader,
        workers=args.workers,
    )
    data, channels, classes = load_data(d, 0, device)
    torch.manual_seed(0)
    cfg = TrainConfig(epochs=args.epochs, milestones=[], lr=0.05)
    trainer = Trainer(create(args.model, channels, classes), data, cfg, device, seed=0)
    n = data.num_train
    if loader == "device":
        return {"n": n, "full": timed_epochs(trainer, [None] * (args.epochs + 1))[1:]}
    prune = PruneConfig(window=1, start=0, block=1, count=1, prune_fraction=args.fraction)
    policy = create_policy("random", n, prune, seed=1)
    plans = [None] + [p for e in range(args.epochs) for p in (None, policy.plan(e + 1))]
    seconds = timed_epochs(trainer, plans)[1:]
    return {"n": n, "kept": plans[2].samples, "full": seconds[0::2], "pruned": seconds[1::2]}


MIXED_SIZES = ((48, 48), (64, 80), (96, 72), (128, 128), (33, 57))


def mixed_folder(root: Path, n: int, classes: int = 10) -> None:
    """n training images (n // 5 test) of five sizes, JPEG and PNG, noise tinted by a colour per
    class: a check that the pipeline learns, not a hard task."""
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    palette = torch.randint(0, 206, (classes, 3), generator=g, dtype=torch.uint8)
    for split, count in (("train", n), ("test", n // 5)):
        for i in range(count):
            c = i % classes
            w, h = MIXED_SIZES[i % len(MIXED_SIZES)]
            pixels = torch.randint(0, 50, (h, w, 3), generator=g, dtype=torch.uint8) + palette[c]
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels.numpy()).save(folder / f"{i}.{'jpg' if i % 2 else 'png'}")


def mixed_run(n: int, size: int, workers: int) -> dict:
    """`fineprune train` (runner.train) on a generated mixed-size folder, streamed."""
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.errors import DataError
    from fineprune_cli.runner import train

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mixed"
        mixed_folder(root, n)
        cfg = Config()
        cfg.model.name, cfg.train.epochs, cfg.train.milestones, cfg.train.lr = "lenet", 3, [], 0.02
        d = cfg.data
        d.dataset, d.data_dir, d.image_size, d.loader, d.workers = "folder", str(root), size, "stream", workers
        cfg.run.out, cfg.run.device = str(Path(tmp) / "run"), "cpu"
        summary = train(cfg, show_progress=False)
        broken = root / "train" / "class3" / "zz-broken.jpg"
        broken.write_bytes(b"not a jpeg")
        cfg.run.out = str(Path(tmp) / "run2")
        try:
            train(cfg, show_progress=False)
            error = "no error (wrong)"
        except DataError as exc:
            error = str(exc).replace(str(root), "<folder>")
    return {
        "images": summary.num_train,
        "sizes": MIXED_SIZES,
        "epochs": summary.epochs_completed,
        "seconds": summary.train_seconds,
        "accuracy": summary.final_accuracy,
        "status": summary.status.value,
        "broken": error,
    }


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", default=str(ROOT / ".data" / "cifar10-jpeg"))
    ap.add_argument("--label", default="CIFAR-10 (JPEG q75)")
    ap.add_argument("--model", default="lenet")
    ap.add_argument("--subset", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs of each kind")
    ap.add_argument("--fraction", type=float, default=0.3)
    ap.add_argument("--mixed", type=int, default=3000, help="images of the generated mixed-size folder (0: none)")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "stream-cpu"))
    args = ap.parse_args()
    load = os.getloadavg()[0]  # this machine is shared: say how busy it was
    dev = measure(args, "device")
    st = measure(args, "stream")
    full, pruned, resident = median(st["full"]), median(st["pruned"]), median(dev["full"])
    rows = [
        {
            "path": "device-resident",
            "images": dev["n"],
            "epoch_s": round(resident, 3),
            "images_per_s": round(dev["n"] / resident),
            "over_full_streamed": "",
        },
        {
            "path": f"streaming, {args.workers} worker(s)",
            "images": st["n"],
            "epoch_s": round(full, 3),
            "images_per_s": round(st["n"] / full),
            "over_full_streamed": 1.0,
        },
        {
            "path": f"streaming, pruned at {args.fraction}",
            "images": st["kept"],
            "epoch_s": round(pruned, 3),
            "images_per_s": round(st["kept"] / pruned),
            "over_full_streamed": round(pruned / full, 3),
        },
    ]
    for row in rows:
        print(row)
    mixed = mixed_run(args.mixed, args.image_size, args.workers) if args.mixed else None
    print(mixed)
    write(Path(args.out), rows, args, dev, st, mixed, load)


def write(
    stem: Path, rows: list[dict], args: argparse.Namespace, dev: dict, st: dict, mixed: dict | None, load: float
) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stem.with_suffix(".csv"), buf.getvalue())
    cores = sorted(os.sched_getaffinity(0))
    command = "python experiments/bench/bench_stream.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [
        f"# Streaming vs device-resident data: {args.model}, {args.label}, CPU",
        "",
        f"- machine: {machine()}; torch {torch.__version__}; commit {git_commit()}; {time.strftime('%Y-%m-%d')}",
        f"- command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} taskset -c "
        f"{','.join(map(str, cores))} {command}`",
        f"- ran on {len(cores)} core(s) {cores}, {torch.get_num_threads()} torch thread(s); the "
        f"{args.workers} DataLoader worker(s) share that core with the training process; 1-minute load "
        f"average of the machine at the start: {load:.2f} (other jobs may share the core)",
        f"- training set: a fixed class-balanced subset of {dev['n']:,} images (`--subset`), batch 128, "
        f"{args.label}; the model's training step is the same in every row",
        "- device-resident: the one-time decode into tensors (or its cache) is not timed; only epochs",
        f"- medians of {args.epochs} timed epochs per row, each path's first epoch left out; full and "
        "pruned streamed epochs alternate in one run (pruned: the `random` policy, pruning every epoch)",
        f"- full streamed epochs (s): {', '.join(f'{s:.2f}' for s in st['full'])}; pruned: "
        f"{', '.join(f'{s:.2f}' for s in st['pruned'])}; device-resident: "
        f"{', '.join(f'{s:.2f}' for s in dev['full'])}",
        f"- target: pruned / full <= 0.75 (ideal {1 - args.fraction:.2f})",
        "",
        "| " + " | ".join(rows[0]) + " |",
        "|" + "---|" * len(rows[0]),
    ]
    lines += ["| " + " | ".join(str(v) for v in row.values()) + " |" for row in rows]
    if mixed:
        sizes = ", ".join(f"{w}x{h}" for w, h in mixed["sizes"])
        lines += [
            "",
            f"## A generated folder of mixed sizes, streamed with --image-size {args.image_size}",
            "",
            f"{mixed['images']:,} training images ({sizes}; JPEG and PNG; 10 classes) trained "
            f"{mixed['epochs']} epochs of LeNet through `fineprune train`'s code (`--model lenet --dataset "
            f"folder --image-size {args.image_size} --loader stream --workers {args.workers} --epochs 3 "
            "--milestones '' --lr 0.02`; at lr 0.05 this noise task diverged in epoch 2 on either "
            "path): status "
            f"{mixed['status']}, {mixed['seconds']:.1f} s of training, final test accuracy "
            f"{mixed['accuracy']:.2f}%.",
            "",
            f"With one broken file added, the same command stops with one line: `{mixed['broken']}`",
        ]
    atomic_write_text(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print("wrote", stem.with_suffix(".md"))


if __name__ == "__main__":
    main()

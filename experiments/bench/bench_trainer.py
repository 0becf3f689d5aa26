"""Our trainer against a bare PyTorch loop on the same preloaded tensors, in one run.

Both do the same forward / backward / SGD step over shuffled batches of 128; ours also
computes per-sample losses, accumulates metrics on the device and (in the third column)
feeds the DroppingCount tracker. The bare loop is what a competent user writes for the device:
on a GPU the model in channels_last and the forward in bf16 autocast, as the data the trainer
keeps there is bf16 (an fp32 model fed those tensors fails, as it did on an H200). With
`compile`, both models go through torch.compile in the trainer's mode (reduce-overhead, i.e.
CUDA graphs, on a GPU), so the ratio is the trainer's own cost, not a compiler's. Epochs
alternate ours/bare so drifting machine load hits both alike; the ratio of medians is the
figure to read.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
from common import median, write_table

from fineprune_cli import models
from fineprune_cli.engine.inputs.data import load_dataset
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.device import Stopwatch, resolve_device, synchronize
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning.tracker import DroppingCount


def bare_model(name: str, channels: int, classes: int, device: torch.device) -> torch.nn.Module:
    """The model as a GPU user sets it up: channels_last on CUDA (tensor cores want NHWC)."""
    fmt = torch.channels_last if device.type == "cuda" else torch.contiguous_format
    return models.create(name, channels, classes).to(device, memory_format=fmt)


def bare_epoch(model, opt, x, y, batch_size, gen):
    """One epoch over shuffled batches; data kept in a reduced precision (bf16, as the trainer
    keeps it on a GPU) is trained under autocast to that precision, the weights staying fp32."""
    low = x.dtype in (torch.bfloat16, torch.float16)
    precision = torch.autocast(x.device.type, dtype=x.dtype) if low else contextlib.nullcontext()
    perm = torch.randperm(len(y), generator=gen, device=x.device)
    for idx in perm.split(batch_size):
        with precision:
            loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def timed(fn, device) -> float:
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def bench(model_name: str, dataset: str, rounds: int, subset: int | None, device, compile: bool = False) -> dict:
    ds = load_dataset(dataset, subset=subset)
    data = DeviceData.build(ds, device, augment=False)  # same inputs for both loops
    cfg = TrainConfig(milestones=[])
    torch.manual_seed(0)
    ours = Trainer(models.create(model_name, ds.in_channels, ds.num_classes), data, cfg, device, compile=compile)
    torch.manual_seed(0)
    bare = bare_model(model_name, ds.in_channels, ds.num_classes, device)
    opt = torch.optim.SGD(bare.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if compile:  # after the optimizer took the parameters; the compiled wrapper shares them
        bare = torch.compile(bare, mode="reduce-overhead" if device.type == "cuda" else "default")
    gen = torch.Generator(device=device).manual_seed(0)
    tracker, watch = DroppingCount(data.num_train, device=device), Stopwatch(device)

    def hook(idx, losses):
        with watch.section():
            tracker.update(idx, losses)

    t_ours, t_bare, t_track = [], [], []
    for r in range(rounds + 1):  # round 0 warms up caches and allocators
        a = timed(lambda: ours.train_epoch(r + 1), device)  # noqa: B023 (used only within this iteration)
        b = timed(lambda: bare_epoch(bare, opt, data.train_x, data.train_y, cfg.batch_size, gen), device)
        before = watch.seconds()
        c = timed(lambda: ours.train_epoch(r + 1, observe=hook), device)  # noqa: B023 (used only within this iteration)
        if r:
            t_ours.append(a), t_bare.append(b), t_track.append((c, watch.seconds() - before))
    n = data.num_train
    track_time = median([c for c, _ in t_track])
    overhead = median([o / c for c, o in t_track])
    return {
        "model": model_name,
        "dataset": dataset,
        "compiled": compile,
        "samples": n,
        "bare_img_s": round(n / median(t_bare)),
        "ours_img_s": round(n / median(t_ours)),
        "ours_over_bare": round(median(t_bare) / median(t_ours), 3),
        "ours_with_tracker_img_s": round(n / track_time),
        "tracker_overhead_pct": round(100 * overhead, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="lenet")
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--subset", type=int, default=None)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = resolve_device(args.device)
    rows = [bench(m, args.dataset, args.rounds, args.subset, device) for m in args.models.split(",")]
    for row in rows:
        print(row)
    cmd = "python experiments/bench/bench_trainer.py " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if v is not None
    )
    notes = [
        f"median of {args.rounds} alternating epochs each; img/s = training images per second",
        "tracker_overhead_pct: time inside DroppingCount.update / epoch time, same run",
    ]
    print("wrote", write_table("trainer", rows, device, cmd, notes))


if __name__ == "__main__":
    main()

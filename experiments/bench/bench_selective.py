"""What a Selective-Backprop step costs against a full one (docs/policies/selective-backprop.md).

Per model, one Trainer on CIFAR-shaped synthetic data at batch 128, augmented as training is:
epochs of whole-batch steps and epochs of selective steps (every step selective: --sb-start 0,
--sb-end 1, --sb-interrupt 0, keep 0.5 unless --keep) alternate, after one warm-up epoch of each;
a step's time is its epoch's training time over its steps (time.perf_counter, the device
synchronised at both ends). The ratio is the median selective epoch over the median full one.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import median, write_table

from fineprune_cli import models
from fineprune_cli.engine.inputs.data import make_synthetic
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.device import resolve_device, synchronize
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning import PruneConfig, create

BATCH = 128


def _timed(trainer: Trainer, epoch: int, select) -> float:
    synchronize(trainer.device)
    t0 = time.perf_counter()
    trainer.train_epoch(epoch, select=select)
    synchronize(trainer.device)
    return time.perf_counter() - t0


def bench(model: str, steps: int, rounds: int, keep: float, device: torch.device) -> dict:
    """`rounds` pairs of epochs (full, selective) of `steps` steps each, after a warm-up pair."""
    n = steps * BATCH
    data = DeviceData.build(make_synthetic(num_train=n, num_test=BATCH), device, augment=True)
    torch.manual_seed(0)
    trainer = Trainer(models.create(model, 3, 10), data, TrainConfig(lr=0.02, milestones=[]), device)
    cfg = PruneConfig(sb_keep=keep, sb_start=0.0, sb_end=1.0, sb_interrupt=0)
    policy = create("selective-backprop", n, cfg, seed=1, device=device, epochs=2 * rounds + 2)
    _timed(trainer, 1, None), _timed(trainer, 2, policy)  # warm-up: allocator, caches
    full, selective = [], []
    for r in range(rounds):
        full.append(_timed(trainer, 3 + 2 * r, None) / steps)
        selective.append(_timed(trainer, 4 + 2 * r, policy) / steps)
    return {
        "model": model,
        "batch": BATCH,
        "keep": keep,
        "steps_each": steps * rounds,
        "full_step_ms": round(1000 * median(full), 2),
        "selective_step_ms": round(1000 * median(selective), 2),
        "selective_over_full": round(median(selective) / median(full), 3),
        "rows_backpropagated": max(1, int(keep * BATCH)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="lenet:100,resnet18:10", help="model:steps per epoch, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    device = resolve_device(args.device)
    rows = []
    for spec in args.models.split(","):
        name, steps = spec.split(":")
        rows.append(bench(name, int(steps), args.rounds, args.keep, device))
        print(rows[-1], flush=True)
    cmd = "python experiments/bench/bench_selective.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items())
    notes = [
        "ms per step: an epoch's training time over its steps, median over the rounds; full and selective "
        "epochs alternate in one process, after one warm-up epoch of each",
        "a selective step: the batch forward without gradients, then forward and backward of the drawn rows",
    ]
    print("wrote", write_table("selective", rows, device, cmd, notes))


if __name__ == "__main__":
    main()

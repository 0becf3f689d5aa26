"""What a Selective-Backprop step costs against a full one (docs/policies/selective-backprop.md),
in process CPU time beside the wall clock, and what its two parts cost.

Per model, one Trainer on CIFAR-shaped synthetic data at batch 128, augmented as training is:
epochs of whole-batch steps and epochs of selective steps (every step selective: --sb-start 0,
--sb-end 1, --sb-interrupt 0, keep 0.5 unless --keep) alternate, after one warm-up epoch of each;
a step's time is its epoch's time over its steps, by `time.process_time` (CPU seconds of this
process, all its threads: what the step costs, whatever else the machine runs) and by
`time.perf_counter` (wall, the device synchronised at both ends), the median over the rounds.
Then the selective step's parts, each over the same batches in a loop of its own, against a
full step in that loop: the forward without gradients over the whole batch (training mode, the
per-row losses and the policy's draw: `kept_rows`, as the trainer runs it) and the training
step (forward, backward, optimizer) on the kept rows alone.

--threads (default 1) sets torch's intra- and inter-op threads, so CPU time is one core's work.
On a loaded machine the CPU-time ratios hold better than wall ones, but caches and memory
bandwidth are shared too: measure on idle cores (`make bench-selective`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from common import median, write_table

from fineprune_cli import models
from fineprune_cli.engine.inputs.data import make_synthetic
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.device import resolve_device, synchronize
from fineprune_cli.engine.training.selective import kept_rows
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning import PruneConfig, create

BATCH = 128


class Clock:
    """Wall and process CPU seconds of a block, the device synchronised at both ends."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self) -> Clock:
        synchronize(self.device)
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def epochs(trainer: Trainer, policy, steps: int, rounds: int) -> dict:
    """Per-step seconds of full and selective epochs, alternating, after a warm-up pair."""
    for epoch, select in ((1, None), (2, policy)):  # warm-up: allocator, caches
        trainer.train_epoch(epoch, select=select)
    spans: dict = {"full": [], "selective": []}
    for r in range(rounds):
        for offset, kind, select in ((3, "full", None), (4, "selective", policy)):
            with Clock(trainer.device) as clock:
                trainer.train_epoch(offset + 2 * r, select=select)
            spans[kind].append((clock.wall / steps, clock.cpu / steps))
    return spans


def parts(trainer: Trainer, policy, steps: int, rounds: int, keep: int) -> dict:
    """Per-step seconds, over `steps` augmented batches: a full step, the no-grad forward over
    the batch with the draw, and a step on the kept rows (rows drawn once, outside the clock)."""
    idx = trainer.all[torch.randperm(trainer.all.numel(), generator=trainer.generator, device=trainer.device)]
    batches = [b for b in idx.split(BATCH) if b.numel() == BATCH][:steps]
    xs = list(trainer.data.batches(batches, trainer.augment_generator(0)))
    trainer.model.train()

    def step(x: torch.Tensor, rows: torch.Tensor) -> None:
        losses = F.cross_entropy(trainer.forward(x), trainer.data.train_y[rows], reduction="none")
        trainer.optimizer.zero_grad(set_to_none=True)
        (losses.sum() / losses.numel()).backward()
        trainer.optimizer.step()

    kept = [kept_rows(trainer, policy, x, b, BATCH, keep, max(keep, 2)) for x, b in zip(xs, batches)]
    work = {
        "full": lambda: [step(x, b) for x, b in zip(xs, batches)],
        "forward": lambda: [kept_rows(trainer, policy, x, b, BATCH, keep, max(keep, 2)) for x, b in zip(xs, batches)],
        "kept": lambda: [step(x, b) for x, b in kept],
    }
    for run in work.values():  # warm-up
        run()
    spans: dict = {name: [] for name in work}
    for _ in range(rounds):
        for name, run in work.items():
            with Clock(trainer.device) as clock:
                run()
            spans[name].append((clock.wall / len(xs), clock.cpu / len(xs)))
    return spans


def per_step(spans: list, clock: int) -> float:
    """The median over rounds of one clock's per-step seconds (0: wall, 1: CPU)."""
    return median([s[clock] for s in spans])


def bench(model: str, steps: int, rounds: int, keep_share: float, device: torch.device, threads: int) -> dict:
    n = steps * BATCH
    data = DeviceData.build(make_synthetic(num_train=n, num_test=BATCH), device, augment=True)
    torch.manual_seed(0)
    trainer = Trainer(models.create(model, 3, 10), data, TrainConfig(lr=0.02, milestones=[]), device)
    cfg = PruneConfig(sb_keep=keep_share, sb_start=0.0, sb_end=1.0, sb_interrupt=0)
    policy = create("selective-backprop", n, cfg, seed=1, device=device, epochs=2 * rounds + 2)
    keep = max(1, int(keep_share * BATCH))
    run, part = epochs(trainer, policy, steps, rounds), parts(trainer, policy, steps, rounds, keep)
    ms = {
        f"{k}_{c}": 1000 * per_step(v, i)
        for k, v in {**run, **{f"part_{p}": s for p, s in part.items()}}.items()
        for i, c in ((0, "wall"), (1, "cpu"))
    }
    full_part = ms["part_full_cpu"]
    return {
        "model": model,
        "batch": BATCH,
        "keep": keep_share,
        "rows_backpropagated": keep,
        "threads": threads,
        "steps_each": steps * rounds,
        "full_step_cpu_ms": round(ms["full_cpu"], 2),
        "selective_step_cpu_ms": round(ms["selective_cpu"], 2),
        "selective_over_full_cpu": round(ms["selective_cpu"] / ms["full_cpu"], 3),
        "full_step_wall_ms": round(ms["full_wall"], 2),
        "selective_step_wall_ms": round(ms["selective_wall"], 2),
        "selective_over_full_wall": round(ms["selective_wall"] / ms["full_wall"], 3),
        "nograd_forward_over_full_cpu": round(ms["part_forward_cpu"] / full_part, 3),
        "kept_step_over_full_cpu": round(ms["part_kept_cpu"] / full_part, 3),
        "parts_over_full_cpu": round((ms["part_forward_cpu"] + ms["part_kept_cpu"]) / full_part, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="lenet:100,resnet18:10", help="model:steps per epoch, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=1, help="torch's intra- and inter-op threads")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="folder of the table (default results/bench)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)  # before any parallel work, or torch refuses
    device = resolve_device(args.device)
    rows = []
    for spec in args.models.split(","):
        name, steps = spec.split(":")
        rows.append(bench(name, int(steps), args.rounds, args.keep, device, args.threads))
        print(rows[-1], flush=True)
    shown = {k: v for k, v in vars(args).items() if v is not None}
    cmd = "python experiments/bench/bench_selective.py " + " ".join(f"--{k} {v}" for k, v in shown.items())
    notes = [
        "cpu: time.process_time (this process, all threads), wall: time.perf_counter; ms per step, median over "
        "the rounds; full and selective epochs alternate in one process, after one warm-up epoch of each",
        "a selective step: the batch forward without gradients (training mode), the draw, then forward, "
        "backward and optimizer step of the drawn rows",
        "parts, each over the same batches in a loop of its own, over a full step in that loop (CPU time): "
        "nograd_forward (with the losses and the draw), kept_step (the step on the drawn rows alone)",
    ]
    out = None if args.out is None else Path(args.out)
    print("wrote", write_table("selective-cputime", rows, device, cmd, notes, out=out))


if __name__ == "__main__":
    main()

"""Does wall time fall in proportion to the samples skipped?

Runs `fineprune train` (the real code path, records and all) on synthetic data with a
schedule whose epochs alternate: unpruned, pruned, unpruned, ... (window 2, start 1,
block 1, count 1, no attenuation). Pruned and unpruned epochs of the same run are compared;
epoch 1 (warm-up) is left out. Ideal ratio: 1 - prune_fraction.
"""

from __future__ import annotations

import argparse
import tempfile

from common import median, write_table

from fineprune_cli.engine.records.record import read_metrics
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.engine.training.device import resolve_device
from fineprune_cli.runner import train

# An epoch's time does not depend on the learning rate, but a run that diverges stops: at the
# recipe's 0.1 (doubled in the pruned epochs at fraction 0.5) LeNet diverged in bf16 on an H200
# at epoch 3 (results/bench/nvidia-h200-lenet-diverged.log) and ended the whole bench.
LR = 0.02


def run(
    model: str, fraction: float, epochs: int, subset: int | None, device: str, compile: bool = False, lr: float = LR
) -> dict:
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.data.subset = model, "synthetic", subset
    cfg.data.test_subset = 500  # evaluation is not what is measured here
    cfg.train.epochs, cfg.train.milestones, cfg.train.lr = epochs, [], lr
    p = cfg.prune
    p.enabled, p.window, p.start, p.attenuation, p.block, p.count = True, 2, 1, 1.0, 1, 1
    p.prune_fraction = fraction
    cfg.run.device, cfg.run.compile = device, compile
    with tempfile.TemporaryDirectory() as tmp:
        cfg.run.out = tmp
        summary = train(cfg, show_progress=False)
        rows = read_metrics(tmp)[1:]
    full = [r.train_seconds for r in rows if not r.pruned]
    pruned = [r.train_seconds for r in rows if r.pruned]
    ratio = median(pruned) / median(full)
    return {
        "model": model,
        "dataset": "synthetic",
        "samples": summary.num_train,
        "prune_fraction": fraction,
        "full_epoch_s": round(median(full), 3),
        "pruned_epoch_s": round(median(pruned), 3),
        "pruned_over_full": round(ratio, 3),
        "ideal": round(1 - fraction, 3),
        "target_max": round(1 - fraction + 0.05, 3),
        "overhead_pct": round(100 * summary.overhead_seconds / summary.train_seconds, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="lenet")
    ap.add_argument("--fractions", default="0.3,0.5")
    ap.add_argument("--epochs", type=int, default=7)
    ap.add_argument("--subset", type=int, default=20000)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    rows = [run(args.model, float(f), args.epochs, args.subset, args.device) for f in args.fractions.split(",")]
    for row in rows:
        print(row)
    cmd = "python experiments/bench/bench_prune.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items())
    notes = [
        "median train seconds of pruned vs unpruned epochs of one run (epoch 1 left out)",
        "overhead_pct: DroppingCount updates + selection / training time of that run",
    ]
    print("wrote", write_table("prune", rows, resolve_device(args.device), cmd, notes))


if __name__ == "__main__":
    main()

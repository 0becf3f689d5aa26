"""Do two comparison folders hold the same runs, to the bit? Compares every run's metrics.csv
less its timing columns (train_seconds, overhead_seconds) and every score snapshot (*.pt),
run by run; prints one line per run and exits 1 on any difference.

    python experiments/bench/same_metrics.py BEFORE_DIR AFTER_DIR

The equality check of docs/development.md (issue 23) runs `fineprune compare` at two commits and passes
both folders here."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import torch

TIMING = {"train_seconds", "overhead_seconds"}


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def same_scores(a: Path, b: Path) -> bool:
    """Two score snapshots (tensors) equal to the bit; NaN (never observed) equals NaN."""
    x, y = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if not x.is_floating_point():
        return torch.equal(x, y)
    return torch.equal(x.isnan(), y.isnan()) and torch.equal(x[~x.isnan()], y[~y.isnan()])


def compare(before: Path, after: Path) -> bool:
    ok = True
    runs = sorted(p.parent.relative_to(before) for p in before.rglob("metrics.csv"))
    if not runs:
        print(f"no runs under {before}")
        return False
    for run in runs:
        other = after / run
        problems = []
        if not (other / "metrics.csv").exists():
            problems.append("missing")
        elif rows(before / run / "metrics.csv") != rows(other / "metrics.csv"):
            problems.append("metrics.csv differs")
        for snap in sorted((before / run).glob("*.pt")):
            if snap.name == "checkpoint.pt":
                continue
            if not (other / snap.name).exists() or not same_scores(snap, other / snap.name):
                problems.append(f"{snap.name} differs")
        print(f"{run}: {'identical' if not problems else ', '.join(problems)}")
        ok = ok and not problems
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: same_metrics.py BEFORE_DIR AFTER_DIR")
    sys.exit(0 if compare(Path(sys.argv[1]), Path(sys.argv[2])) else 1)

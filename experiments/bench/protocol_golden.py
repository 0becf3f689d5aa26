"""The fingerprint of six policies' short runs, to the bit: tests/test_protocol_drift.py
compares the code of today with what this printed at the commit before issue 23's protocol
change (9cbd47f). Regenerate only when a change is meant to alter those runs:

    PYTHONPATH=. python experiments/bench/protocol_golden.py   # one machine's entry of tests/data/protocol_golden.json

Each run: LeNet on 200 synthetic samples, 3 epochs, one thread, every pruning setting small
enough that each policy prunes: the rows as written, and hashes of the final weights and of
the score snapshots (metrics.csv rounds its numbers; the weights see every bit)."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch

from fineprune_cli.engine.records.record import read_metrics
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.engine.training.device import machine_signature
from fineprune_cli.runner import train

POLICIES = ("regular", "fine", "random", "infobatch", "ucb", "egreedy")
FIELDS = ("epoch", "lr", "samples", "train_loss", "test_loss", "test_accuracy", "pruned")


def settings(policy: str, out: Path) -> dict:
    return {
        "model.name": "lenet",
        "data.dataset": "synthetic",
        "data.subset": 200,
        "data.test_subset": 100,
        "train.epochs": 3,
        "train.batch_size": 50,
        "train.milestones": [2],
        "run.device": "cpu",
        "run.seed": 1,
        "run.out": str(out),
        "prune.enabled": policy != "regular",
        "prune.policy": policy,
        "prune.window": 2,
        "prune.start": 0,
        "prune.block": 1,
        "prune.anneal": 1.0,
    }


def rows(policy: str) -> dict:
    """One short run on one thread: its metrics rows (as written, every number as float.hex)
    and a hash of its final weights and of its score snapshots, which see every last bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(train(build_config(None, settings(policy, Path(tmp) / policy)), show_progress=False).run_dir)
            metrics = [[float(getattr(r, f)).hex() for f in FIELDS] for r in read_metrics(run)]
            model = torch.load(run / "checkpoint.pt", weights_only=True)["trainer"]["model"]
            snaps = [torch.load(p, weights_only=True) for p in sorted(run.glob("*_window*.pt"))]
            return {"metrics": metrics, "weights": digest(list(model.values())), "scores": digest(snaps)}
    finally:
        torch.set_num_threads(threads)


def digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def signature() -> dict:
    """What the bits depend on: the processor, the torch build and the instruction set its kernels
    dispatch to (an AVX2 and an AVX-512 EPYC give different last bits)."""
    found = {k: v for k, v in machine_signature(torch.device("cpu")).items() if k in ("processor", "torch")}
    return {**found, "capability": torch.backends.cpu.get_cpu_capability()}


if __name__ == "__main__":
    json.dump({"machine": signature(), "runs": {p: rows(p) for p in POLICIES}}, sys.stdout, indent=1)
    print()

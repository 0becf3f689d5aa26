"""What does tracking and selection cost each pruning policy, next to the training it steers?

One run on CPU: the same small loop (a LeNet-sized CNN on random 28x28 data, SGD, per-sample
losses) for every registered policy, from the same initial weights and data. The policy's
calls are timed apart from the training: observe() after every step, sync() at every epoch
edge and plan() before every epoch. Overhead = policy seconds / training seconds; the target
is under 1% for every policy. Each policy runs --repeats times, in rotating order, and the
table gives the medians. Prints a Markdown table (nothing is written).

    taskset -c 0 python experiments/bench/bench_policies.py            # one core, one thread
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fineprune_cli.pruning import PruneConfig, create, list_policies  # noqa: E402

# fine/random prune every other epoch; the loss-scored policies choose again every epoch
SCHEDULE = dict(window=2, start=1, block=1, count=1, attenuation=1.0, prune_fraction=0.3)


def lenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def run(name: str, x: torch.Tensor, y: torch.Tensor, epochs: int, batch: int) -> dict:
    torch.manual_seed(0)
    model = lenet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss(reduction="none")
    policy = create(name, len(x), PruneConfig(**SCHEDULE), seed=0, epochs=epochs)
    spent = {"observe": 0.0, "sync": 0.0, "plan": 0.0}
    samples, start = 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        t = time.perf_counter()
        plan = policy.plan(epoch)
        order = plan.indices[torch.randperm(plan.samples, generator=torch.Generator().manual_seed(epoch))]
        spent["plan"] += time.perf_counter() - t
        for idx in order.split(batch):
            losses = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            plan.loss(idx, losses).backward()
            opt.step()
            # detach() outside the timing: the first allocation after a step pays glibc's
            # deferred work from the backward's frees (10-200 us here), which the next forward
            # pays when nothing comes between; it is no cost of the policy
            done = losses.detach()
            t = time.perf_counter()
            if policy.observes:  # as the trainer does: no call for policies that ignore it
                policy.observe(idx, done)
            spent["observe"] += time.perf_counter() - t
        samples += plan.samples
        t = time.perf_counter()
        policy.sync()
        spent["sync"] += time.perf_counter() - t
    total = time.perf_counter() - start
    tracking = sum(spent.values())
    train = total - tracking
    return {
        "policy": name,
        "samples": samples,
        "train_s": train,
        **{f"{k}_s": v for k, v in spent.items()},
        "overhead_pct": 100 * tracking / train,
    }


def median_row(rows: list[dict]) -> dict:
    """Each column's median over repeated runs of one policy."""
    return {k: statistics.median(r[k] for r in rows) if isinstance(rows[0][k], float) else rows[0][k] for k in rows[0]}


def table(rows: list[dict]) -> str:
    cols = list(rows[0])
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default=",".join(list_policies()))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (args.samples,), generator=g)
    names = args.policies.split(",")
    for name in names:  # warm-up: first calls of each op pay one-time costs
        run(name, x[:512], y[:512], 2, args.batch_size)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(args.repeats):  # rotate the order: a busy spell hits a different policy
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(run(name, x, y, args.epochs, args.batch_size))
    rows = [median_row(runs[name]) for name in names]
    print(
        f"{args.samples} samples x {args.epochs} epochs, batch {args.batch_size}, "
        f"{args.threads} thread(s), torch {torch.__version__}, median of {args.repeats} run(s) "
        f"per policy; target overhead < 1%\n"
    )
    print(table(rows))
    worst = max(rows, key=lambda r: r["overhead_pct"])
    print(
        f"\nworst: {worst['policy']} {worst['overhead_pct']:.3f}% "
        f"({'under' if worst['overhead_pct'] < 1 else 'OVER'} the 1% target)"
    )


if __name__ == "__main__":
    main()

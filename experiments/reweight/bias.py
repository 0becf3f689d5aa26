"""How far `--reweight cumulative` (RePB's cumulative temporal rescaling) moves an epoch's expected
gradient from the full one, per epoch and per schedule: results/reweight/bias.md (issue 57).

A toy linear regression (N samples, d features) at one fixed parameter point, so the figure is the
weights' doing alone: sample i's gradient g_i, the full epoch's G = sum g_i. An epoch that trains
the plan's samples (with repeats) at weights w sums sum w_i g_i; its projection on G over |G|^2,
averaged over many seeds of the policy, is the expected weighted gradient / the full one (1.00:
unbiased). Two weightings of the same plans: the paper's E / N_i(E) unnormalised (counted here from
the plans of a `--reweight none` policy of the same seed), and fineprune's `--reweight cumulative`
(that rule times one factor per epoch that makes the epoch's weights sum to N).

    .venv/bin/python experiments/reweight/bias.py            # 2000 seeds, about 15 s of CPU
    .venv/bin/python experiments/reweight/bias.py --seeds 50 --out /tmp/bias.md   # a quick check
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

from fineprune_cli.pruning import PruneConfig, create

EVERY_EPOCH = dict(window=1, start=0, block=1, count=1)  # random pruning in every epoch
SCHEDULES = {  # name: (policy, settings)
    "random every epoch, f 0.3": ("random", dict(prune_fraction=0.3, **EVERY_EPOCH)),
    "random, its default schedule (every other epoch), f 0.3": ("random", dict(prune_fraction=0.3)),
    "rs2, f 0.3": ("rs2", dict(prune_fraction=0.3)),
    "rs2, f 0.5": ("rs2", dict(prune_fraction=0.5)),
    "rs2, f 0.7": ("rs2", dict(prune_fraction=0.7)),
}


def toy_shares(n: int, d: int, seed: int = 0) -> torch.Tensor:
    """a_i = <g_i, G> / |G|^2 (sum 1) of a linear model's squared-error gradients at a fixed point."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = x @ torch.randn(d, generator=gen, dtype=torch.float64) + 0.5 * torch.randn(
        n, generator=gen, dtype=torch.float64
    )
    theta = torch.randn(d, generator=gen, dtype=torch.float64)  # not the optimum: G is not 0
    grads = (x @ theta - y)[:, None] * x
    full = grads.sum(0)
    return grads @ full / full.dot(full)


def paper_weights(plans: list, n: int) -> list[torch.Tensor | None]:
    """The paper's E / N_i(E) from the plans' kept sets (this epoch counted), from the first epoch
    that leaves a sample out on (None before it: those epochs train unweighted)."""
    count, out, pruned = torch.zeros(n, dtype=torch.float64), [], False
    for t, plan in enumerate(plans, start=1):
        now = torch.zeros(n, dtype=torch.bool)
        now[plan.indices] = True
        count += now
        pruned = pruned or plan.pruned
        out.append(t / count.clamp(min=1) if pruned else None)
    return out


def epoch_ratio(plan, weights: torch.Tensor | None, shares: torch.Tensor) -> float:
    w = torch.ones(len(shares), dtype=torch.float64) if weights is None else weights.double()
    return float((w[plan.indices] * shares[plan.indices]).sum())


def measure(policy: str, settings: dict, shares: torch.Tensor, epochs: int, seeds: int) -> dict:
    """Per epoch: samples trained, and the mean and standard error over seeds of both ratios."""
    n = len(shares)
    rows: dict = {"paper": [[] for _ in range(epochs)], "fineprune": [[] for _ in range(epochs)], "samples": []}
    for seed in range(seeds):
        plain = create(policy, n, PruneConfig(**settings), seed=seed, epochs=epochs)
        ours = create(policy, n, PruneConfig(**settings, reweight="cumulative"), seed=seed, epochs=epochs)
        plans = [plain.plan(e) for e in range(1, epochs + 1)]
        weighted = [ours.plan(e) for e in range(1, epochs + 1)]
        for t, (plan, paper, mine) in enumerate(zip(plans, paper_weights(plans, n), weighted)):
            assert torch.equal(plan.indices, mine.indices)  # the setting changes no selection
            rows["paper"][t].append(epoch_ratio(plan, paper, shares))
            rows["fineprune"][t].append(epoch_ratio(mine, mine.weights, shares))
        if seed == 0:
            rows["samples"] = [p.samples for p in plans]
    return rows


def mean_se(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    var = sum((v - m) ** 2 for v in values) / max(len(values) - 1, 1)
    return m, math.sqrt(var / len(values))


def table(name: str, rows: dict, n: int) -> list[str]:
    lines = [
        f"### {name}",
        "",
        "| epoch | samples trained | t / c (no epoch factor) | fineprune's cumulative |",
        "|---|---|---|---|",
    ]
    for t, samples in enumerate(rows["samples"], start=1):
        cells = [f"{m:.3f} ± {se:.3f}" for m, se in (mean_se(rows[k][t - 1]) for k in ("paper", "fineprune"))]
        lines.append(f"| {t} | {samples} of {n} | {cells[0]} | {cells[1]} |")
    whole = [mean_se([sum(run) / len(run) for run in zip(*rows[k])]) for k in ("paper", "fineprune")]
    lines.append(
        f"| all {len(rows['samples'])} | | {whole[0][0]:.3f} ± {whole[0][1]:.3f} | {whole[1][0]:.3f} ± {whole[1][1]:.3f} |"
    )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--samples", type=int, default=200, help="N of the toy model")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("results/reweight/bias.md"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    began = time.process_time()
    shares = toy_shares(args.samples, 5)
    body = [
        table(name, measure(p, s, shares, args.epochs, args.seeds), args.samples) for name, (p, s) in SCHEDULES.items()
    ]
    command = " ".join(["experiments/reweight/bias.py", *(argv if argv is not None else sys.argv[1:])])
    head = [
        "# `--reweight cumulative`: an epoch's expected weighted gradient ÷ the full one",
        "",
        f"Measured by `.venv/bin/python {command}` ({args.seeds} seeds of each policy, a toy linear",
        f"model of N = {args.samples} samples at one fixed parameter point, {time.process_time() - began:.0f} s of CPU).",
        "Each cell: the mean over seeds of (Σ over the epoch's trained samples of w_i g_i) projected on",
        'the full epoch\'s Σ g_i, over |Σ g_i|², ± its standard error; 1.000 is unbiased. "t / c": the',
        "paper's E / N_i(E) unnormalised (the count including this epoch, as fineprune counts), from the",
        'first epoch that leaves a sample out; "fineprune\'s": `--reweight cumulative`, the same weights',
        "times one factor per epoch that makes the epoch's weights sum to N. Page: docs/choices.md",
        "(Cumulative temporal reweighting).",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(head + [line for block in body for line in block]))
    print(args.out.read_text())


if __name__ == "__main__":
    main()

"""Data-parallel consistency of the loss-scored policies: 2 spawned gloo ranks, each observing
its half of every batch and syncing with an all-reduce sum, end with the scores and plans of
one process that observed the whole batches."""

import os
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from conftest import spawn_ranks
from fineprune_cli.engine.training.world import World, shard_range
from fineprune_cli.pruning import PruneConfig, create

N, BATCH, EPOCHS, SIZE = 60, 8, 5, 2

POLICIES = ["infobatch", "ucb", "egreedy", "kakurenbo"]
CFG = dict(prune_fraction=0.3, infobatch_ratio=0.5, anneal=0.8)  # epoch 5 > 0.8 x 5: full


def _losses(epoch):
    return torch.rand(N, generator=torch.Generator().manual_seed(100 + epoch)) * 3


def _predictions(epoch):
    """kakurenbo's correctness and confidence: drawn per epoch, the same on every rank."""
    gen = torch.Generator().manual_seed(200 + epoch)
    return torch.rand(N, generator=gen) < 0.8, torch.rand(N, generator=gen)


def _order(epoch, keep):
    return keep[torch.randperm(keep.numel(), generator=torch.Generator().manual_seed(epoch))]


def _run(name, rank, size, reduce):
    """Plans and scores of one policy; rank r observes batch[r::size] of every global batch."""
    policy = create(name, N, PruneConfig(**CFG), seed=5, epochs=EPOCHS)
    plans = []
    for epoch in range(1, EPOCHS + 1):
        plan = policy.plan(epoch)
        plans.append((plan.indices.tolist(), None if plan.weights is None else plan.weights.tolist()))
        losses = _losses(epoch)
        right, conf = _predictions(epoch)
        seen = (
            (lambda i, right=right, conf=conf: (right[i], conf[i])) if policy.observes_predictions else (lambda i: ())
        )
        for batch in _order(epoch, plan.indices).split(BATCH):
            mine = batch[rank::size]
            policy.observe(mine, losses[mine], losses[batch].mean(), *seen(mine))
        hidden = policy.refresh(epoch)
        if hidden is not None:  # the end-of-epoch pass: each rank its contiguous share, as the trainer
            lo, hi = shard_range(hidden.numel(), World(rank, size))
            mine = hidden[lo:hi]
            policy.observe(mine, losses[mine] / 2, None, *seen(mine))
        policy.sync(reduce)
    return {"plans": plans, "scores": policy.scores.clone()}


def _rank_main(rank, size, init_file, out_dir):
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=size, timeout=timedelta(seconds=60)
    )

    def reduce(t):
        t = t.clone()
        dist.all_reduce(t)  # sum
        return t

    results = {name: _run(name, rank, size, reduce) for name in POLICIES}
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def _same(a, b):
    return a.dtype == b.dtype and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.slow
def test_two_ranks_end_with_one_process_scores_and_plans(tmp_path):
    ranks = spawn_ranks(_rank_main, SIZE, tmp_path)
    for name in POLICIES:
        single = _run(name, 0, 1, None)
        assert any(len(idx) < N for idx, _ in single["plans"]), name  # it pruned
        assert len(single["plans"][-1][0]) == N, name  # annealed
        for r in ranks:
            assert r[name]["plans"] == single["plans"], name
            assert _same(r[name]["scores"], single["scores"]), name

"""The DataLoader path (issue 14): IndexedDataset, PruningSampler and its data-parallel variant.

Losses here are fixed small integers per (sample, epoch), not a model's: batch sums are then
exact in float32, so a run split over ranks must reproduce one process bit for bit, and any
difference in which batch a sample trained in (or which mean it met) changes the scores."""

import os
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from conftest import spawn_ranks
from fineprune_cli import DistributedPruningSampler, IndexedDataset, PruneConfig, PruningSampler, create_policy

N, BATCH, EPOCHS = 50, 8, 5
# fine prunes every epoch (window 3, start 1, then 0 from the second window); counts reset at epoch 3
FINE = PruneConfig(window=3, start=1, block=1, count=1, prune_fraction=0.3)
INFOBATCH = PruneConfig(infobatch_ratio=0.5)


def _policy(name, n=N):
    return create_policy(name, n, FINE if name == "fine" else INFOBATCH, seed=3, epochs=EPOCHS)


def _losses(idx, epoch):
    return ((idx * 7 + epoch * 3) % 11).float()


def _same(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def _counted(policy):
    """The policy, with the epochs it was asked to plan recorded in policy.planned."""
    plan, policy.planned = policy.plan, []

    def counting(epoch):
        policy.planned.append(epoch)
        return plan(epoch)

    policy.plan = counting
    return policy


def _hand_loop(name, batch=BATCH, seed=0):
    """The README's protocol loop over the order the sampler draws (randperm seeded seed+e-1)."""
    policy = _policy(name)
    for epoch in range(1, EPOCHS + 1):
        plan = policy.plan(epoch)
        perm = torch.randperm(plan.samples, generator=torch.Generator().manual_seed(seed + epoch - 1))
        for idx in plan.indices[perm].split(batch):
            policy.observe(idx, _losses(idx, epoch))
        policy.sync()
    return policy


@pytest.mark.parametrize("name", ["fine", "infobatch"])
def test_loader_loop_trains_each_epochs_plan_and_scores_as_the_protocol_loop(name):
    """Each epoch's batches hold exactly the plan's samples, len(loader) is known before the
    epoch, plan() runs once per epoch (1..n, not 0-based), and the scores equal the protocol
    loop's: a missing or misplaced sync, an off-by-one epoch or a second plan() would not."""
    policy = _counted(_policy(name))
    sampler = PruningSampler(policy)
    loader = DataLoader(IndexedDataset(TensorDataset(torch.arange(N) * 10)), batch_size=BATCH, sampler=sampler)
    sizes = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        steps, seen = len(loader), []
        for idx, x in loader:
            assert torch.equal(x, idx * 10)  # the index is the item's
            sampler.loss(idx, _losses(idx, epoch + 1))
            seen.append(idx)
        assert len(seen) == steps
        seen = torch.cat(seen)
        assert sorted(seen.tolist()) == sorted(sampler.plan.indices.tolist())
        sizes.append(seen.numel())
    sampler.sync()
    assert policy.planned == list(range(1, EPOCHS + 1))
    assert min(sizes) < N  # it pruned
    _same(policy.scores, _hand_loop(name).scores)


def test_iterating_again_without_set_epoch_is_the_next_epoch():
    """A loop that never calls set_epoch still gets a new plan (and a sync) each epoch."""
    policy = _counted(_policy("fine"))
    sampler = PruningSampler(policy)
    orders = []
    for _ in range(3):
        orders.append(list(sampler))
        sampler.loss(torch.tensor(orders[-1]), torch.zeros(len(orders[-1])))
    assert policy.planned == [1, 2, 3] and sampler.epoch == 2
    assert len(set(map(tuple, orders))) == 3
    with pytest.raises(ValueError, match=r"epoch 2 was already iterated.*set_epoch\(3\)"):
        sampler.set_epoch(2)  # trained already: never a silent no-op
    assert policy.planned == [1, 2, 3]
    with pytest.raises(ValueError):
        sampler.set_epoch(1)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # 2 workers, 1 core
def test_workers_and_persistent_workers_see_the_sampler_of_the_main_process():
    """num_workers=2 with persistent workers: batches follow the sampler's order epoch after
    epoch (a sampler copied into the workers would replay epoch 0's plan), and the
    observations reach the main process's policy."""
    policy = _policy("fine")
    sampler = PruningSampler(policy, seed=5)
    data = IndexedDataset(TensorDataset(torch.arange(N).float()))
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=2, persistent_workers=True)
    orders = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        got = []
        for idx, x in loader:
            assert torch.equal(x, idx.float())
            sampler.loss(idx, _losses(idx, epoch + 1))
            got += idx.tolist()
        assert got == sampler.order.tolist()
        orders.append(got)
    sampler.sync()
    assert len(orders[1]) < N and orders[0] != orders[2]
    assert int(policy.scores.sum()) > 0


def test_loss_is_the_weighted_mean_when_the_plan_weights():
    """InfoBatch's plan weights the kept below-mean samples by 1/(1-r): loss() must return that
    weighted mean (a plain mean would silently undo the expectation rescaling), the plain mean
    for unweighted policies, and refuse an already-reduced loss."""
    sampler = PruningSampler(_policy("infobatch"))
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for idx in sampler.order.split(BATCH):
            last = sampler.loss(idx, _losses(idx, epoch + 1))
    weights = sampler.plan.weights
    assert weights is not None and weights.max() == 2.0
    losses = _losses(idx, 2)
    assert torch.allclose(last, (losses * weights[idx]).mean())
    assert not torch.allclose(last, losses.mean())
    plain = PruningSampler(_policy("random"))
    idx = torch.tensor(list(plain)[:BATCH])
    assert torch.allclose(plain.loss(idx, _losses(idx, 1)), _losses(idx, 1).mean())
    with pytest.raises(ValueError, match="reduction='none'"):
        plain.loss(idx, _losses(idx, 1).mean())


@pytest.mark.parametrize("saved", ["after an epoch", "after set_epoch"])
@pytest.mark.parametrize("name", ["fine", "infobatch"])
def test_sampler_and_policy_state_resume_the_same_run(name, saved, tmp_path):
    """Stopped after epoch 2 (or after set_epoch(2), its plan drawn but not trained) and resumed
    in fresh objects from a file, the run yields the same orders and ends with the same scores
    as one that never stopped. Losing the unsynced observations, the epoch, or (second case)
    the already drawn plan would each change them."""

    def train(sampler, epochs):
        orders = []
        for _ in range(epochs):
            order = list(sampler)  # no set_epoch: the sampler moves on itself
            for idx in torch.tensor(order).split(BATCH):
                sampler.loss(idx, _losses(idx, sampler.epoch + 1))
            orders.append(order)
        return orders

    straight = PruningSampler(_policy(name), seed=1)
    expected = train(straight, EPOCHS)
    straight.sync()

    first = PruningSampler(_policy(name), seed=1)
    orders = train(first, 2)
    if saved == "after set_epoch":
        first.set_epoch(2)
    torch.save(first.state_dict(), tmp_path / "state.pt")
    resumed = PruningSampler(_policy(name), seed=1)
    resumed.load_state_dict(torch.load(tmp_path / "state.pt"))
    orders += train(resumed, EPOCHS - 2)
    resumed.sync()
    assert orders == expected
    _same(resumed.policy.scores, straight.policy.scores)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("n", [48, 50, 2])
def test_shards_are_equal_disjoint_and_cover_the_plan(world, n):
    """As DistributedSampler: equal shards; interleaved, they are the padded order (so they are
    disjoint as its positions); the padding repeats the order's first indices and each rank's
    padded slot, if any, is its last."""
    shards = []
    for rank in range(world):
        s = DistributedPruningSampler(create_policy("regular", n), num_replicas=world, rank=rank)
        shards.append((list(s), s.pad_last))
    lengths = {len(shard) for shard, _ in shards}
    assert len(lengths) == 1
    size = lengths.pop()
    assert size == -(-n // world)
    padded = [shards[r][0][i] for i in range(size) for r in range(world)]
    order = padded[:n]
    assert sorted(order) == list(range(n))
    assert padded[n:] == (order * world)[: len(padded) - n]
    assert [pad for _, pad in shards] == [i * world + r >= n for r in range(world) for i in [size - 1]]


def _rank_main(rank, size, init_file, out_dir):
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=size, timeout=timedelta(seconds=60)
    )
    results = {}
    for name in ["fine", "infobatch"]:
        sampler = DistributedPruningSampler(_policy(name))  # rank and world from the group
        loader = DataLoader(IndexedDataset(TensorDataset(torch.zeros(N))), batch_size=BATCH, sampler=sampler)
        shards = []
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            shard = []
            for idx, _ in loader:
                sampler.loss(idx, _losses(idx, epoch + 1))
                shard += idx.tolist()
            shards.append((shard, sampler.plan.indices.tolist()))
        sampler.sync()
        results[name] = {"shards": shards, "scores": sampler.policy.scores.clone()}
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_ranks_take_disjoint_equal_shards_and_score_as_one_process(world, tmp_path):
    """gloo ranks over the same plan: equal shards whose union is the plan, overlapping only in
    the padding; every rank ends with the scores of one process training the global batches
    (BATCH x world, same order). Local batch means, an unreduced sync or observing the padded
    duplicate would each make them differ."""
    ranks = spawn_ranks(_rank_main, world, tmp_path)
    for name in ["fine", "infobatch"]:
        single = _hand_loop(name, batch=BATCH * world)
        for epoch in range(EPOCHS):
            plans = {tuple(r[name]["shards"][epoch][1]) for r in ranks}
            assert len(plans) == 1
            plan = sorted(plans.pop())
            shards = [r[name]["shards"][epoch][0] for r in ranks]
            assert len({len(s) for s in shards}) == 1
            union = [i for s in shards for i in s]
            assert sorted(set(union)) == plan
            assert len(union) - len(plan) == -len(plan) % world  # only the padding repeats
        for r in ranks:
            _same(r[name]["scores"], single.scores)


def test_a_plain_loader_loop_trains_a_model():
    """End to end with a real model: the pruned loop lowers the training loss."""
    torch.manual_seed(0)
    x, y = torch.randn(200, 6), torch.randint(0, 3, (200,))
    model = torch.nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    sampler = PruningSampler(create_policy("fine", 200, FINE, epochs=EPOCHS))
    loader = DataLoader(IndexedDataset(TensorDataset(x, y)), batch_size=32, sampler=sampler)
    before = F.cross_entropy(model(x), y).item()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for idx, xb, yb in loader:
            opt.zero_grad()
            sampler.loss(idx, F.cross_entropy(model(xb), yb, reduction="none")).backward()
            opt.step()
    assert F.cross_entropy(model(x), y).item() < before - 0.05


def _loop(sampler, epochs, first=0, losses=True):
    """The README's loop over a 60-sample set; the samples each epoch trains."""
    loader = DataLoader(IndexedDataset(TensorDataset(torch.randn(60, 2))), batch_size=16, sampler=sampler)
    counts = []
    for epoch in range(first, first + epochs):
        sampler.set_epoch(epoch)
        counts.append(0)
        for idx, _ in loader:
            counts[-1] += idx.numel()
            if losses:
                sampler.loss(idx, torch.rand(idx.numel()))
    return counts


def _pruning_policy():
    from fineprune_cli import PruneConfig, create_policy

    return create_policy("fine", 60, PruneConfig(window=2, start=1, prune_fraction=0.3), epochs=6)


def test_a_loop_resumed_at_the_saved_epoch_is_refused_not_shifted_by_one(tmp_path):
    """A CIFAR script saves after epoch e and resumes at range(e, ...): set_epoch(e) was a no-op
    and the sampler ran one epoch ahead (60/42/60 samples became 42/60/42)."""
    straight = _loop(PruningSampler(_pruning_policy()), 6)
    first = PruningSampler(_pruning_policy())
    _loop(first, 3)
    torch.save(first.state_dict(), tmp_path / "s.pt")
    resumed = PruningSampler(_pruning_policy())
    resumed.load_state_dict(torch.load(tmp_path / "s.pt"))
    with pytest.raises(ValueError, match=r"set_epoch\(2\): epoch 2 was already iterated"):
        _loop(resumed, 3, first=2)
    assert _loop(resumed, 3, first=3) == straight[3:] and len(set(straight)) == 2


def test_a_loader_that_never_hands_the_sampler_its_indices_is_refused():
    """Without IndexedDataset (or without loss()) fine-pruning saw no losses and silently
    pruned at random; a float tensor where the indices belong is refused at once."""
    sampler = PruningSampler(_pruning_policy())
    with pytest.raises(RuntimeError, match="loss\\(\\) never received its samples.*IndexedDataset"):
        _loop(sampler, 2, losses=False)
    sampler = PruningSampler(_pruning_policy())
    _loop(sampler, 1)
    with pytest.raises(TypeError, match="sample indices"):
        sampler.loss(torch.randn(4), torch.rand(4))
    with pytest.raises(ValueError, match="outside \\[0, 60\\)"):
        sampler.loss(torch.tensor([0, 60]), torch.rand(2))
    with pytest.raises(ValueError, match="outside \\[0, 60\\)"):
        sampler.loss(torch.tensor([-1, 0]), torch.rand(2))
    with pytest.raises(ValueError, match="one loss per sample"):  # as many losses, but not 1-D
        sampler.loss(torch.tensor([0, 1]), torch.rand(2, 1))


def test_a_policy_that_scores_nothing_needs_no_losses():
    # regular observes nothing, so a loop that never calls loss() is fine there (it is refused
    # only for a policy that scores losses, above): every sample in each of 3 epochs.
    assert _loop(PruningSampler(create_policy("regular", 60)), 3, losses=False) == [60, 60, 60]


def test_without_a_process_group_the_distributed_sampler_is_one_whole_rank():
    # No process group and no world given: world 1, rank 0, the whole plan (60, 42, 60 as in the
    # resume test above). A world of 1 is accepted (the rank then defaults to 0), 0 is not; the
    # last rank of a world is accepted, one past it is not.
    alone = DistributedPruningSampler(_pruning_policy())
    assert (alone.num_replicas, alone.rank, alone.seed, alone.global_mean) == (1, 0, 0, True)
    assert _loop(alone, 3) == [60, 42, 60]
    assert _loop(DistributedPruningSampler(_pruning_policy(), num_replicas=1), 3) == [60, 42, 60]
    assert DistributedPruningSampler(_pruning_policy(), num_replicas=3, rank=2).rank == 2
    with pytest.raises(ValueError, match="num_replicas must be at least 1, got 0"):
        DistributedPruningSampler(_pruning_policy(), num_replicas=0)
    with pytest.raises(ValueError, match="rank must be between 0 and 2, got 3"):
        DistributedPruningSampler(_pruning_policy(), num_replicas=3, rank=3)


def test_a_ranks_padding_trains_but_is_not_observed_also_after_a_load():
    # 50 samples over 3 ranks (given, no process group: nothing is reduced): the order is padded
    # to 51 with its own first index and rank 2 takes positions 2, 5, ..., 50, 17 indices whose
    # last (position 50, rank 0's first) is the padding. In batches of 4 the fourth batch ends
    # right before it and the fifth is the padding alone: the 16 others are observed, it is not.
    # The same for a sampler loaded from a state saved after set_epoch (its count starts at 0).
    def sampler():
        policy = create_policy("infobatch", 50, INFOBATCH, seed=3, epochs=EPOCHS)
        return DistributedPruningSampler(policy, num_replicas=3, rank=2)

    first = sampler()
    first.set_epoch(0)
    loaded = sampler()
    loaded.load_state_dict(first.state_dict())
    for s in (first, loaded):
        order = list(s)
        assert len(order) == 17
        for idx in torch.tensor(order).split(4):
            s.loss(idx, torch.ones(idx.numel()))
        s.sync()
        assert torch.nonzero(s.policy.seen).flatten().tolist() == sorted(order[:16])


def test_len_before_any_epoch_is_the_first_epochs_plan():
    # len() first enters sampler epoch 0 (the policy's epoch 1: 60 samples), not epoch 1 (42).
    sampler = PruningSampler(_pruning_policy())
    assert len(sampler) == 60 and sampler.epoch == 0 and len(list(sampler)) == 60

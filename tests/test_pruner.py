"""The library API in a plain hand-written PyTorch loop, as a user would write it."""

import torch
import torch.nn.functional as F

from fineprune_cli import Pruner, PruneSchedule


def _toy(n=240, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return x, y


def test_plain_loop_trains_exactly_the_keep_list_and_counts_match_by_hand():
    x, y = _toy()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    schedule = PruneSchedule(window=3, start=1, attenuation=1, block=1, count=1)
    pruner = Pruner(len(y), schedule, prune_fraction=0.25, seed=1)
    expected = torch.zeros(len(y), dtype=torch.int32)
    first_loss = last_loss = None
    for epoch in range(1, 8):
        keep = pruner.begin_epoch(epoch)
        if schedule.resets(epoch):
            expected.zero_()
        if pruner.prunes(epoch):
            assert len(keep) == len(y) - 60
            dropped = sorted(set(range(len(y))) - set(keep.tolist()))
            # every dropped sample has a count >= every kept sample's count
            assert expected[dropped].min() >= expected[keep].max()
        else:
            assert len(keep) == len(y)
        seen = []
        for idx in keep[torch.randperm(len(keep))].split(32):
            losses = F.cross_entropy(model(x[idx]), y[idx], reduction="none")
            opt.zero_grad()
            losses.mean().backward()
            opt.step()
            pruner.update(idx, losses)
            for i, loss in zip(idx.tolist(), losses.tolist()):  # Algorithm 1, one sample at a time
                expected[i] += int(loss > sum(losses.tolist()) / len(idx))
            seen += idx.tolist()
        assert sorted(seen) == sorted(keep.tolist())
        assert torch.equal(pruner.counts, expected)
        epoch_loss = F.cross_entropy(model(x), y).item()
        first_loss = epoch_loss if first_loss is None else first_loss
        last_loss = epoch_loss
    assert [e for e in range(1, 8) if pruner.prunes(e)] == [1, 2, 4, 5, 7]
    assert last_loss < first_loss


def test_prune_fraction_zero_never_prunes():
    pruner = Pruner(50, PruneSchedule(window=2, start=0, attenuation=1, block=1, count=1), 0.0)
    assert all(len(pruner.begin_epoch(e)) == 50 for e in range(1, 6))
    assert not any(pruner.prunes(e) for e in range(1, 6))  # the schedule's epochs, but m = 0


def test_begin_epoch_folds_the_last_epochs_observations_in_before_it_plans():
    # Epoch 1 trains all 10 (position 1 < start 2) and gives samples 7, 8, 9 the only counts;
    # epoch 2 prunes m = 3: exactly those. Nothing that syncs (`counts`, `state_dict`) is read
    # between the epochs, as it is in the loop test above, so a plan made before the sync
    # (from all-zero counts: a seeded random three) is caught here.
    pruner = Pruner(10, PruneSchedule(window=4, start=2, attenuation=1, block=1, count=1), 0.3, seed=0)
    assert len(pruner.begin_epoch(1)) == 10 and not pruner.prunes(1)
    pruner.update(torch.arange(10), (torch.arange(10) >= 7).float())  # mean 0.3
    keep = pruner.begin_epoch(2)
    assert pruner.prunes(2) and set(range(10)) - set(keep.tolist()) == {7, 8, 9}


def test_window_edge_resets_counts():
    pruner = Pruner(4, PruneSchedule(window=3, start=1), 0.5)
    pruner.begin_epoch(2)
    pruner.update(torch.arange(4), torch.tensor([0.0, 0.0, 0.0, 8.0]))
    assert pruner.counts.sum() == 1
    pruner.begin_epoch(3)
    assert pruner.counts.sum() == 0


def test_random_policy_spends_the_same_budget_in_the_same_epochs():
    schedule = PruneSchedule(window=4, start=1, attenuation=1, block=2, count=1)
    fine = Pruner(100, schedule, 0.3, policy="fine", seed=3)
    rand = Pruner(100, schedule, 0.3, policy="random", seed=3)
    for e in range(1, 9):
        assert len(fine.begin_epoch(e)) == len(rand.begin_epoch(e))
        assert fine.prunes(e) == rand.prunes(e)
    assert rand.counts.sum() == 0  # the control ignores losses


def test_selection_is_seeded():
    schedule = PruneSchedule(window=5, start=0, attenuation=1, block=1, count=1)
    a, b, c = (Pruner(100, schedule, 0.2, seed=s) for s in (7, 7, 8))
    ka, kb, kc = a.begin_epoch(1), b.begin_epoch(1), c.begin_epoch(1)
    assert torch.equal(ka, kb) and not torch.equal(ka, kc)


import pytest  # noqa: E402

from fineprune_cli import (
    DistributedPruningSampler,
    PruneConfig,
    PruningSampler,  # noqa: E402
    create_policy,
)

GOOD = create_policy("fine", 10, PruneConfig(window=4, start=1))


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: create_policy("fine", "100"), TypeError, "num_samples must be an integer, got str '100'"),
        (lambda: create_policy("fine", 0), ValueError, "num_samples must be at least 1, got 0"),
        (lambda: create_policy("fine", None), TypeError, "num_samples must be an integer, got NoneType None"),
        # a long value is shown by its first 40 characters: b' and 38 x, then "..."
        (lambda: create_policy(b"x" * 60, 10), TypeError, "got bytes b'" + "x" * 38 + r"\.\.\.$"),
        (lambda: create_policy("fine", True), TypeError, "num_samples must be an integer"),
        (lambda: create_policy("fine", 10, seed=-1), ValueError, "seed must be between 0 and"),
        (lambda: create_policy("fine", 10, seed=1.5), TypeError, "seed must be an integer, got float"),
        (lambda: create_policy("fine", 10, epochs=0), ValueError, "epochs must be at least 1"),
        (lambda: create_policy("fine", 10, {"window": 4}), TypeError, "cfg must be a PruneConfig"),
        (lambda: create_policy("fine", 10, PruneConfig(window=0)), ValueError, "--window must be >= 1, got 0"),
        (lambda: create_policy("fine", 10, device="gpu0"), ValueError, "device must name a torch device"),
        (lambda: create_policy("fine", 10, device=3), TypeError, "device must be a string or torch.device"),
        (lambda: create_policy(3, 10), TypeError, "the policy name must be a string"),
        (lambda: create_policy("oracle", 10), ValueError, "unknown pruning policy 'oracle'"),
        (lambda: PruningSampler("fine"), TypeError, "policy must be a Policy"),
        (lambda: PruningSampler(GOOD, seed="0"), TypeError, "seed must be an integer"),
        (lambda: DistributedPruningSampler(GOOD, num_replicas=0), ValueError, "num_replicas must be at least 1"),
        (lambda: DistributedPruningSampler(GOOD, num_replicas=2, rank=2), ValueError, "rank must be between 0 and 1"),
        (lambda: DistributedPruningSampler(GOOD, num_replicas=2, rank="1"), TypeError, "rank must be an integer"),
        (lambda: DistributedPruningSampler(GOOD, global_mean="yes"), TypeError, "global_mean must be True or False"),
        (lambda: Pruner(10, {"window": 4}), TypeError, "schedule must be a PruneSchedule"),
        (
            lambda: Pruner(10, PruneSchedule(window=4, start=1), prune_fraction="0.3"),
            TypeError,
            "prune_fraction must be a number",
        ),
        (lambda: Pruner(10, PruneSchedule(window=4, start=1), reduce=3), TypeError, "reduce must be a function"),
        (lambda: Pruner(-3, PruneSchedule(window=4, start=1)), ValueError, "num_samples must be at least 1"),
        (
            lambda: Pruner(10, PruneSchedule(window=4, start=1), policy="ucb").prunes(1),
            TypeError,
            "policy 'ucb' chooses from the losses which epochs prune",
        ),
    ],
)
def test_the_library_api_checks_its_arguments_at_the_call_in_one_line(call, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_a_pruner_made_with_the_defaults_leaves_out_30_percent_drawn_with_seed_0():
    # Every epoch prunes: m = round(0.3 x 20) = 6 of 20, the same samples as seed=0 (all counts
    # 0: the seeded order decides), not seed 1's. Before any epoch its epoch is 0, also in its
    # state; a policy without a fixed count (ucb) reports num_pruned 0.
    every = PruneSchedule(window=1, start=0, attenuation=1, block=1, count=1)
    plain, zero, one = Pruner(20, every), Pruner(20, every, seed=0), Pruner(20, every, seed=1)
    assert plain.epoch == 0 and plain.state_dict()["epoch"] == 0 and plain.num_pruned == 6
    keep = plain.begin_epoch(1)
    assert len(keep) == 14 and torch.equal(keep, zero.begin_epoch(1)) and not torch.equal(keep, one.begin_epoch(1))
    assert plain.epoch == 1
    assert Pruner(20, every, policy="ucb").num_pruned == 0

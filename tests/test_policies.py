"""The pruning policies on hand-computed cases: InfoBatch, UCB, epsilon-greedy, `--drop easy`,
`--anneal`, resume, the registry. Each test names the wrong code it catches."""

import io
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, PruneSchedule, create, get, list_policies
from fineprune_cli.pruning.estimate import estimate
from fineprune_cli.pruning.policy import global_mean, random_equal_note
from fineprune_cli.settings import check_section
from policy_table import ANNEALING, POLICIES, PRUNING, names, predictions_for

EVERY_EPOCH = dict(window=1, start=0, block=1, count=1, attenuation=1.0)  # fine/random prune always


def losses_of(epoch, n):
    return torch.rand(n, generator=torch.Generator().manual_seed(1000 + epoch)) * 3


def feed(policy, epochs, first=1, batch=7):
    """plan, observe every trained sample in shuffled batches, sync: the plans of `epochs`."""
    plans = []
    for epoch in range(first, first + epochs):
        plan = policy.plan(epoch)
        plans.append(plan)
        losses = losses_of(epoch, policy.num_samples)
        order = plan.indices[torch.randperm(plan.samples, generator=torch.Generator().manual_seed(epoch))]
        for idx in order.split(batch):
            policy.observe(idx, losses[idx], losses[idx].mean(), **predictions_for(policy.name, idx.numel()))
        policy.sync()
    return plans


def observe_all(policy, losses):
    """One epoch in which samples 0..len(losses)-1 train with these losses."""
    losses = torch.as_tensor(losses, dtype=torch.float32)
    policy.observe(torch.arange(losses.numel()), losses)
    policy.sync()


def same(a, b):
    """Bit-equal tensors, NaN (a never-seen sample's score) equal to NaN."""
    return a.dtype == b.dtype and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


def left_out(plan, n):
    keep = torch.zeros(n, dtype=torch.bool)
    keep[plan.indices] = True
    return set(torch.nonzero(~keep).flatten().tolist())


# --- InfoBatch ---------------------------------------------------------------------------


def test_infobatch_prunes_only_below_mean_and_weights_the_rest_by_one_over_one_minus_r():
    # Seen losses sum to 24 over 12 samples: mean 2. W = {0, 1, 2, 3, 10} (below 2); 8 and 9
    # sit exactly at the mean; 12 and 13 are never seen. r = 0.25: floor(1.25) = 1 sits out.
    # Catches: '<=' (8, 9 candidates), weight 1/r (4.0) instead of 1/(1-r), unseen samples in
    # the mean as 0 (mean 24/14: 10 no longer below) or pruned, r applied to N (3 out).
    ib = create("infobatch", 14, PruneConfig(infobatch_ratio=0.25), seed=3, epochs=40)
    observe_all(ib, [1, 1, 1, 1, 3, 3, 3, 3, 2, 2, 1.75, 2.25])
    below = {0, 1, 2, 3, 10}
    outs = set()
    for epoch in range(2, 30):
        plan = ib.plan(epoch)
        out = left_out(plan, 14)
        assert len(out) == 1 and out <= below
        outs |= out
        w = plan.weights
        assert plan.pruned and w.dtype == torch.float32 and w.shape == (14,)
        assert all(w[i] == torch.tensor(1 / 0.75) for i in below - out)
        assert all(w[i] == 1 for i in set(range(14)) - below)
    assert outs == below  # a random one, not always the same


def test_infobatch_without_rescaling_leaves_out_the_same_samples_with_weight_one():
    # The ablation changes the weights only: same generator, same scores, so the same sample
    # sits out as with rescaling; catches a rescale flag that also changes who is pruned, or
    # that still weights the kept below-mean samples by 1/(1-r).
    losses = [1, 1, 1, 1, 3, 3, 3, 3, 2, 2, 1.75, 2.25]
    on = create("infobatch", 14, PruneConfig(infobatch_ratio=0.25), seed=3, epochs=40)
    off = create("infobatch", 14, PruneConfig(infobatch_ratio=0.25, infobatch_rescale=False), seed=3, epochs=40)
    observe_all(on, losses)
    observe_all(off, losses)
    for epoch in range(2, 6):
        with_weights, plain = on.plan(epoch), off.plan(epoch)
        assert torch.equal(with_weights.indices, plain.indices) and plain.pruned
        assert with_weights.weights is not None and plain.weights is None


def test_infobatch_first_epoch_trains_everything_and_sat_out_samples_keep_their_score():
    # Catches: pruning before anything is seen; scores of samples that sat out overwritten
    # (e.g. by 0) or averaged instead of the latest loss.
    ib = create("infobatch", 4, PruneConfig(infobatch_ratio=0.5), seed=0, epochs=10)
    plan = ib.plan(1)
    assert plan.samples == 4 and not plan.pruned and plan.weights is None
    assert torch.isnan(ib.scores).all()
    observe_all(ib, [1.0, 2.0, 7.0, 8.0])  # mean 4.5: W = {0, 1}, one sits out
    out = left_out(ib.plan(2), 4)
    assert len(out) == 1 and out <= {0, 1}
    trained = torch.tensor(sorted({0, 1, 2, 3} - out))
    ib.observe(trained, torch.full((3,), 5.0))
    ib.sync()
    expected = torch.full((4,), 5.0)
    expected[list(out)] = float(list(out)[0] + 1)  # its loss from epoch 1
    assert torch.equal(ib.scores, expected)


def test_infobatch_anneals_after_delta_n_by_default():
    # n = 10, delta 0.875: epochs <= 8.75 prune, 9 and 10 train all with weight None.
    # Catches: e < δ·n, rounding δ·n up, weights kept after annealing, no default δ.
    ib = create("infobatch", 30, PruneConfig(), seed=1, epochs=10)
    plans = feed(ib, 10)
    assert [p.pruned for p in plans] == [False] + [True] * 7 + [False, False]
    assert all(p.samples == 30 and p.weights is None for p in plans[8:])
    ib8 = create("infobatch", 30, PruneConfig(), seed=1, epochs=8)  # δ·n = 7 exactly
    assert [p.pruned for p in feed(ib8, 8)] == [False] + [True] * 6 + [False]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 10, width=32), min_size=1, max_size=40), st.floats(0, 0.9), st.integers(0, 9))
def test_infobatch_never_trains_fewer_than_its_budget(losses, r, seed):
    # Catches InfoBatch's own rounding (keep int((1 - r)|W|)): |W| = 3, r = 0.5 keeps 1 < 1.5.
    n = len(losses)
    ib = create("infobatch", n, PruneConfig(infobatch_ratio=r), seed=seed, epochs=10)
    observe_all(ib, losses)
    t = torch.tensor(losses, dtype=torch.float32)
    below = set(torch.nonzero(t < t.mean()).flatten().tolist())
    out = left_out(ib.plan(2), n)
    assert out <= below and len(out) == math.floor(r * len(below) + 1e-9)
    assert n - len(out) >= n - r * len(below)


# --- UCB and epsilon-greedy ----------------------------------------------------------------


def test_running_mean_and_variance_are_exponentially_weighted():
    # w = 0.3, losses 1 then 5: d = 4, mean = 1 + 0.3 x 4 = 2.2, var = 0.7 x (0.3 x 16) = 3.36;
    # a third loss 2.2 leaves the mean and shrinks var to 0.7 x 3.36.
    # Catches: Welford (equal weights), var from the new mean, a first mean started at 0.
    ucb = create("ucb", 1, PruneConfig(ema_weight=0.3))
    for x in (1.0, 5.0):
        observe_all(ucb, [x])
    assert torch.allclose(ucb.mean, torch.tensor([2.2]))
    assert torch.allclose(ucb.var, torch.tensor([3.36]))
    observe_all(ucb, [2.2])
    assert torch.allclose(ucb.var, torch.tensor([0.7 * 3.36]))


def test_ucb_keeps_the_highest_mean_plus_c_std_and_unseen_first():
    # w = 0.5 over two epochs. sample 0: 1, 5 -> mean 3, var 0.5 x (0.5 x 16) = 4, std 2;
    # 1: 3.5, 3.5; 2: 4, 4; 3: 0.5, 0.5; 4 never seen. Bounds (c = 1): 5, 3.5, 4, 0.5, +inf.
    # k = 5 - round(0.4 x 5) = 3: {4, 0, 2}. By mean alone (c = 0): {4, 2, 1}.
    # Catches: mean + c·var (7), sample variance (std 2.83), unseen not first, c ignored.
    nan = float("nan")
    for c, kept, bounds in [(1.0, [0, 2, 4], [5, 3.5, 4, 0.5, nan]), (0.0, [1, 2, 4], [3, 3.5, 4, 0.5, nan])]:
        ucb = create("ucb", 5, PruneConfig(prune_fraction=0.4, ucb_c=c, ema_weight=0.5), seed=2)
        for epoch_losses in ([1, 3.5, 4, 0.5], [5, 3.5, 4, 0.5]):
            observe_all(ucb, epoch_losses)
        plan = ucb.plan(3)
        assert plan.indices.tolist() == kept and plan.pruned and plan.weights is None
        assert same(ucb.scores, torch.tensor(bounds))


def test_egreedy_keeps_top_means_plus_an_epsilon_share_of_the_budget_at_random():
    # N = 100, mean loss = index; k = 50, epsilon 0.2: the 40 highest (60-99) always, and
    # 10 drawn from 0-59. Catches: epsilon x N drawn, the draw overlapping the greedy part
    # (fewer than k distinct), no randomness, epsilon ignored.
    eg = create("egreedy", 100, PruneConfig(prune_fraction=0.5, epsilon=0.2), seed=4)
    observe_all(eg, torch.arange(100.0))
    draws = set()
    for epoch in range(1, 6):
        kept = set(eg.plan(epoch).indices.tolist())
        assert len(kept) == 50 and set(range(60, 100)) <= kept
        draws |= kept - set(range(60, 100))
    assert len(draws) > 10 and draws <= set(range(60))
    odd = create("egreedy", 100, PruneConfig(prune_fraction=0.5, epsilon=0.07), seed=4)
    observe_all(odd, torch.arange(100.0))  # round(0.07 x 50) = round(3.5) = 4 drawn: the top 46 always,
    plans = [set(odd.plan(e).indices.tolist()) for e in range(1, 11)]  # not the top 47 (int() draws 3)
    assert all(set(range(54, 100)) <= kept for kept in plans) and any(53 not in kept for kept in plans)
    greedy = create("egreedy", 100, PruneConfig(prune_fraction=0.5, epsilon=0.0), seed=4)
    observe_all(greedy, torch.arange(100.0))
    assert greedy.plan(1).indices.tolist() == list(range(50, 100))


@pytest.mark.parametrize("name", ["ucb", "egreedy"])
def test_bandits_prune_every_epoch_at_exactly_the_budget(name):
    # Catches: a schedule applied to them, the budget rounded differently, epoch 1 unpruned.
    plans = feed(create(name, 37, PruneConfig(prune_fraction=0.3), seed=5), 5)
    assert [p.samples for p in plans] == [37 - round(0.3 * 37)] * 5 and all(p.pruned for p in plans)


# --- fine: --drop ---------------------------------------------------------------------------


@pytest.mark.parametrize("drop, out", [("hard", {7, 8, 9}), ("easy", {0, 1, 2})])
def test_fine_drop_hard_leaves_out_the_highest_counts_easy_the_lowest(drop, out):
    # Epoch 1 gives DroppingCount i to sample i (batch t: samples i >= t score 1, above the mean);
    # epoch 2 prunes m = 3. Catches: --drop ignored or the directions swapped.
    cfg = PruneConfig(window=4, start=2, block=1, count=1, attenuation=1.0, prune_fraction=0.3, drop=drop)
    fine = create("fine", 10, cfg, seed=0)
    assert not fine.plan(1).pruned
    for t in range(1, 10):
        fine.observe(torch.arange(10), (torch.arange(10) >= t).float())
    fine.sync()
    assert torch.equal(fine.scores, torch.arange(10, dtype=torch.int32))
    assert left_out(fine.plan(2), 10) == out


@pytest.mark.parametrize("window, start, same_as_random", [(1, 0, True), (3, 1, False)])
def test_fine_at_a_windows_first_epoch_selects_as_its_random_control(window, start, same_as_random):
    # Epoch 1 gives DroppingCount i to sample i; epoch 2 prunes m = 3. With window 1 (a_k = 0)
    # epoch 2 is a window's first epoch (p = 0): Algorithm 1 has just reset the counts, all are
    # equal, and the seeded order picks what the random control picks (README, "Choices": reset,
    # then select). With window 3 epoch 2 is p = 2 and the counts decide ({7, 8, 9}).
    # Catches: the reset done after the selection (epoch 1's counts leaking into p = 0), or no reset.
    cfg = PruneConfig(window=window, start=start, block=2, count=1, attenuation=1.0, prune_fraction=0.3)
    fine, control = create("fine", 10, cfg, seed=4), create("random", 10, cfg, seed=4)
    assert not fine.plan(1).pruned and not control.plan(1).pruned
    for t in range(1, 10):
        fine.observe(torch.arange(10), (torch.arange(10) >= t).float())
    fine.sync()
    chosen, random_chosen = left_out(fine.plan(2), 10), left_out(control.plan(2), 10)
    assert len(chosen) == len(random_chosen) == 3
    assert (chosen == random_chosen) is same_as_random
    assert same_as_random or chosen == {7, 8, 9}


# --- fine and random: which epochs prune, and how many samples --------------------------------


@pytest.mark.parametrize("name", ["fine", "random"])
def test_planned_samples_is_the_plans_exact_count_in_every_epoch(name):
    # window 4, start 2, block 1: epochs 2, 3, 6, 7 on the schedule; --anneal 0.75 of 8 stops
    # after epoch 6. m = round(0.3 x 10) = 3. Catches: planned_samples off by one or N in a
    # pruning epoch, or asking the schedule without --anneal (7 planned for epoch 7).
    cfg = PruneConfig(window=4, start=2, block=1, count=1, attenuation=1.0, prune_fraction=0.3, anneal=0.75)
    policy = create(name, 10, cfg, seed=1, epochs=8)
    plans = [policy.plan(e) for e in range(1, 9)]
    assert [policy.planned_samples(e) for e in range(1, 9)] == [10, 7, 7, 10, 10, 7, 10, 10]
    assert [p.samples for p in plans] == [policy.planned_samples(e) for e in range(1, 9)]
    assert [p.pruned for p in plans] == [policy.prunes(e) for e in range(1, 9)]


@pytest.mark.parametrize("n, fraction, m", [(4, 0.375, 2), (4, 0.625, 2), (4, 0.75, 3), (8, 0.0625, 0), (4, 0.25, 1)])
@pytest.mark.parametrize("name", ["fine", "random", "ucb"])
def test_the_prune_count_is_fraction_times_n_rounded_half_to_even(name, n, fraction, m):
    # m = round(f x N), Python's round: 1.5 -> 2, 2.5 -> 2, 0.5 -> 0 (no epoch prunes then).
    # Catches: int()/floor (1.5 -> 1), ceil or half-up (2.5 -> 3, 0.5 -> 1), and a refusal
    # that starts one early (3 of 4 is allowed: 0.75 is what the refusal below suggests), and an
    # epoch with m = 1 taken for one that leaves nothing out (`m > 1`).
    plan = create(name, n, PruneConfig(prune_fraction=fraction, **EVERY_EPOCH), seed=0).plan(1)
    assert plan.samples == n - m and plan.pruned == (m > 0)


@pytest.mark.parametrize("name", ["fine", "random", "ucb"])
def test_a_prune_count_that_rounds_to_every_sample_is_refused(name):
    # 0.875 x 4 = 3.5 rounds to 4 = N: an epoch without samples. Catches `m > N` for `m >= N`.
    with pytest.raises(
        ConfigError, match="--prune-fraction 0.875 leaves none of the 4 training samples; use at most 0.75"
    ):
        create(name, 4, PruneConfig(prune_fraction=0.875, **EVERY_EPOCH))


def test_the_global_batch_mean_is_the_summed_losses_over_the_summed_counts():
    # This rank: 3 samples, loss sum 6; the other: 1 sample, loss 4. Mean of the whole batch
    # 10 / 4 = 2.5. Catches the mean of the ranks' means ((2 + 4) / 2 = 3) or a sum of one part.
    other = torch.tensor([4.0, 1.0])
    mean = global_mean(torch.tensor(6.0), 3, lambda t: t + other)
    assert mean.item() == 2.5 and mean.shape == ()


def test_fine_load_state_dict_drops_what_was_observed_before_the_load():
    # The target has observed a step that was never synced; after the load its next sync must
    # add nothing to the saved DroppingCount. Catches a load that keeps that pending step
    # (the round-trip test below cannot see it: fine's window resets before it compares).
    cfg = PruneConfig(window=4, start=2, block=1, count=1, attenuation=1.0)
    saved = create("fine", 4, cfg, seed=0)
    observe_all(saved, [0.0, 0.0, 0.0, 8.0])
    target = create("fine", 4, cfg, seed=0)
    target.observe(torch.arange(4), torch.tensor([5.0, 5.0, 0.0, 0.0]))
    target.load_state_dict(saved.state_dict())
    target.sync()
    assert target.scores.tolist() == [0, 0, 0, 1]


# --- every policy: --anneal, resume, DDP folding ---------------------------------------------


@pytest.mark.parametrize("name", ANNEALING)
def test_anneal_stops_pruning_after_delta_n_for_every_policy(name):
    # δ = 0.5, n = 7: epochs <= 3.5 may prune; 4-7 train everything with weight 1.
    # Catches: --anneal not applied by a policy (fine/random through the schedule).
    policy = create(name, 40, PruneConfig(anneal=0.5, **EVERY_EPOCH), seed=6, epochs=7)
    plans = feed(policy, 7)
    assert [p.pruned for p in plans][1:] == [True, True, False, False, False, False]
    assert all(p.samples == 40 and p.weights is None for p in plans[3:])


@pytest.mark.parametrize("name", ANNEALING)
def test_an_annealed_epoch_is_planned_as_every_sample(name):
    """planned_samples (what --lr-schedule progress counts on) of epochs past δ·n is N for every
    policy, and where a policy knows a pruning epoch's count in advance it is what the plan trains."""
    policy = create(name, 40, PruneConfig(anneal=0.5, **EVERY_EPOCH), seed=6, epochs=7)
    plans = feed(policy, 7)
    assert [policy.planned_samples(e) for e in range(4, 8)] == [40] * 4
    known = [(policy.planned_samples(e), plans[e - 1].samples) for e in (2, 3)]
    assert all(n is None or n == samples < 40 for n, samples in known), known


def test_anneal_needs_the_run_length_unless_it_never_stops():
    # Catches: annealing silently skipped when epochs is unknown.
    with pytest.raises(ConfigError, match="--anneal"):
        create("ucb", 10, PruneConfig(anneal=0.5))
    with pytest.raises(ConfigError, match="--anneal 0.875"):
        create("infobatch", 10)  # its default δ
    assert create("infobatch", 10, PruneConfig(anneal=1.0)).last_pruning_epoch is None


def test_estimate_counts_no_pruning_epoch_after_the_annealing_epoch():
    # The paper's schedule over 200 epochs, δ = 0.875: the last pruning epoch is 174 <= 175.
    # Catches: the estimate of a `fine` run ignoring --anneal.
    full = estimate(PruneSchedule(), 200, 0.3)
    annealed = estimate(PruneSchedule(), 200, 0.3, anneal=0.875)
    assert annealed.pruning_epochs == [e for e in full.pruning_epochs if e <= 175]
    assert max(full.pruning_epochs) > 175 and annealed.saving_percent < full.saving_percent


@pytest.mark.parametrize("name", ["regular", *PRUNING])
def test_state_dict_round_trip_continues_bit_exactly(name):
    # A policy restored mid-run plans exactly what the uninterrupted one plans.
    # Catches: generator state or a score tensor (e.g. var) left out of the state, pending
    # observations leaking across a load.
    cfg = PruneConfig(window=3, start=1, block=1, count=1, attenuation=1.0)
    whole = create(name, 50, cfg, seed=7, epochs=9)
    expected = feed(whole, 9)
    first = create(name, 50, cfg, seed=7, epochs=9)
    feed(first, 4)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    resumed = create(name, 50, cfg, seed=123, epochs=9)  # another seed: the state must win
    resumed.observe(torch.arange(3), torch.ones(3), **predictions_for(name, 3))  # stale pending, to be dropped
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    for a, b in zip(expected[4:], feed(resumed, 5, first=5)):
        assert torch.equal(a.indices, b.indices) and a.pruned == b.pruned
        assert (a.weights is None) == (b.weights is None)
        assert a.weights is None or torch.equal(a.weights, b.weights)
    if whole.scores is not None:
        assert same(resumed.scores, whole.scores)


@pytest.mark.parametrize("name", [n for n in PRUNING if not POLICIES[n].batch_mean])
def test_pending_observations_sum_over_ranks_to_one_process(name):
    # Two 'ranks' in one process observe halves of each batch; their pending tensors summed
    # and folded give one process's scores and plans. (The spawned version, where fine-pruning's
    # batch means are all-reduced first: test_policies_ddp.) Catches pending that is no sum: e.g.
    # the latest loss with NaN where unobserved (x + NaN), or the folded scores themselves
    # (doubled by the sum).
    cfg, epochs = PruneConfig(anneal=0.9), POLICIES[name].first_epoch + 3
    ranks = [create(name, 24, cfg, seed=8, epochs=epochs) for _ in range(2)]
    single = create(name, 24, cfg, seed=8, epochs=epochs)
    extra = predictions_for(name, 24)
    for epoch in range(1, epochs + 1):
        plans = [p.plan(epoch) for p in [single, *ranks]]
        assert all(torch.equal(plans[0].indices, p.indices) for p in plans)
        losses = losses_of(epoch, 24)
        for idx in plans[0].indices.split(6):
            single.observe(idx, losses[idx], **{k: v[idx] for k, v in extra.items()})
            for r, p in enumerate(ranks):
                part = idx[r::2]
                p.observe(part, losses[part], **{k: v[part] for k, v in extra.items()})
        single.sync()
        pending = [p.take_pending() for p in ranks]
        for p in ranks:
            p.fold([a + b for a, b in zip(*pending)])
        for p in ranks:
            assert (p.scores is None) == (single.scores is None)
            assert p.scores is None or same(p.scores, single.scores)


# --- registry and settings ------------------------------------------------------------------


def test_registry_lists_every_policy_with_label_and_colour():
    # Catches: a module that does not register, a missing label, colours shared in plots.
    names = list_policies()
    assert names == [
        "regular", "fine", "random", "infobatch", "ucb", "egreedy", "kakurenbo", "rs2", "seta", "orderdp", "ies",
        "selective-backprop",
    ]  # fmt: skip
    classes = [get(n) for n in names]
    assert all(c.label and c.help and re.fullmatch(r"#[0-9a-f]{6}", c.color) for c in classes)
    assert len({c.color for c in classes}) == len(classes)
    assert get("none") is get("regular")


def test_policies_keep_their_state_in_setup_not_in_a_constructor_of_their_own():
    """The base constructor is the only one; a policy's own state comes from `setup()`, made
    once the base attributes exist (a policy that restated the constructor would show here)."""
    from fineprune_cli.pruning.policy import Policy

    for name in list_policies():
        kind = get(name)
        assert all("__init__" not in vars(c) for c in kind.__mro__ if c is not Policy and c is not object), name
    fine = create("fine", 10, PruneConfig(window=2, start=0, prune_fraction=0.3))
    assert fine.num_pruned == 3 and fine.dropping_count.shape == (10,) and fine.pending.counts.shape == (10,)


@pytest.mark.parametrize(
    "field, bad",
    [
        ("anneal", 1.5),
        ("drop", "medium"),
        ("infobatch_ratio", 0.95),
        ("ucb_c", -1.0),
        ("epsilon", 1.5),
        ("ema_weight", 0.0),
        ("kakurenbo_tau", 1.5),
        ("attenuation", 0.5),  # at least 1
        ("count", 0),  # at least 1
        ("block", 0),  # at least 1 (the count check would name block too: the whole message below)
        ("anneal", 0.0),  # in (0, 1]
        ("ema_weight", 1.5),  # in (0, 1]
        ("orderdp_subset", 0.0),  # in (0, 1]
        ("orderdp_subset", 1.5),
        ("reweight", "uniform"),  # none or cumulative
    ],
)
def test_new_settings_are_checked(field, bad):
    # Catches: a field declared without its check (or choices).
    with pytest.raises(ConfigError, match=f"^--{field.replace('_', '-')} must"):
        check_section(PruneConfig(**{field: bad}), "prune.")
    check_section(PruneConfig(), "prune.")
    # each range's closed end is allowed: 1 = the latest loss only, 1 = no annealing
    check_section(PruneConfig(ema_weight=1.0, anneal=1.0, attenuation=1.0, count=1, block=1), "prune.")
    check_section(PruneConfig(kakurenbo_tau=1.0, epsilon=1.0, infobatch_ratio=0.9), "prune.")


# --- the default schedule scales with the run; a run that cannot prune is refused ---------


def test_create_policy_scales_the_default_schedule_to_its_epochs():
    """The issue's case: PruneConfig() with epochs=10 used to keep window 60, start 30 and
    never prune; now window 3, start 2 prune epochs 2, 4, 6, 8, 10."""
    policy = create("fine", 1000, PruneConfig(), epochs=10)
    assert [e for e in range(1, 11) if policy.plan(e).pruned] == [2, 4, 6, 8, 10]
    cfg = PruneConfig()
    create("random", 1000, cfg, epochs=10)
    assert cfg.window is None and cfg.start is None  # the caller's object is not filled in


@pytest.mark.parametrize(
    "name, cfg, epochs, words",
    [
        ("fine", PruneConfig(window=60, start=30), 10, "fine prunes no epoch of 10: window 60 with start 30"),
        ("random", PruneConfig(window=60, start=30), 29, "first prunes epoch 30"),
        ("fine", PruneConfig(window=10, start=9, attenuation=1.0), 50, "never meets an epoch"),
        ("fine", PruneConfig(anneal=0.1), 10, "--anneal 0.1 stops pruning after epoch 1, before the schedule's first"),
        ("infobatch", PruneConfig(), 1, "first epoch that can leave samples out is epoch 2"),
        ("infobatch", PruneConfig(anneal=0.15), 10, "--anneal 0.15 stops pruning after epoch 1"),
        ("ucb", PruneConfig(anneal=0.05), 10, "stops pruning after epoch 0"),
        # the schedule's first pruning epoch 30 is the run's last, but --anneal 0.5 ends at 15
        ("fine", PruneConfig(window=60, start=30, anneal=0.5), 30, "after epoch 15, before the schedule's first"),
        ("kakurenbo", PruneConfig(), 1, "first epoch that can leave samples out is epoch 2"),
        ("kakurenbo", PruneConfig(prune_fraction=0.0), 10, "--prune-fraction 0 hides no sample"),
    ],
)
def test_a_policy_that_prunes_no_epoch_is_refused(name, cfg, epochs, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        create(name, 100, cfg, epochs=epochs)


@pytest.mark.parametrize(
    "name, cfg, epochs",
    [
        ("random", PruneConfig(window=60, start=30), 30),  # the boundary: epoch 30 prunes
        ("fine", PruneConfig(anneal=0.2), 10),  # last epoch 2 is the first pruning one
        ("infobatch", PruneConfig(), 3),  # default anneal 0.875 x 3: epoch 2 is the last
        ("infobatch", PruneConfig(anneal=0.2), 10),  # epoch 2 may prune
        ("ucb", PruneConfig(), 1),  # prunes from epoch 1
        ("egreedy", PruneConfig(anneal=0.1), 10),
        ("random", PruneConfig(window=1, start=0, block=1, count=1, attenuation=1.0), 1),  # a frontier arm
        ("kakurenbo", PruneConfig(), 2),  # epoch 2, its first choice, is the run's last
    ],
)
def test_a_policy_that_prunes_some_epoch_is_accepted(name, cfg, epochs):
    create(name, 100, cfg, epochs=epochs)


def test_default_schedule_without_the_runs_length_is_refused():
    with pytest.raises(ConfigError, match="create the policy with epochs=n, or set window and start"):
        create("fine", 100, PruneConfig())
    for half in (PruneConfig(window=60), PruneConfig(start=30)):  # one of the two unset is enough
        with pytest.raises(ConfigError, match="create the policy with epochs=n, or set window and start"):
            create("random", 100, half)
    create("fine", 100, PruneConfig(window=60, start=30))  # explicit: no length needed
    create("infobatch", 100, PruneConfig(anneal=1.0))  # no schedule to scale


def test_infobatch_on_two_epochs_is_refused_by_its_default_anneal():
    with pytest.raises(ConfigError, match=re.escape("--anneal 0.875 stops pruning after epoch 1")):
        create("infobatch", 100, PruneConfig(), epochs=2)


# --- what a policy declares, its defaults, its snapshots ------------------------------------


def test_what_each_policy_declares_to_the_engine():
    # By hand from each method: whether it observes losses (the trainer and the sampler skip
    # observe() otherwise), needs predictions too (KAKURENBO's correct/confidence), knows its
    # budget before the run (the dry run's estimate, the report's budget), scales a pruned
    # epoch's lr by default (KAKURENBO), its default --anneal (InfoBatch's 0.875), and whether it
    # chooses rows inside each step (Selective-Backprop). Catches a flag flipped in a base class
    # (Policy, LossScored) or in one policy.
    flags = {
        name: (
            kind.observes,
            kind.observes_predictions,
            kind.budget_before_run,
            kind.scales_lr,
            kind.default_anneal,
            kind.selects_batches,
        )
        for name in list_policies()
        for kind in [get(name)]
    }
    assert flags == {
        "regular": (False, False, True, False, None, False),
        "fine": (True, False, True, False, None, False),
        "random": (False, False, True, False, None, False),
        "infobatch": (True, False, False, False, 0.875, False),
        "ucb": (True, False, False, False, None, False),
        "egreedy": (True, False, False, False, None, False),
        "kakurenbo": (True, True, False, True, None, False),
        "rs2": (False, False, False, False, None, False),
        "orderdp": (True, False, False, False, None, False),
        "seta": (True, False, False, False, 0.875, False),
        "ies": (True, False, False, False, None, False),
        "selective-backprop": (False, False, False, False, None, True),
    }


def _tied_plans(policy):
    """Epochs 2 and 3 after an epoch 1 whose scores tie (infobatch: half below the mean, of
    which a random half sits out), so that the seed alone decides who is left out."""
    n = policy.num_samples
    policy.plan(1)
    losses = torch.tensor([0.0, 2.0]).repeat_interleave(n // 2) if policy.name == "infobatch" else torch.ones(n)
    policy.observe(torch.arange(n), losses, **predictions_for(policy.name, n))
    policy.sync()
    return [policy.plan(e).indices.tolist() for e in (2, 3)]


@pytest.mark.parametrize("name", names(seeded=True, selects_batches=False))
def test_a_policy_made_without_a_seed_is_seed_0(name):
    # create() and every policy class default to seed 0: made without a seed, a policy holds
    # seed 0's generator and leaves out the same samples, which seed 1 would not.
    cfg = PruneConfig(prune_fraction=0.5, **EVERY_EPOCH)
    made = [create(name, 20, cfg, epochs=6), get(name)(20, cfg, epochs=6)]
    zero, one = create(name, 20, cfg, seed=0, epochs=6), create(name, 20, cfg, seed=1, epochs=6)
    assert all(torch.equal(p.generator.get_state(), zero.generator.get_state()) for p in made)
    if name != "regular":
        expected = _tied_plans(zero)
        assert expected != _tied_plans(one)
        assert all(_tied_plans(p) == expected for p in made)


def test_scores_are_snapshot_after_each_window_or_once_after_the_last_epoch():
    # fine, window 3 over 7 epochs: windows end after epochs 2 (3 resets), 5 (6 resets) and 7
    # (the run's end): windows 0, 1, 2. A whole-run policy saves one 'window', 0, after epoch 7.
    fine = create("fine", 10, PruneConfig(window=3, start=1), epochs=7)
    assert [fine.snapshot_due(e, 7) for e in range(1, 8)] == [None, 0, None, None, 1, None, 2]
    for name in ("infobatch", "ucb", "kakurenbo"):
        policy = create(name, 10, PruneConfig(anneal=1.0), epochs=7)
        assert [policy.snapshot_due(e, 7) for e in range(1, 8)] == [None] * 6 + [0], name
    assert all(create("regular", 10).snapshot_due(e, 7) is None for e in range(1, 8))


def test_infobatch_with_no_sample_to_leave_out_trains_plainly():
    # Losses 0, 3, 3 (mean 2): W = {0}. r = 0.5 leaves out floor(0.5) = 0, so the epoch trains
    # all 3 and is not a pruned one; r = 0 is plain training, without weights (None, not ones).
    half = create("infobatch", 3, PruneConfig(infobatch_ratio=0.5), seed=0, epochs=10)
    observe_all(half, [0.0, 3.0, 3.0])
    plan = half.plan(2)
    assert plan.samples == 3 and not plan.pruned
    zero = create("infobatch", 3, PruneConfig(infobatch_ratio=0.0), seed=0, epochs=10)
    observe_all(zero, [0.0, 3.0, 3.0])
    plan = zero.plan(2)
    assert plan.samples == 3 and not plan.pruned and plan.weights is None


def test_a_start_at_the_window_is_refused_and_only_a_known_length_fills_the_defaults():
    # start = window is one past the last position (start must be in [0, window)). resolve(n)
    # fills window and start only for n >= 1: 1 epoch gives window 1, start 0; 0 or None none.
    with pytest.raises(ConfigError, match=re.escape("--start must be in [0, window=5), got 5")):
        check_section(PruneConfig(window=5, start=5), "prune.")
    filled = [(c.window, c.start) for c in (PruneConfig().resolve(n) for n in (1, 0, None))]
    assert filled == [(1, 0), (None, None), (None, None)]


# --- fine: random-equal epochs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule, pruning, equal",
    [
        # a = 2, 1, 0: window 2 opens at p = 0 (epoch 8, right after its reset: counts; 9: does not),
        # and window 3's first epoch 12 too
        (dict(window=4, start=2, attenuation=2.0), [2, 3, 5, 6, 7, 8, 9, 10, 11, 12], [8, 12]),
        (dict(window=4, start=2, attenuation=1.0), [2, 3, 6, 7, 10, 11], []),  # a stays 2: never p = 0
        (dict(window=4, start=2, attenuation=2.0, block=2), [2, 6, 8, 10, 12], [8, 12]),
        (dict(window=4, start=1, attenuation=1.0), [1, 2, 3, 5, 6, 7, 9, 10, 11], [1]),  # the run's first epoch
        (dict(window=3, start=1, attenuation=2.0), list(range(1, 13)), [1, 3, 6, 9, 12]),
        (dict(window=3, start=1, attenuation=2.0, block=2), [2, 4, 6, 8, 10, 12], [6, 12]),  # block drops 1, 3, 9
    ],
)
def test_fines_random_equal_epochs_are_its_pruning_epochs_with_empty_counts(schedule, pruning, equal):
    # Catches: epoch 1 forgotten, the pruning epoch after a reset counted, or a schedule that never
    # prunes at p = 0 given random-equal epochs; the random control and regular have none.
    s = PruneSchedule(**{"block": 1, "count": 1, **schedule})
    assert s.pruning_epochs(12) == pruning
    assert get("fine").random_equal_epochs(s.window, pruning) == equal
    assert get("random").random_equal_epochs(s.window, pruning) == get("regular").random_equal_epochs(1, [2]) == []


def test_fine_leaves_out_what_its_random_control_does_exactly_in_its_random_equal_epochs():
    # a = 1, 0 with window 3: every epoch prunes; epoch 1 has counted nothing, 3 and 6 open windows.
    # Each epoch gives sample i DroppingCount i (distinct), so wherever the counts are not empty fine
    # leaves out {14..19}. Catches: a random-equal epoch that is not (or one missed): the claim the
    # dry run and report make, that fine and random of one seed leave out the same samples there.
    cfg = PruneConfig(window=3, start=1, attenuation=2.0, block=1, count=1, prune_fraction=0.3)
    fine, control = create("fine", 20, cfg, seed=3, epochs=6), create("random", 20, cfg, seed=3, epochs=6)
    same = []
    for epoch in range(1, 7):
        mine, theirs = left_out(fine.plan(epoch), 20), left_out(control.plan(epoch), 20)
        assert len(mine) == len(theirs) == 6
        same += [epoch] if mine == theirs else []
        assert mine == theirs or mine == set(range(14, 20))
        for t in range(1, 20):
            fine.observe(torch.arange(20), (torch.arange(20) >= t).float())
        fine.sync()
    assert same == [1, 3, 6] == get("fine").random_equal_epochs(3, range(1, 7))


def test_a_run_is_named_only_when_every_pruning_epoch_is_random_equal():
    # Catches: a note for a run some of whose pruning epochs choose by the counts (9 epochs: 2, 4 and
    # 8 do, 6 does not), for the random control itself, or one that ignores --anneal (which cuts
    # the run below to its random-equal epoch 1).
    note = random_equal_note("fine", PruneConfig(), 6)
    assert note.startswith("fine-pruning is its random control here: each of its 3 pruning epochs (2, 4, 6)")
    assert random_equal_note("fine", PruneConfig(), 9) is None
    assert (
        random_equal_note("random", PruneConfig(), 6) is None and random_equal_note("regular", PruneConfig(), 6) is None
    )
    assert random_equal_note("infobatch", PruneConfig(), 6) is None  # its epochs depend on the losses
    explicit = dict(window=4, start=1, block=1, count=1, attenuation=1.0)
    assert random_equal_note("fine", PruneConfig(**explicit), 10) is None
    assert "its only pruning epoch (1)" in random_equal_note("fine", PruneConfig(anneal=0.1, **explicit), 10)
    assert "(1, 2, …, 10)" in random_equal_note("fine", PruneConfig(**EVERY_EPOCH), 10)

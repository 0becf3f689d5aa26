"""RS2 without replacement, OrderDP and `--reweight cumulative` (RePB's temporal rescaling), on
hand-computed cases and against their authors' selection functions (tests/reference/), epoch by
epoch on the same losses and random draws. Each test names the wrong code it catches."""

import io

import numpy as np
import pytest
import torch
from reference.orderdp_authors import OrderDP as AuthorsOrderDP
from reference.rs2_authors import UniformNoReplacement

from conftest import TINY_SETTINGS
from fineprune_cli.drivers.compare import Job, job_config
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, create
from policy_table import names, predictions_for

RS2_COMMIT = "99edfc8a323abc8da09217165ecf57fb569240ea"  # PatrikOkanovic/RS2, the code compared against
ORDERDP_COMMIT = "b48eaccef9ed4390919a7370b4862fcf8abbc86d"  # shengze-xu/OrderDP


def kept(plan):
    return sorted(plan.indices.tolist())


def run(policy, epochs, losses=None):
    """plan, then (for a policy that observes) the trained samples' losses, then sync: the plans."""
    plans = []
    for epoch in range(1, epochs + 1):
        plan = policy.plan(epoch)
        plans.append(plan)
        if policy.observes:
            policy.observe(plan.indices, losses[epoch - 1][plan.indices])
            policy.sync()
    return plans


# --- RS2 -------------------------------------------------------------------------------------


def test_rs2_trains_every_sample_once_a_round_and_k_in_every_epoch():
    # The done-when. N = 12, prune fraction 0.75: k = 3, rounds of 4 epochs. Catches: a
    # fresh draw every epoch (samples repeat inside a round), no new permutation after a round
    # (every round the same slices), a slice of another size.
    plans = run(create("rs2", 12, PruneConfig(prune_fraction=0.75), seed=1, epochs=12), 12)
    assert all(p.samples == 3 and p.pruned and p.weights is None for p in plans)
    rounds = [[kept(p) for p in plans[r : r + 4]] for r in (0, 4, 8)]
    for slices in rounds:
        assert sorted(i for s in slices for i in s) == list(range(12))
    assert rounds[0] != rounds[1] != rounds[2]


@pytest.mark.parametrize(
    "n, fraction",
    [
        (12, 0.75),  # k = 3 divides N
        (10, 0.7),  # k = 3: a round's 4th epoch wraps, 2 samples, one a repeat
        (10, 0.6),  # k = 4: the 3rd epoch wraps, 3 samples
        (11, 0.64),  # k = 4: the 3rd epoch takes the last 3, no repeat (end index 12 mod 12 = 0)
        (6, 1 / 6),  # k = 5: the 2nd epoch takes 1 + 3 repeats
        (5, 0.8),  # k = 1
    ],
)
def test_rs2_keeps_what_the_authors_code_keeps_epoch_by_epoch(n, fraction):
    # The authors' UniformNoReplacement (RS2_COMMIT) shuffles with draws from the policy's own
    # generator (same seed; numpy's stream differs, docs/choices.md); their fraction is the kept
    # share 1 - f, and at these sizes their round(r·N) is our N - round(f·N). Catches: any other
    # slicing or wrap (a full k in the last epoch, the leftover dropped as datacull does), a
    # permutation drawn fresh instead of reshuffling the previous one, a missed reshuffle.
    seed = 5
    generator = torch.Generator().manual_seed(seed)

    def shuffle(a):
        a[:] = a[torch.randperm(len(a), generator=generator).numpy()]

    authors = UniformNoReplacement(n, fraction=1 - fraction, shuffle=shuffle)
    policy = create("rs2", n, PruneConfig(prune_fraction=fraction), seed=seed, epochs=40)
    for epoch in range(1, 31):
        plan = policy.plan(epoch)
        theirs = authors.select()[0]["indices"]
        assert plan.indices.tolist() == theirs.tolist(), epoch
        assert plan.weights is None and plan.samples == policy.planned_samples(epoch)


def test_rs2_ends_a_round_that_k_does_not_divide_as_the_authors_do():
    # N = 10, k = 3: epochs 1-3 take permutation positions 0-8; epoch 4 takes position 9 and
    # position 0 again (a sample epoch 1 trained), 2 = k - 1 samples; epoch 5 starts a new
    # permutation. planned_samples says so in advance. Catches: a 4th slice of k (3), the
    # leftover sample dropped (no 4th epoch), a round counted from the wrong epoch.
    policy = create("rs2", 10, PruneConfig(prune_fraction=0.7), seed=0, epochs=12)
    plans = run(policy, 8)
    first = [kept(p) for p in plans[:4]]
    assert [len(s) for s in first] == [3, 3, 3, 2]
    assert len(set(first[0] + first[1] + first[2])) == 9
    assert len(set(first[3]) & set(first[0])) == 1 and len(set(first[3]) - set(first[0] + first[1] + first[2])) == 1
    assert [policy.planned_samples(e) for e in range(1, 13)] == [3, 3, 3, 2] * 3
    assert sorted(i for p in plans[4:8] for i in p.indices.tolist()) != list(range(10))  # epoch 8 repeats one too


@pytest.mark.parametrize(
    "n, fraction, twice",
    [
        (60000, 0.3, 23999),  # Fashion-MNIST at the default f: 39.998% of the samples, the page's figure
        (50000, 0.3, 19999),  # CIFAR-10: k = 35,000, the 2nd epoch 15,000 new + 19,999 again
        (50000, 0.1, 39999),  # 79.998%
        (50000, 0.6, 9999),  # rounds of 3 epochs: 20,000, 20,000, 10,000 + 9,999 again
        (50000, 0.5, 0),  # k divides N: every sample exactly once
    ],
)
def test_rs2_trains_this_many_samples_twice_a_round(n, fraction, twice):
    # The numbers docs/policies/rs2.md quotes: over the first round, how many samples train twice
    # (k - 1 - N mod k; none thrice, none missed). Catches a wrap that fills the last epoch from
    # the next permutation or drops the leftover (no repeats), or a full k in the last epoch.
    policy = create("rs2", n, PruneConfig(prune_fraction=fraction), seed=0, epochs=20)
    counts = sum(torch.bincount(p.indices, minlength=n) for p in run(policy, -(-n // policy.budget)))
    assert int(counts.min()) == 1 and int(counts.max()) <= 2
    assert int((counts == 2).sum()) == twice


def test_rs2_keeps_n_minus_round_f_n_not_the_authors_round_of_the_kept_share():
    # N = 5, f = 0.5: fineprune leaves out round(2.5) = 2 and keeps 3, as the random frontier at 0.5
    # does; the authors' round(0.5 x 5) would keep 2 (docs/choices.md). Catches k = round((1 - f)·N).
    policy = create("rs2", 5, PruneConfig(prune_fraction=0.5), seed=0, epochs=4)
    assert [p.samples for p in run(policy, 4)] == [3, 2, 3, 2]  # rounds of 2: 3, then 2 + 0 repeats
    assert UniformNoReplacement(5, fraction=0.5).coreset_size == 2


def test_rs2_resumes_mid_round():
    # Restored after epoch 2 of a 4-epoch round, it continues the same permutation. Catches the
    # position (or the permutation) left out of the state: a resumed run would start a new round.
    whole = run(create("rs2", 20, PruneConfig(prune_fraction=0.75), seed=2, epochs=9), 9)
    first = create("rs2", 20, PruneConfig(prune_fraction=0.75), seed=2, epochs=9)
    run(first, 2)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    resumed = create("rs2", 20, PruneConfig(prune_fraction=0.75), seed=77, epochs=9)
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    assert [resumed.plan(e).indices.tolist() for e in range(3, 10)] == [p.indices.tolist() for p in whole[2:]]


@pytest.mark.parametrize("name", ["rs2", "orderdp"])
def test_a_prune_fraction_of_zero_is_refused(name):
    # Catches a run that trains every sample under a pruning policy's name.
    with pytest.raises(ConfigError, match="--prune-fraction 0 trains every sample in every epoch"):
        create(name, 10, PruneConfig(prune_fraction=0.0), epochs=5)


# --- OrderDP ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, subset, fraction, top_q_ratio",
    [
        (40, 0.75, 0.4, 0.8),  # s = 30, k = 24
        (50, 0.8, 0.7, 0.375),  # the README's CIFAR command: s = 40, k = 15
        (20, 0.5, 0.5, 1.0),  # k = s: the subset itself (the code's own branch)
        (50, 0.75, 0.5, 0.68),  # s = int(37.5) = 37, k = 25
    ],
)
def test_orderdp_keeps_what_the_authors_code_keeps_epoch_by_epoch(n, subset, fraction, top_q_ratio):
    # The authors' OrderDP (ORDERDP_COMMIT) and the policy see the same losses of the samples each
    # trained, and the authors' np.random.choice draws from the policy's own generator (their
    # seeding by the epoch counter is named in docs/choices.md). Epoch 1 ties every score at 3.
    # Catches: another subset size (round, not int), the top of all N instead of the subset, the
    # lowest losses kept, unseen samples scored +inf or 0 instead of 3, scores not the last seen.
    seed = 3
    generator = torch.Generator().manual_seed(seed)

    def choice(total, size, replace):
        assert not replace
        return torch.randperm(total, generator=generator)[:size].numpy()

    authors = AuthorsOrderDP(n, random_len_ratio=subset, top_q_ratio=top_q_ratio, choice=choice)
    policy = create("orderdp", n, PruneConfig(prune_fraction=fraction, orderdp_subset=subset), seed=seed, epochs=12)
    losses = torch.rand(12, n, generator=torch.Generator().manual_seed(9)) * 5  # some above 3
    for epoch in range(1, 13):
        plan = policy.plan(epoch)
        theirs = np.sort(authors.prune())
        assert kept(plan) == theirs.tolist(), epoch
        assert plan.weights is None and plan.samples == policy.planned_samples(epoch) == authors.top_q
        authors.update(torch.as_tensor(theirs), losses[epoch - 1][theirs])
        policy.observe(plan.indices, losses[epoch - 1][plan.indices])
        policy.sync()


@pytest.mark.parametrize("fraction, expected", [(0.7, [5, 6, 7]), (0.4, [4, 5, 6, 7, 8, 9])])
def test_orderdp_ranks_the_unseen_at_3_among_the_last_seen_losses(fraction, expected):
    # orderdp_subset 1: the whole set is drawn, so the top k by score decides. Samples 0-7 seen with
    # these losses, 8 and 9 never (score 3). k = 3: 6, 5, 4 (samples 7, 6, 5), not the unseen (as
    # +inf would); k = 6: those, 4 (3.5) and the two at 3, not sample 3 (2.5; unseen as 0 would
    # keep 2 and 3). Catches: unseen at +inf or 0, lowest kept, scores averaged over epochs.
    policy = create("orderdp", 10, PruneConfig(prune_fraction=fraction, orderdp_subset=1.0), seed=0, epochs=5)
    policy.plan(1)
    policy.observe(torch.arange(8), torch.tensor([9.0] * 8))  # an older loss, replaced below
    policy.sync()
    policy.observe(torch.arange(8), torch.tensor([0.0, 1.0, 2.0, 2.5, 3.5, 4.0, 5.0, 6.0]))
    policy.sync()
    assert kept(policy.plan(3)) == expected


def test_orderdp_draws_differ_with_the_seed():
    # The authors seed each epoch's draw with the epoch counter, so every seed of a run draws the
    # same subsets; here the run's seed decides (docs/choices.md). Catches seeding by the epoch.
    plans = [run(create("orderdp", 30, PruneConfig(), seed=s, epochs=3), 3, torch.ones(3, 30)) for s in (0, 1)]
    assert [kept(p) for p in plans[0]] != [kept(p) for p in plans[1]]


def test_orderdp_refuses_a_subset_smaller_than_what_an_epoch_keeps():
    # N = 100, f = 0.3 keeps 70: a subset of 0.6 (60) cannot hold them; 0.7 can (then orderdp is
    # random pruning). Catches a subset silently grown, or a top-k of more than was drawn.
    with pytest.raises(ConfigError, match="--orderdp-subset 0.6 draws 60 of the 100 samples, fewer than the 70"):
        create("orderdp", 100, PruneConfig(orderdp_subset=0.6), epochs=5)
    assert create("orderdp", 100, PruneConfig(orderdp_subset=0.7), epochs=5).plan(1).samples == 70
    # f = 0.71 keeps 29, and int(0.29 x 100) is 28: the share it names is one that draws 29.
    # Catches a suggestion of k / N that the int() of the code's sizes would refuse again.
    with pytest.raises(ConfigError, match="raise --orderdp-subset to 0.2901 or more"):
        create("orderdp", 100, PruneConfig(prune_fraction=0.71, orderdp_subset=0.29), epochs=5)
    assert create("orderdp", 100, PruneConfig(prune_fraction=0.71, orderdp_subset=0.2901), epochs=5).subset == 29


def test_orderdp_prunes_every_epoch_until_anneal_and_by_default_to_the_last():
    # The authors' code prunes in both branches of its delta test, so no default anneal: epoch 5
    # of 5 prunes. Catches InfoBatch's 0.875 borrowed as a default.
    plans = run(create("orderdp", 20, PruneConfig(), seed=0, epochs=5), 5, torch.rand(5, 20))
    assert [p.samples for p in plans] == [14] * 5
    annealed = create("orderdp", 20, PruneConfig(anneal=0.6), seed=0, epochs=5)
    assert [p.samples for p in run(annealed, 5, torch.rand(5, 20))] == [14, 14, 14, 20, 20]


# --- --reweight cumulative (RePB) -------------------------------------------------------------


def frequency_weights(plans, n):
    """By hand from the plans' kept sets: epoch t weighs sample i by t / (epochs <= t keeping i)."""
    count, weights = torch.zeros(n), []
    for t, plan in enumerate(plans, start=1):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[plan.indices] = True
        count += mask
        weights.append(t / count.clamp(min=1))
    return weights


def per_epoch(weights, plan, n):
    """The rule's epoch factor s_t: `weights` scaled so that the plan's trained samples sum to N."""
    return weights * (n / weights[plan.indices].sum())


def test_reweight_cumulative_weighs_an_rs2_round_by_hand():
    # N = 4, k = 2: each sample is kept every other epoch, so every kept sample has the same
    # count: t / c = 1, 2, 1.5, 2 (the paper's weights), and the epoch factor makes each 4 / 2 = 2,
    # the inverse of rs2's keep rate 1/2. The paper's own weights would leave epochs 1 and 3 at
    # half and three quarters of a full epoch's gradient. Catches: the epoch factor left out
    # (1, 2, 1.5, 2), c without the current epoch (weights 0 or inf), t / c inverted.
    policy = create("rs2", 4, PruneConfig(prune_fraction=0.5, reweight="cumulative"), seed=0, epochs=4)
    plans = run(policy, 4)
    assert [p.weights[p.indices].tolist() for p in plans] == [[2.0, 2.0]] * 4


def gradient_shares(n, d=5):
    """a_i = <g_i, G> / |G|^2 of a toy linear regression's squared-error gradients g_i at one fixed
    (not optimal) point, G their sum: an epoch's sum of w_i a_i over its trained samples is its
    weighted gradient / the full one, projected on the full one (experiments/reweight/bias.py)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = x @ torch.randn(d, generator=gen, dtype=torch.float64) + 0.5 * torch.randn(
        n, generator=gen, dtype=torch.float64
    )
    grads = (x @ torch.randn(d, generator=gen, dtype=torch.float64) - y)[:, None] * x
    return grads @ grads.sum(0) / grads.sum(0).dot(grads.sum(0))


@pytest.mark.parametrize(
    "policy, settings",
    [
        ("random", dict(prune_fraction=0.3, window=1, start=0, block=1, count=1)),  # every epoch
        ("random", dict(prune_fraction=0.3)),  # its default schedule: every other epoch
        ("rs2", dict(prune_fraction=0.5)),
        ("rs2", dict(prune_fraction=0.7)),
    ],
)
def test_reweight_cumulative_makes_every_epochs_expected_gradient_the_full_one(policy, settings):
    # Over 300 seeds, in every one of 6 epochs, the mean weighted gradient / the full one is 1
    # within 4 standard errors, and every weighted epoch's weights sum to N. The paper's weights
    # as written (no epoch factor) give 0.70 in epoch 1 of random every epoch, 1.15 and 0.77 in
    # epochs 3 and 4 of the every-other-epoch schedule, 0.50 in rs2's first at f 0.5 and 0.30 at
    # f 0.7 (results/reweight/bias.md). Catches the epoch factor left out or computed over the
    # wrong samples (all N, or the kept set without repeats).
    n, epochs, seeds = 100, 6, 300
    shares = gradient_shares(n)
    ratios = torch.zeros(seeds, epochs, dtype=torch.float64)
    for seed in range(seeds):
        rule = create(policy, n, PruneConfig(**settings, reweight="cumulative"), seed=seed, epochs=epochs)
        for epoch in range(1, epochs + 1):
            plan = rule.plan(epoch)
            w = torch.ones(n, dtype=torch.float64) if plan.weights is None else plan.weights.double()
            assert w[plan.indices].sum().item() == pytest.approx(n, rel=1e-5)
            ratios[seed, epoch - 1] = (w[plan.indices] * shares[plan.indices]).sum()
    mean, se = ratios.mean(0), ratios.std(0) / seeds**0.5
    assert bool(((mean - 1).abs() <= 4 * se + 1e-9).all()), (mean.tolist(), se.tolist())


def test_reweight_reaches_the_loss_the_sampler_backpropagates():
    # The library's PruningSampler (the Lightning callback's and compare --script's path) trains
    # rs2 (N = 4, k = 2) at weight 2: its loss of unit losses is 2. Catches a sampler that plans
    # through something other than policy.plan (the reweighting would not reach it: 1).
    from fineprune_cli.pruning import PruningSampler

    sampler = PruningSampler(create("rs2", 4, PruneConfig(prune_fraction=0.5, reweight="cumulative"), epochs=4))
    means = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler))
        means.append(sampler.loss(idx, torch.ones(idx.numel())).item())
    assert means == [2.0, 2.0]


# every policy that leaves samples out of an epoch when fed fresh losses each epoch
NOISE_PRUNING = names(prunes=True, selects_batches=False, prunes_on_noise=True)


@pytest.mark.parametrize("name", NOISE_PRUNING)
def test_reweight_cumulative_multiplies_any_policys_own_weights_and_keeps_its_choice(name):
    # The same policy with and without the setting, the same seed and losses: the same samples in
    # every epoch, and the weights t / c x the policy's own (InfoBatch's 1/(1 - r)) x the epoch's
    # factor that makes the trained samples' weights sum to N. Epochs before
    # the first that leaves a sample out keep weights None (they train as without the setting).
    # Catches: a policy whose plan escapes the reweighting, the policy's own weights dropped, a
    # reweighting that changes the selection, weights on epochs that have pruned nothing yet.
    cfg = dict(window=4, start=2, block=1, count=1, attenuation=1.0, prune_fraction=0.4)
    n, epochs = 30, 9
    losses = torch.rand(epochs, n, generator=torch.Generator().manual_seed(4)) * 3
    plain, weighted = (
        create(name, n, PruneConfig(**cfg, reweight=r), seed=6, epochs=epochs) for r in ("none", "cumulative")
    )
    a, b = (feed_predictions(p, epochs, losses) for p in (plain, weighted))
    expected = frequency_weights(a, n)
    first = next(t for t, p in enumerate(a) if p.pruned)
    for t, (p, q) in enumerate(zip(a, b)):
        assert torch.equal(p.indices, q.indices) and p.pruned == q.pruned, (name, t + 1)
        if t < first:
            assert q.weights is p.weights is None
            continue
        own = torch.ones(n) if p.weights is None else p.weights
        assert torch.allclose(q.weights[q.indices], per_epoch(expected[t] * own, q, n)[q.indices]), (name, t + 1)
    assert any(not torch.all(q.weights[q.indices] == 1) for q in b[first:]), name  # the fixture weighs something


def feed_predictions(policy, epochs, losses):
    """`run` for every policy, kakurenbo's predictions (all right and sure) included."""

    def observe(idx, epoch):
        policy.observe(idx, losses[epoch - 1][idx], **predictions_for(policy.name, idx.numel()))

    plans = []
    for epoch in range(1, epochs + 1):
        plans.append(policy.plan(epoch))
        observe(plans[-1].indices, epoch)
        if (hidden := policy.refresh(epoch)) is not None:
            observe(hidden, epoch)
        policy.sync()
    return plans


@pytest.mark.parametrize("name", ["fine", "orderdp"])
def test_reweight_cumulative_resumes_its_counts(name):
    # Restored after epoch 4, the weights go on as the uninterrupted run's. Catches the counts or
    # the epoch count left out of the state (weights restarting at t = 1).
    cfg = PruneConfig(window=3, start=1, block=1, count=1, attenuation=1.0, reweight="cumulative")
    losses = torch.rand(8, 25, generator=torch.Generator().manual_seed(1))
    whole = run(create(name, 25, cfg, seed=2, epochs=8), 8, losses)
    first = create(name, 25, cfg, seed=2, epochs=8)
    run(first, 4, losses)
    resumed = create(name, 25, cfg, seed=2, epochs=8)
    resumed.load_state_dict(first.state_dict())
    for epoch in range(5, 9):
        plan = resumed.plan(epoch)
        assert torch.equal(plan.indices, whole[epoch - 1].indices) and torch.equal(
            plan.weights, whole[epoch - 1].weights
        )
        resumed.observe(plan.indices, losses[epoch - 1][plan.indices])
        resumed.sync()


def test_reweight_is_dropped_from_a_run_that_prunes_nothing():
    # A regular run (or a shorter arm) has nothing to reweight; recorded, the setting would split its
    # report rows from other regular runs. Catches it kept there, or dropped from a pruning run.
    base = {"model.name": "lenet", "data.dataset": "synthetic", "prune.reweight": "cumulative"}
    assert build_config(None, base).prune.reweight == "none"
    assert build_config(None, {**base, "prune.policy": "rs2"}).prune.reweight == "cumulative"


def test_reweight_refuses_an_unknown_kind():
    from fineprune_cli.settings import check_section

    with pytest.raises(ConfigError, match="--reweight"):
        check_section(PruneConfig(reweight="uniform"), "prune.")


# --- compare: each arm gets the settings that act in it ----------------------------------------


def test_compare_gives_each_arm_the_settings_that_act_in_it():
    # compare's settings are every arm's: a policy's own setting reaches that policy's arm, the
    # reweighting every pruning arm (the random frontier too), neither a regular arm. Catches the
    # comparison's base config resolved as a regular run's, which reset them all before any arm.
    given = {"prune.reweight": "cumulative", "prune.orderdp_subset": 0.9, "prune.kakurenbo_tau": 0.5}
    cfg = build_config(None, {**TINY_SETTINGS, **given}, drop_idle=False)
    arms = {
        "orderdp": Job("lenet", "synthetic", "orderdp", 0),
        "kakurenbo": Job("lenet", "synthetic", "kakurenbo", 0),
        "frontier": Job("lenet", "synthetic", "random", 0, fraction=0.3),
        "regular": Job("lenet", "synthetic", "regular", 0),
    }
    got = {arm: job_config(cfg, job, "out").prune for arm, job in arms.items()}
    assert [(p.reweight, p.orderdp_subset, p.kakurenbo_tau) for p in got.values()] == [
        ("cumulative", 0.9, 0.7),
        ("cumulative", 0.8, 0.5),
        ("cumulative", 0.8, 0.7),
        ("none", 0.8, 0.7),
    ]

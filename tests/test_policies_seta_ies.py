"""SeTa and IES (pruning/policies/seta.py, ies.py): each against its authors' selection code
(tests/reference/, transcribed at the commits named there) on the same losses and seeds, epoch
by epoch, then the boundaries the fidelity runs do not reach. Each test names the wrong code it
catches."""

import io
import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from conftest import metrics_rows, summary_of
from fineprune_cli.engine.config import build_config
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.pruning.policies.ies import latest_average
from fineprune_cli.pruning.policies.seta import epoch_seed, loss_groups, slide, window_size
from fineprune_cli.pruning.sampler import IndexedDataset, PruningSampler
from fineprune_cli.runner import train
from fineprune_cli.settings import check_section
from reference import ies_authors, seta_authors

SETA_COMMIT = "341df62f1957420db7ebf53fce2c9c2689536c2a"  # mrazhou/SeTa
IES_COMMIT = "fd51090ee430310afa0f87c9ddbe985839e8bd1b"  # tmllab/2025_ICLR_IES


def kept(plan):
    return sorted(plan.indices.tolist())


# --- SeTa ------------------------------------------------------------------------------------


def clustered_losses(epoch, n):
    """Five loss levels (sample i on level i mod 5) that fall with the epochs, plus noise."""
    gen = torch.Generator().manual_seed(500 + epoch)
    level = torch.tensor([0.05, 0.4, 1.0, 1.8, 3.2])[torch.arange(n) % 5]
    return (level / (1 + 0.2 * epoch) + 0.05 * torch.rand(n, generator=gen)).float()


def few_values(epoch, n):
    """Two loss values only: k-means leaves most of 10 groups empty (mean NaN), and a window of
    empty groups falls back to one random sample."""
    return torch.where(torch.arange(n) % 3 == 0, 2.0, 0.5).float()


def constant(epoch, n):
    return torch.ones(n)


SETA_CASES = {
    # the class's defaults over a run with δ·n = 7: epoch 8 anneals partially
    "defaults": (300, dict(seta_ratio=0.1, seta_groups=10, seta_window=0.5), 8, clustered_losses),
    # the README's CIFAR command: 5 x 0.9 = 4.5 rounds to a window of 4; δ = 0.7 of 10
    "readme": (120, dict(seta_ratio=0.3, seta_groups=5, seta_window=0.9, anneal=0.7), 10, clustered_losses),
    # every score equal: torch.chunk's 7 groups of 13 samples, a window of round(3.5) = 4
    "tied": (13, dict(seta_ratio=0.0, seta_groups=10, seta_window=0.5, anneal=1.0), 9, constant),
    "few values": (60, dict(seta_ratio=0.0, seta_groups=10, seta_window=0.5, anneal=1.0), 9, few_values),
}


def run_seta_side_by_side(n, settings, epochs, losses_of, seed=4):
    """Each epoch, the authors' SeTa (its generators set to the epoch's seed) and the policy:
    yields (epoch, authors' kept, policy's plan); both observe the epoch's losses of what trained."""
    cfg = PruneConfig(**settings)
    policy = create("seta", n, cfg, seed=seed, epochs=epochs)
    delta = cfg.anneal if cfg.anneal is not None else 0.875
    ref = seta_authors.SeTa(n, epochs, cfg.seta_ratio, cfg.seta_groups, cfg.seta_window, delta)
    for epoch in range(1, epochs + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # k-means on duplicate points; an empty group's mean
            theirs = torch.as_tensor(ref.reset(epoch_seed(seed, epoch)), dtype=torch.long)
            plan = policy.plan(epoch)
        yield epoch, theirs, plan
        losses = losses_of(epoch, n)
        ref.update(theirs, losses[theirs])
        for idx in plan.indices.split(16):
            policy.observe(idx, losses[idx])
        policy.sync()


@pytest.mark.parametrize("case", SETA_CASES)
def test_seta_keeps_what_the_authors_code_keeps_epoch_by_epoch(case):
    # The same kept samples as seta.py at SETA_COMMIT, every epoch, and weight 1 (its
    # InfoBatch weights stay 1). Catches: the window's step off by one, round half up (4.5 -> 5),
    # groups ordered hard to easy or by label, a window that does not wrap, unseen samples scored
    # 0 or left out, k-means on other settings, a full (not partial) anneal, torch.chunk's fewer
    # groups ignored, NaN-centred empty groups sorted otherwise, no one-sample fallback.
    n, settings, epochs, losses_of = SETA_CASES[case]
    sizes = []
    for epoch, theirs, plan in run_seta_side_by_side(n, settings, epochs, losses_of):
        assert kept(plan) == sorted(theirs.tolist()), f"epoch {epoch}"
        assert plan.weights is None and plan.pruned == (plan.samples < n)
        sizes.append(plan.samples)
    if case == "few values":
        assert 1 in sizes  # the fallback ran
    if case == "defaults":
        assert sizes[0] == sizes[-1] == 270 and max(sizes[1:-1]) < 270  # the draw alone; the windows


def test_seta_window_slides_one_group_per_epoch_and_wraps():
    # 10 groups, window 5: step 0 every group, then starts 1, 2, ..., 5, back to 0 at step 6.
    # Catches a modulus of the slide range (5) instead of its positions (6), or a step counted from 1.
    groups = [torch.tensor([g]) for g in range(10)]
    starts = [int(slide(groups, step, 0.5)[0]) for step in range(1, 9)]
    assert len(slide(groups, 0, 0.5)) == 10
    assert starts == [1, 2, 3, 4, 5, 0, 1, 2]
    assert all(len(slide(groups, step, 0.5)) == 5 for step in range(1, 9))


def test_seta_window_size_rounds_half_to_even_as_python_does():
    # Catches round-half-up: 5 x 0.9 = 4.5 is 4 groups, 10 x 0.25 = 2.5 is 2, 10 x 0.35 = 3.5 is 4.
    assert [window_size(5, 0.9), window_size(10, 0.25), window_size(10, 0.35), window_size(10, 0.5)] == [4, 2, 4, 5]


def test_seta_groups_run_from_the_lowest_loss_to_the_highest():
    # Three clear levels given in the order high, low, middle. Catches groups left in k-means's
    # label order or sorted hard to easy.
    scores = torch.tensor([9.0, 9.1, 0.1, 0.2, 4.0, 4.1])
    grouped = loss_groups(scores, torch.arange(6), 3)
    assert [sorted(g.tolist()) for g in grouped] == [[2, 3], [4, 5], [0, 1]]


def test_seta_anneals_partially_to_a_fresh_random_draw():
    # After δ·n = 4 of 6: int(0.8 x 50) = 40 samples, another draw each epoch, whatever the
    # losses; planned in advance, as epoch 1's draw. Catches a full anneal (50) or a draw reused.
    policy = create("seta", 50, PruneConfig(seta_ratio=0.2, anneal=0.7), seed=1, epochs=6)
    plans = [policy.plan(e) for e in range(1, 7)]
    assert [policy.planned_samples(e) for e in range(1, 7)] == [40, None, None, None, 40, 40]
    assert plans[0].samples == plans[4].samples == plans[5].samples == 40
    assert kept(plans[4]) != kept(plans[5]) and all(p.pruned for p in plans)


def test_seta_seeds_choose_other_draws_and_a_state_resumes_them():
    # Catches a draw that ignores the run's seed (every seed alike, as the code's epoch-seeded
    # NumPy), and a resumed policy that draws from its new seed instead of the saved one.
    def plans(policy, first, last):
        out = []
        for e in range(first, last + 1):
            plan = policy.plan(e)
            out.append(kept(plan))
            policy.observe(plan.indices, clustered_losses(e, 80)[plan.indices])
            policy.sync()
        return out

    cfg = PruneConfig(anneal=0.75)
    whole = plans(create("seta", 80, cfg, seed=5, epochs=8), 1, 8)
    assert whole[0] != plans(create("seta", 80, cfg, seed=6, epochs=8), 1, 1)[0]
    first = create("seta", 80, cfg, seed=5, epochs=8)
    plans(first, 1, 4)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    resumed = create("seta", 80, cfg, seed=99, epochs=8)
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    assert plans(resumed, 5, 8) == whole[4:]


@pytest.mark.parametrize(
    "n, settings, words",
    [
        (10, dict(seta_ratio=0.1, seta_groups=9), "seta draws 9 of 10 samples, not more than its 9 groups"),
        (100, dict(seta_groups=3, seta_window=0.1), "--seta-window 0.1 of 3 groups rounds to none"),
    ],
)
def test_seta_refuses_what_its_code_would_assert_on(n, settings, words):
    # The code asserts more drawn samples than groups and a window of at least one group.
    with pytest.raises(ConfigError, match=re.escape(words)):
        create("seta", n, PruneConfig(**settings), epochs=10)
    create("seta", 11, PruneConfig(seta_ratio=0.0, seta_groups=10), epochs=10)  # 11 > 10: accepted


def test_seta_without_a_draw_or_a_window_to_slide_is_refused():
    # ratio 0 and every group in the window: no epoch leaves a sample out; with ratio 0 a run
    # whose pruning stops after epoch 1 (the window's first step keeps every group) neither.
    with pytest.raises(ConfigError, match="--seta-ratio 0 draws every sample and --seta-window keeps every group"):
        create("seta", 100, PruneConfig(seta_ratio=0.0, seta_window=1.0), epochs=10)
    with pytest.raises(ConfigError, match="first epoch trains every sample and the window starts in epoch 2"):
        create("seta", 100, PruneConfig(seta_ratio=0.0, anneal=0.1), epochs=10)
    create("seta", 100, PruneConfig(seta_ratio=0.0, anneal=0.2), epochs=10)  # epoch 2 slides
    create("seta", 100, PruneConfig(seta_window=1.0), epochs=1)  # the draw prunes epoch 1


# --- IES -------------------------------------------------------------------------------------

IES_N, IES_EPOCHS = 40, 22


def ies_losses(epoch):
    """Per sample, by i mod 4: a loss settling geometrically (at its own rate), noise that never
    settles, one that settles then steps up at epoch 12 (it returns), one settling slowly. At
    epoch 15 every loss steps up, so for three epochs nothing is below the threshold."""
    i = torch.arange(IES_N, dtype=torch.float64)
    rate = 0.3 + 0.3 * (i / IES_N)
    settle = 0.2 + 2.0 * rate**epoch
    gen = torch.Generator().manual_seed(900 + epoch)
    noise = 1.0 + 0.5 * torch.rand(IES_N, generator=gen, dtype=torch.float64)
    step = settle + 0.5 * (epoch >= 12)
    slow = 0.5 + 2.0 * 0.85**epoch
    kind = torch.arange(IES_N) % 4
    loss = torch.where(kind == 0, settle, torch.where(kind == 1, noise, torch.where(kind == 2, step, slow)))
    return (loss + 1.0 * (epoch >= 15)).float()


def run_ies_side_by_side(refresh=True, threshold=1e-3):
    """Each epoch, the authors' IES and the policy on ies_losses: yields (epoch, theirs, plan,
    refreshed, excluded) where theirs = (train set, remaining set or None) and excluded is what the
    authors' block returned at the epoch's end. refresh=False: no forward-only pass on either side."""
    policy = create("ies", IES_N, PruneConfig(ies_threshold=threshold, anneal=1.0), seed=2, epochs=IES_EPOCHS)
    ref = ies_authors.IES(IES_N, threshold=threshold)
    for epoch in range(1, IES_EPOCHS + 1):
        theirs = (sorted(ref.train_indices), None if ref.remaining_indices is None else sorted(ref.remaining_indices))
        plan, refreshed = policy.plan(epoch), policy.refresh(epoch)
        losses = ies_losses(epoch)
        trained = plan.indices[torch.randperm(plan.samples, generator=torch.Generator().manual_seed(epoch))]
        for idx in trained.split(7):
            ref.record(idx, losses[idx])
            policy.observe(idx, losses[idx])
        if refresh and ref.remaining_indices is not None:
            ref.record(torch.tensor(ref.remaining_indices), losses[ref.remaining_indices])
        if refresh and refreshed is not None:
            policy.observe(refreshed, losses[refreshed])
        policy.sync()
        excluded = ref.epoch_end()
        yield epoch, theirs, plan, refreshed, excluded


@pytest.mark.parametrize("refresh", [True, False])
def test_ies_trains_and_refreshes_what_the_authors_code_does_epoch_by_epoch(refresh):
    # Trained and forward-only sets equal to cifar_main.py's loaders at IES_COMMIT every epoch,
    # weight 1. The run drops samples from epoch 7, brings the stepped ones back, and keeps the
    # last set through epochs whose block excludes nothing (the code's `if excluded_samples:`).
    # refresh=False (the Sampler's path: no forward-only pass): a sample without a new loss
    # repeats its last second difference, as in the code. Catches: a history a loss short or
    # long, first differences, the mean of the last three |differences| (not the code's running
    # sum), '<=' for '<', a set emptied when nothing is below, dropped samples never re-scored.
    returned = kept_through_empty = False
    last_out: set[int] = set()
    stepped_out = []  # epochs in which sample 2 (its loss steps up at epoch 12) sits out
    for epoch, (trains, remaining), plan, refreshed, excluded in run_ies_side_by_side(refresh):
        assert kept(plan) == trains, f"epoch {epoch}"
        assert (None if refreshed is None else sorted(refreshed.tolist())) == remaining, f"epoch {epoch}"
        assert plan.weights is None and plan.pruned == (refreshed is not None)
        out = set(remaining or [])
        returned |= bool(last_out - out) and bool(out)
        kept_through_empty |= not excluded and bool(out)
        stepped_out += [epoch] if 2 in out else []
        last_out = out
    if refresh:  # re-scored, the stepped sample comes back in epoch 13
        assert returned and kept_through_empty and stepped_out == [11, 12, 20, 21, 22]
    else:  # never re-scored, it never sees its step and stays out
        assert stepped_out == list(range(11, IES_EPOCHS + 1))


def test_ies_drops_from_epoch_7_when_losses_are_flat():
    # Six losses give four second differences: the end of epoch 6 can first decide. Half the
    # samples flat (difference 0 < 1e-3), half swinging. Catches a decision one epoch early or late.
    policy = create("ies", 10, PruneConfig(), epochs=9)
    plans = []
    for epoch in range(1, 10):
        plans.append(policy.plan(epoch))
        swing = torch.where(torch.arange(10) % 2 == 0, 1.0, float(epoch % 2)).float()
        policy.observe(torch.arange(10), swing)
        policy.sync()
    assert [p.samples for p in plans] == [10] * 6 + [5] * 3
    assert policy.refresh(9).tolist() == [0, 2, 4, 6, 8]
    assert [policy.planned_samples(e) for e in (1, 6, 7)] == [10, 10, None]


def test_ies_average_is_the_codes_running_sum_not_the_plain_mean():
    # Differences whose last average, by the code's running sum (a0 + a1 + a2, then + (a3 - a0)),
    # is not the mean of a1..a3 to the last bit; a threshold between the two falls on the code's side.
    gen = np.random.default_rng(0)
    for _ in range(1000):
        diffs = list(gen.uniform(-1, 1, 4) * 10.0 ** gen.integers(-6, 1, 4))
        theirs = ies_authors.correct_moving_average_new_new(diffs, 3)[-1]
        plain = (abs(diffs[1]) + abs(diffs[2]) + abs(diffs[3])) / 3
        if theirs != plain:
            break
    assert theirs != plain
    ours = latest_average(torch.tensor([diffs], dtype=torch.float64))
    assert ours.item() == theirs


def test_ies_never_drops_every_sample():
    # Every loss flat: the code would train an empty epoch (and divide by its zero length); the
    # policy keeps the last set, here none. Catches an epoch planned with no sample.
    policy = create("ies", 6, PruneConfig(), epochs=9)
    for epoch in range(1, 10):
        plan = policy.plan(epoch)
        assert plan.samples == 6 and policy.refresh(epoch) is None
        policy.observe(plan.indices, torch.ones(6))
        policy.sync()
    assert torch.equal(policy.scores, torch.zeros(6))  # the criterion is there: 0, below 1e-3


def test_ies_anneal_trains_everything_and_threshold_0_is_refused():
    # Catches --anneal ignored by ies, and the code's baseline (threshold 0) let through as a pruning run.
    policy = create("ies", 10, PruneConfig(anneal=0.7), epochs=10)
    for epoch in range(1, 11):
        plan = policy.plan(epoch)
        assert plan.samples == (10 if epoch in (1, 2, 3, 4, 5, 6, 8, 9, 10) else 5), epoch
        policy.observe(plan.indices, torch.where(torch.arange(10) < 5, 1.0, float(epoch % 2))[plan.indices])
        if policy.refresh(epoch) is not None:
            policy.observe(policy.refresh(epoch), torch.ones(5))
        policy.sync()
    with pytest.raises(ConfigError, match="--ies-threshold 0 drops no sample"):
        create("ies", 10, PruneConfig(ies_threshold=0.0), epochs=10)
    with pytest.raises(ConfigError, match="first epoch that can leave samples out is epoch 7"):
        create("ies", 10, PruneConfig(), epochs=6)


def test_ies_state_resumes_its_histories_and_set():
    # Saved after epoch 10 (samples out, histories full) and loaded into a policy of another seed
    # that has observed a stale step: the same plans and refreshes as the run never stopped.
    # Catches a history, a count or the set left out of the state, or pending kept across a load.
    whole = [(kept(p), r) for _, _, p, r, _ in run_ies_side_by_side()]
    policy = create("ies", IES_N, PruneConfig(anneal=1.0), seed=2, epochs=IES_EPOCHS)
    for epoch in range(1, 11):
        plan, refreshed = policy.plan(epoch), policy.refresh(epoch)
        policy.observe(plan.indices, ies_losses(epoch)[plan.indices])
        if refreshed is not None:
            policy.observe(refreshed, ies_losses(epoch)[refreshed])
        policy.sync()
    buf = io.BytesIO()
    torch.save(policy.state_dict(), buf)
    resumed = create("ies", IES_N, PruneConfig(anneal=1.0), seed=7, epochs=IES_EPOCHS)
    resumed.observe(torch.arange(3), torch.ones(3))
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    for epoch in range(11, IES_EPOCHS + 1):
        plan, refreshed = resumed.plan(epoch), resumed.refresh(epoch)
        assert kept(plan) == whole[epoch - 1][0]
        assert (refreshed is None) == (whole[epoch - 1][1] is None)
        resumed.observe(plan.indices, ies_losses(epoch)[plan.indices])
        if refreshed is not None:
            resumed.observe(refreshed, ies_losses(epoch)[refreshed])
        resumed.sync()


def test_ies_scores_are_nan_until_a_sample_has_four_differences():
    policy = create("ies", 3, PruneConfig(), epochs=10)
    for epoch in range(1, 7):
        policy.plan(epoch)
        policy.observe(torch.arange(3), torch.tensor([1.0, 2.0, 3.0]) * epoch)
        policy.sync()
        assert bool(policy.scores.isnan().all()) == (epoch < 6), epoch
    assert torch.equal(policy.scores, torch.zeros(3))  # linear losses: second difference 0


# --- both: settings, ranks, the DataLoader sampler --------------------------------------------


@pytest.mark.parametrize(
    "field, bad", [("seta_ratio", 0.95), ("seta_groups", 0), ("seta_window", 0.0), ("ies_threshold", -1e-3)]
)
def test_their_settings_are_checked(field, bad):
    # Catches a setting declared without its check; the code caps the ratio at 0.9 (keep >= 0.1).
    with pytest.raises(ConfigError, match=f"^--{field.replace('_', '-')} must"):
        check_section(PruneConfig(**{field: bad}), "prune.")
    check_section(PruneConfig(seta_ratio=0.9, seta_window=1.0, seta_groups=1, ies_threshold=0.0), "prune.")


@pytest.mark.parametrize("name", ["seta", "ies"])
def test_pending_observations_sum_over_ranks_to_one_process(name):
    # Two 'ranks' observe halves of every batch; their summed pending folds into one process's
    # state and plans. Catches pending that is not a sum (the latest loss, a history pushed per rank).
    single = create(name, 40, PruneConfig(anneal=1.0), seed=8, epochs=10)
    ranks = [create(name, 40, PruneConfig(anneal=1.0), seed=8, epochs=10) for _ in range(2)]
    for epoch in range(1, 11):
        plans = [p.plan(epoch) for p in [single, *ranks]]
        assert all(torch.equal(plans[0].indices, p.indices) for p in plans)
        losses = torch.where(torch.arange(40) % 2 == 0, 1.0, 1.0 + epoch % 2 + 0.1 * torch.arange(40)).float()
        for idx in plans[0].indices.split(6):
            single.observe(idx, losses[idx])
            for r, p in enumerate(ranks):
                p.observe(idx[r::2], losses[idx[r::2]])
        single.sync()
        pending = [p.take_pending() for p in ranks]
        for p in ranks:
            p.fold([a + b for a, b in zip(*pending)])
        assert all(torch.equal(p.scores, single.scores) or p.scores.isnan().equal(single.scores.isnan()) for p in ranks)
    assert plans[0].samples < 40


@pytest.mark.parametrize("name", ["seta", "ies"])
def test_a_dataloader_loop_trains_each_plan(name):
    # The library's PruningSampler: each epoch's batches are the plan, and the policy prunes.
    # Catches a policy that needs a call the sampler does not make (ies: refresh, which it skips).
    policy = create(name, 30, PruneConfig(anneal=1.0, seta_groups=3), seed=0, epochs=9)
    sampler = PruningSampler(policy)
    loader = DataLoader(IndexedDataset(TensorDataset(torch.arange(30))), batch_size=8, sampler=sampler)
    sizes = []
    for epoch in range(9):
        sampler.set_epoch(epoch)
        seen = []
        for idx, _ in loader:
            sampler.loss(idx, torch.where(idx < 15, 1.0, 0.1 * idx + epoch % 2).float())
            seen.append(idx)
        assert sorted(torch.cat(seen).tolist()) == kept(sampler.plan)
        sizes.append(len(torch.cat(seen)))
    assert min(sizes) < 30


@pytest.mark.slow
def test_seta_and_ies_train_through_the_engine(tmp_path):
    # The engine's loop: seta trains the draw in epoch 1 and fewer after; ies re-scores what it
    # drops (refresh_seconds) and every sample is trained or re-scored each epoch.
    def run(name, **extra):
        cfg = build_config(
            None,
            {
                "model.name": "lenet",
                "data.dataset": "synthetic",
                "data.subset": 100,
                "data.test_subset": 50,
                "train.epochs": 8,
                "train.batch_size": 25,
                "run.device": "cpu",
                "run.out": str(tmp_path / name),
                "prune.policy": name,
                **extra,
            },
        )
        return train(cfg, show_progress=False)

    run("seta", **{"prune.seta_groups": 4})
    rows = [int(r["samples"]) for r in metrics_rows(tmp_path / "seta")]
    assert rows[0] == 90 and max(rows[1:7]) < 90 and rows[7] == 90  # δ·n = 7: epoch 8 anneals to the draw
    run("ies", **{"prune.ies_threshold": 0.03})
    rows = [int(r["samples"]) for r in metrics_rows(tmp_path / "ies")]
    assert rows[:6] == [100] * 6 and min(rows[6:]) < 100
    assert summary_of(tmp_path / "ies")["refresh_seconds"] > 0
    assert math.isfinite(summary_of(tmp_path / "ies")["refresh_seconds"])

"""IES (pruning/policies/ies.py) against its authors' selection code: a transcription of
tmllab/2025_ICLR_IES's cifar_main.py (tests/reference/ies_authors.py) and the policy on the same
losses, epoch by epoch, with and without the forward-only pass; then the boundaries those runs
do not reach. Each test names the wrong code it catches."""

import io

import numpy as np
import pytest
import torch
from reference import ies_authors
from torch.utils.data import DataLoader, TensorDataset

from conftest import summary_of, trained_samples
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.pruning.policies.ies import latest_average
from fineprune_cli.pruning.sampler import IndexedDataset, PruningSampler
from fineprune_cli.settings import check_section

COMMIT = "fd51090ee430310afa0f87c9ddbe985839e8bd1b"  # tmllab/2025_ICLR_IES, the code compared against


def kept(plan):
    return sorted(plan.indices.tolist())


def test_the_reference_is_the_commit_compared_against():
    assert COMMIT in ies_authors.__doc__


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
    # Trained and forward-only sets equal to cifar_main.py's loaders at COMMIT every epoch,
    # weight 1. The run drops samples from epoch 11, brings the stepped ones back, and keeps the
    # last set through epochs whose block excludes nothing (the code's `if excluded_samples:`).
    # refresh=False (the Sampler's path): no forward-only pass on either side. Catches (each
    # tried): a set emptied when nothing is below, dropped samples never re-scored; the tests
    # below catch what these losses cannot (the threshold's side, the running sum, the history).
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


def test_ies_a_sample_without_a_loss_repeats_its_last_difference():
    # No forward-only pass (the DataLoader sampler's case). Sample 0's loss 1 + 4e-5·t³ has second
    # differences 12, 18, 24, 30 (x 4e-5) by epoch 6: average 9.6e-4 < 1e-3, so it sits out of
    # epoch 7; with no loss there its 30 repeats, the average 1.12e-3 brings it back in epoch 8,
    # as in the code. Catches a difference pushed only for observed samples (it would stay out).
    policy = create("ies", 5, PruneConfig(), epochs=10)
    ref = ies_authors.IES(5)
    out = []
    for epoch in range(1, 11):
        plan = policy.plan(epoch)
        assert kept(plan) == sorted(ref.train_indices), epoch
        out.append(0 not in kept(plan))
        losses = torch.tensor([1 + 4e-5 * epoch**3, 1.0, 1.0, 1.0, float(epoch % 2)])  # 4 swings: never out
        ref.record(plan.indices, losses[plan.indices])
        policy.observe(plan.indices, losses[plan.indices])
        policy.sync()
        ref.epoch_end()
    assert out[6:8] == [True, False]


def test_ies_a_criterion_equal_to_the_threshold_stays_in():
    # Sample 0's losses 0, 0, 0, 0, 0, 0.5: differences 0, 0, 0, 0.5, criterion 0.5 / 3; with that
    # threshold it stays in (the code's strict '<'), the flat samples 1-3 sit out. Catches '<='.
    policy = create("ies", 4, PruneConfig(ies_threshold=0.5 / 3), epochs=8)
    for epoch in range(1, 7):
        policy.plan(epoch)
        policy.observe(torch.arange(4), torch.tensor([0.5 if epoch == 6 else 0.0, 1.0, 1.0, 1.0]))
        policy.sync()
    assert policy.scores[0].item() == pytest.approx(0.5 / 3, rel=1e-6)
    assert kept(policy.plan(7)) == [0]


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
    # Every loss flat: the code's run stops at that epoch's end (its shuffled loader over no
    # sample is refused by RandomSampler); the policy keeps the last set, here none. Catches an epoch planned with no sample.
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


@pytest.mark.parametrize("field, bad", [("ies_threshold", -1e-3)])
def test_ies_settings_are_checked(field, bad):
    # Catches a setting declared without its check.
    with pytest.raises(ConfigError, match=f"^--{field.replace('_', '-')} must"):
        check_section(PruneConfig(**{field: bad}), "prune.")
    check_section(PruneConfig(ies_threshold=0.0), "prune.")


def test_ies_pending_observations_sum_over_ranks_to_one_process():
    # Two 'ranks' observe halves of every batch; their summed pending folds into one process's
    # state and plans. Catches pending that is not a sum (a history pushed once per rank).
    single = create("ies", 40, PruneConfig(anneal=1.0), seed=8, epochs=10)
    ranks = [create("ies", 40, PruneConfig(anneal=1.0), seed=8, epochs=10) for _ in range(2)]
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
        assert all(torch.allclose(p.scores, single.scores, rtol=0, atol=0, equal_nan=True) for p in ranks)
    assert plans[0].samples < 40


def _loop_loss(idx: torch.Tensor, epoch: int) -> torch.Tensor:
    """Samples 0-14 flat (they sit out from epoch 7), the rest swinging; sample 0 steps up in
    epoch 9 (0-based 8), which only a forward-only pass can see while it sits out."""
    flat = torch.where(idx < 15, 1.0, 0.1 * idx + epoch % 2).float()
    return flat + ((idx == 0) & (epoch >= 8)).float() * 5.0


def test_ies_in_a_dataloader_loop_refreshes_the_samples_sitting_out_as_the_engine_does():
    # The library's PruningSampler with sampler.refresh(): the same plans, epoch by epoch, as the
    # protocol driven as the engine drives it (train, forward-only pass, sync). Catches a sampler
    # that skips the pass (sample 0 would never come back) or folds it a second time.
    policy, direct = (create("ies", 30, PruneConfig(anneal=1.0), seed=0, epochs=14) for _ in range(2))
    sampler = PruningSampler(policy)
    loader = DataLoader(IndexedDataset(TensorDataset(torch.arange(30))), batch_size=8, sampler=sampler)
    zero_out = []
    for epoch in range(14):
        sampler.set_epoch(epoch)
        plan = direct.plan(epoch + 1)
        seen = [idx for idx, _ in loader if sampler.loss(idx, _loop_loss(idx, epoch)) is not None]
        assert sorted(torch.cat(seen).tolist()) == kept(plan), f"epoch {epoch + 1}"
        direct.observe(plan.indices, _loop_loss(plan.indices, epoch))
        out = direct.refresh(epoch + 1)
        if out is not None:
            direct.observe(out, _loop_loss(out, epoch))
        direct.sync()
        done = sampler.refresh(lambda idx, epoch=epoch: _loop_loss(idx, epoch), batch_size=4)
        assert done == (0 if out is None else out.numel())
        zero_out.append(0 not in kept(plan))
    assert zero_out[6] and not all(zero_out[7:])  # out from epoch 7, back once its loss moved


def test_ies_in_a_dataloader_loop_without_the_pass_is_refused_at_the_next_epoch():
    policy = create("ies", 30, PruneConfig(anneal=1.0), seed=0, epochs=9)
    sampler = PruningSampler(policy)
    loader = DataLoader(IndexedDataset(TensorDataset(torch.arange(30))), batch_size=8, sampler=sampler)
    with pytest.raises(
        RuntimeError, match=r"ies re-scores the samples it left out of epoch 6 .*sampler\.refresh\(losses\)"
    ):
        for epoch in range(9):
            sampler.set_epoch(epoch)
            for idx, _ in loader:
                sampler.loss(idx, _loop_loss(idx, epoch))
    assert sampler.epoch == 6  # 0-based: the policy's epoch 7, the first with samples out
    with pytest.raises(RuntimeError, match="before them"):  # after a sync it would fold twice
        sampler.sync()
        sampler.policy.sitting_out = torch.tensor([0])
        sampler.refresh(lambda idx: _loop_loss(idx, 0))


@pytest.mark.slow
def test_ies_trains_through_the_engine(tmp_path):
    # The engine's loop: nothing out before epoch 7, some after, and the refresh pass timed.
    rows = trained_samples(tmp_path, prune__policy="ies", prune__ies_threshold=0.03)
    assert rows[:6] == [100] * 6 and min(rows[6:]) < 100
    assert summary_of(tmp_path)["refresh_seconds"] > 0  # the forward-only pass ran

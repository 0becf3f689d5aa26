"""SeTa (pruning/policies/seta.py) against its authors' selection code: a transcription of
mrazhou/SeTa's seta.py (tests/reference/seta_authors.py) and the policy on the same losses and
seeds, epoch by epoch; then the boundaries those runs do not reach. Each test names the wrong
code it catches."""

import io
import re
import warnings

import pytest
import torch
from reference import seta_authors
from torch.utils.data import DataLoader, TensorDataset

from conftest import trained_samples
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.pruning.policies.seta import epoch_seed, loss_groups, slide, window_size
from fineprune_cli.pruning.sampler import IndexedDataset, PruningSampler
from fineprune_cli.settings import check_section

COMMIT = "341df62f1957420db7ebf53fce2c9c2689536c2a"  # mrazhou/SeTa, the code compared against


def kept(plan):
    return sorted(plan.indices.tolist())


def test_the_reference_is_the_commit_compared_against():
    assert COMMIT in seta_authors.__doc__


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
    # The same kept samples as seta.py at COMMIT, every epoch, and weight 1 (its InfoBatch
    # weights stay 1). Catches (each tried): the window's step off by one, round half up
    # (4.5 -> 5), groups ordered hard to easy or by label, a window that does not wrap, unseen
    # samples scored 0, k-means with another seed or n_init, a full (not partial) anneal,
    # torch.chunk's groups made otherwise, no one-sample fallback.
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


def test_seta_trains_one_sample_where_tied_chunks_leave_the_window_no_group():
    # All losses tied: 21 samples in 11 chunks, a window of round(11 x 0.03) = 0 groups. The code
    # fails its assertion (a named difference); we take its empty-window guard, one random sample.
    settings = dict(seta_ratio=0.0, seta_groups=20, seta_window=0.03, anneal=1.0)
    side_by_side = run_seta_side_by_side(21, settings, 3, constant)
    _, theirs, plan = next(side_by_side)
    assert plan.samples == theirs.numel() == 21
    with pytest.raises(AssertionError):
        next(side_by_side)
    policy = create("seta", 21, PruneConfig(**settings), seed=4, epochs=3)
    policy.plan(1)
    policy.observe(torch.arange(21), torch.ones(21))
    policy.sync()
    assert policy.plan(2).samples == 1


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


@pytest.mark.parametrize("anneal, epochs", [(0.29, 100), (0.57, 100), (0.7, 10)])
def test_seta_anneals_where_the_authors_float_product_does(anneal, epochs):
    # The code anneals once its 1-based epoch counter exceeds num_epochs * delta, a float product:
    # 0.29 x 100 = 28.999999999999996 and 0.57 x 100 = 56.99999999999999 anneal from epochs 29
    # and 57, one before the real number's floor + 1; 0.7 x 10 = 7.0 from epoch 8. The authors'
    # reset() itself decides, its prune/no_prune stubbed to record the branch. Catches δ·n taken
    # as the real number (epoch 30, 58), or a rounding of the product.
    ref = seta_authors.SeTa(60, epochs, 0.1, 10, 0.5, anneal)
    ref.prune, ref.no_prune = (lambda: "prune"), (lambda: "anneal")
    theirs = next(e for e in range(1, epochs + 1) if ref.reset(e) == "anneal")
    policy = create("seta", 60, PruneConfig(seta_ratio=0.1, anneal=anneal), seed=0, epochs=epochs)
    ours = next(e for e in range(1, epochs + 1) if policy.annealed(e))
    assert ours == theirs == {0.29: 29, 0.57: 57, 0.7: 8}[anneal]


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


@pytest.mark.parametrize("field, bad", [("seta_ratio", 0.95), ("seta_groups", 0), ("seta_window", 0.0)])
def test_seta_settings_are_checked(field, bad):
    # Catches a setting declared without its check; the code caps the ratio at 0.9 (keep >= 0.1).
    with pytest.raises(ConfigError, match=f"^--{field.replace('_', '-')} must"):
        check_section(PruneConfig(**{field: bad}), "prune.")
    check_section(PruneConfig(seta_ratio=0.9, seta_window=1.0, seta_groups=1), "prune.")


def test_seta_in_a_dataloader_loop_trains_each_plan():
    # The library's PruningSampler: each epoch's batches are the plan, and the policy prunes.
    # Catches a policy that needs a call the sampler does not make.
    policy = create("seta", 30, PruneConfig(anneal=1.0, seta_groups=3), seed=0, epochs=9)
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
def test_seta_trains_through_the_engine(tmp_path):
    # The engine's loop: the draw in epoch 1 and after δ·n, fewer in the window's epochs.
    rows = trained_samples(tmp_path, prune__policy="seta", prune__seta_groups=4)
    assert rows[0] == rows[7] == 90 and max(rows[1:7]) < 90  # δ·n = 7: epoch 8 anneals to the draw

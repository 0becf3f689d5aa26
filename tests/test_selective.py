"""Selective-Backprop (pruning/policies/selective.py) against Composer's code, and the trainer's
selective step (engine/training/selective.py). Composer's functions are transcribed in
tests/reference/composer_selective_backprop.py. Each test names the wrong code it catches."""

import copy
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from reference import composer_selective_backprop as composer

from conftest import metrics_rows, summary_of, tiny_config, toy_trainer
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.pruning.policies.selective import draw, percentile_probabilities
from fineprune_cli.pruning.policy import EpochPlan
from fineprune_cli.runner import train

COMMIT = "6405188805a0054b4551ec49e4919c54c971d0e8"  # mosaicml/composer, the code compared against
EVERY_STEP = {"sb_start": 0.0, "sb_end": 1.0, "sb_interrupt": 0}


def sb(n=96, epochs=4, seed=0, **settings):
    return create("selective-backprop", n, PruneConfig(**settings), seed=seed, epochs=epochs)


def test_the_reference_is_the_commit_compared_against():
    assert COMMIT in composer.__doc__


# --- the schedule, step by step ----------------------------------------------------------


@pytest.mark.parametrize(
    "start, end, interrupt",
    [(0.5, 0.9, 2), (0.0, 1.0, 0), (0.25, 0.75, 3), (0.5, 0.5, 2), (0.0, 1.0, 1), (0.9, 1.0, 2), (0.3, 0.6, 2)],
)
@pytest.mark.parametrize("epochs", [1, 2, 4, 5, 10, 20])
def test_the_steps_that_select_are_composers_step_by_step(start, end, interrupt, epochs):
    # Composer asks should_selective_backprop(elapsed duration, batch_in_epoch) before each batch;
    # under a max_duration in epochs the duration is completed epochs / epochs. Catches a 1-based
    # batch index, epoch / epochs for the duration, an inclusive end, the interrupt inverted; and
    # an idle refusal where Composer would select somewhere, or none where it never would.
    cfg = {"sb_start": start, "sb_end": end, "sb_interrupt": interrupt}
    theirs = {
        (e, b): composer.should_selective_backprop((e - 1) / epochs, b, start, end, interrupt)
        for e in range(1, epochs + 1)
        for b in range(7)
    }
    if not any(theirs.values()):
        with pytest.raises(ConfigError, match="prunes no epoch"):
            sb(epochs=epochs, **cfg)
        return
    policy = sb(epochs=epochs, **cfg)
    ours = {(e, b): policy.batch_keep(e, b, 128) is not None for e, b in theirs}
    assert ours == theirs
    for e in range(1, epochs + 1):  # an epoch with no selective step is planned as every sample
        selective = any(theirs[e, b] for b in range(2))
        assert policy.planned_samples(e) == (None if selective else 96)
        assert policy.plan(e).samples == 96 and policy.plan(e).weights is None


@pytest.mark.parametrize("keep", [0.05, 0.1, 0.3, 1 / 3, 0.5, 0.7, 0.9, 0.99])
def test_the_kept_count_is_composers_int_keep_times_n_and_at_least_one(keep):
    # Catches round() or ceil() for int(): 0.3 x 60 = 18 (int 17.999... would be wrong the other way).
    policy = sb(sb_keep=keep, **EVERY_STEP)
    for n in range(1, 200):
        assert policy.batch_keep(1, 0, n) == max(1, int(keep * n))


def test_keep_one_interrupt_one_and_an_empty_interval_are_refused():
    # Composer applies nothing at keep 1 (its match() needs keep < 1), or at interrupt 1
    # ((b + 1) % 1 is always 0); a run of them would be regular training filed as a policy.
    with pytest.raises(ConfigError, match="sb-keep 1"):
        sb(sb_keep=1.0)
    with pytest.raises(ConfigError, match="sb-interrupt 1"):
        sb(sb_interrupt=1)
    with pytest.raises(ConfigError, match=r"\[--sb-start 0.6, --sb-end 0.7\)"):
        sb(epochs=2, sb_start=0.6, sb_end=0.7)  # epochs start at 0 and 0.5 of the run
    with pytest.raises(ValueError, match="epochs=n"):
        create("selective-backprop", 10, PruneConfig())


def test_anneal_ends_selection_like_every_policy():
    policy = sb(epochs=10, anneal=0.6, **EVERY_STEP)
    assert [policy.batch_keep(e, 0, 10) for e in (6, 7)] == [5, None]


# --- the selection: the same draw, the same rows ------------------------------------------


def _losses(n, seed):
    """Per-sample losses with ties (a quarter of them repeat a value), so the sort's order matters."""
    g = torch.Generator().manual_seed(seed)
    losses = torch.rand(n, generator=g) * 3
    q = n // 4
    losses[:q] = losses[q : 2 * q]
    return losses


@pytest.mark.parametrize("n, keep", [(16, 0.5), (128, 0.5), (104, 0.3), (60, 0.25), (7, 0.7), (50, 0.9)])
@pytest.mark.parametrize("seed", [0, 1])
def test_given_the_same_draw_the_rows_are_composers(n, keep, seed, monkeypatch):
    # Composer's select_using_loss and the policy on the same losses; Composer's np.random.choice
    # is handed the positions the policy's generator draws, after checking what Composer asks of
    # it: N, int(keep x N), no replacement, and its probabilities equal to ours to the bit. Catches
    # a descending sort, another exponent, normalising otherwise, positions not mapped through the
    # sort, a count other than int(keep x N).
    losses = _losses(n, seed)
    policy = sb(n=1000, seed=seed, sb_keep=keep, **EVERY_STEP)
    k = policy.batch_keep(1, 0, n)
    twin = torch.Generator().manual_seed(0)
    twin.set_state(policy.generator.get_state())
    positions = draw(policy.probabilities(n), k, twin)
    asked = []

    def choice(a, size, replace=True, p=None):
        asked.append((a, size, replace))
        assert np.array_equal(p, policy.probabilities(n).numpy())
        return positions.numpy()

    monkeypatch.setattr(np.random, "choice", choice)
    rows = torch.arange(n)
    theirs, _ = composer.select_using_loss(rows, rows, lambda x: x, lambda out, y, reduction: losses[out], keep)
    assert asked == [(n, int(keep * n), False)]
    assert torch.equal(policy.select_batch(losses, k), theirs)


def test_the_draw_is_torch_multinomial_without_replacement_less_its_host_read():
    # The same positions, in the same order, from the same generator state as torch.multinomial
    # (which reads max and min of the probabilities back to the host first, a sync on CUDA).
    # Catches keys made otherwise (log, a uniform), ascending keys, the draw order lost.
    for n, keep, seed in [(16, 0.5, 0), (128, 0.3, 1), (9, 0.8, 2)]:
        probs = torch.from_numpy(percentile_probabilities(n, keep))
        ours = draw(probs, int(keep * n), torch.Generator().manual_seed(seed))
        theirs = torch.multinomial(
            probs, int(keep * n), replacement=False, generator=torch.Generator().manual_seed(seed)
        )
        assert torch.equal(ours, theirs)


def _inclusion(probs, k):
    """Exact probability that each position is among k drawn one by one without replacement,
    each next with probability proportional to `probs` among those left (all orders enumerated)."""
    p = [float(v) for v in probs]
    out = [0.0] * len(p)
    for seq in itertools.permutations(range(len(p)), k):
        chance, left = 1.0, 1.0
        for i in seq:
            chance *= p[i] / left
            left -= p[i]
        for i in seq:
            out[i] += chance
    return np.array(out)


@pytest.mark.parametrize("n, keep", [(6, 0.5), (7, 0.3), (8, 0.75)])
def test_each_ranks_inclusion_frequency_is_composers(n, keep):
    # 40,000 draws of ours and 10,000 of Composer's np.random.choice: each rank's inclusion
    # frequency within 5 standard errors of the exact successive-sampling probability. Catches a
    # draw with replacement, the top-k by probability, a draw by probs^-1 or uniform.
    draws, k = 40_000, int(keep * n)
    probs = percentile_probabilities(n, keep)
    exact = _inclusion(probs, k)
    ours = draw(torch.from_numpy(probs).expand(draws, n), k, torch.Generator().manual_seed(5))
    assert ours.shape == (draws, k) and all(len(set(row)) == k for row in ours[:200].tolist())
    rng = np.random.RandomState(5)
    theirs = np.stack([rng.choice(n, k, replace=False, p=probs) for _ in range(draws // 4)])
    for sample in (ours.numpy(), theirs):
        share = np.bincount(sample.flatten(), minlength=n) / len(sample)
        assert np.all(np.abs(share - exact) < 5 * np.sqrt(exact * (1 - exact) / len(sample))), (share, exact)
    assert np.all(np.diff(exact) > 0)  # the higher a row's loss, the likelier it trains


def test_the_generator_resumes_the_draws_exactly():
    # A policy loaded from another's state draws the same rows next; one of another seed does not.
    a = sb(seed=3, **EVERY_STEP)
    losses = _losses(64, 0)
    a.select_batch(losses, 32)
    b, c = sb(seed=3, **EVERY_STEP), sb(seed=4, **EVERY_STEP)
    b.load_state_dict(a.state_dict())
    c.load_state_dict(sb(seed=4, **EVERY_STEP).state_dict())
    nxt = a.select_batch(losses, 32)
    assert torch.equal(b.select_batch(losses, 32), nxt) and not torch.equal(c.select_batch(losses, 32), nxt)


# --- the trainer's selective step --------------------------------------------------------


def _recording(trainer, policy):
    """Record each batch's sample indices, the model's forwards (grad mode, input) and the
    policy's selections (losses, keep, rows)."""
    batches, forwards, picks = [], [], []
    gather = trainer.data.batches
    trainer.data.batches = lambda idx, gen: (batches.extend(idx), gather(idx, gen))[1]
    trainer.model.register_forward_pre_hook(lambda m, a: forwards.append((torch.is_grad_enabled(), a[0].clone())))
    select = policy.select_batch

    def recorded(losses, keep):
        rows = select(losses, keep)
        picks.append((losses.clone(), keep, rows.clone()))
        return rows

    policy.select_batch = recorded
    return batches, forwards, picks


def test_a_selective_step_trains_the_drawn_rows_at_their_plain_mean():
    # Each step: the whole batch forward without gradients, its losses to the policy, then the
    # drawn rows forward and backward, their loss a plain mean. A replay on a copy of the model
    # from the recorded rows alone reaches the same weights. Catches the whole batch trained, the
    # mean over the batch's size not the kept count, rows other than those drawn, other losses
    # handed to the policy, the labels of other rows.
    trainer, policy = toy_trainer(augment=False, static=False), sb(**EVERY_STEP)
    replay = copy.deepcopy(trainer.model)
    batches, forwards, picks = _recording(trainer, policy)
    lrs = []
    trainer.optimizer.register_step_pre_hook(lambda opt, a, k: lrs.append(opt.param_groups[0]["lr"]))
    trainer.train_epoch(1, EpochPlan(torch.arange(96)), select=policy)
    assert [(g, len(x)) for g, x in forwards] == [(False, 20), (True, 10)] * 4 + [(False, 16), (True, 8)]
    assert trainer.skipped == 48
    opt = torch.optim.SGD(replay.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    y = trainer.data.train_y
    for step, (losses, keep, rows) in enumerate(picks):
        (_, whole), (_, kept), idx = forwards[2 * step], forwards[2 * step + 1], batches[step]
        with torch.no_grad():
            torch.testing.assert_close(losses, F.cross_entropy(replay(whole), y[idx], reduction="none"))
        assert keep == len(idx) // 2 and torch.equal(kept, whole[rows])
        opt.param_groups[0]["lr"] = lrs[step]
        opt.zero_grad()
        F.cross_entropy(replay(kept), y[idx[rows]]).backward()
        opt.step()
    for a, b in zip(trainer.model.parameters(), replay.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("static, shapes", [(True, [20, 10] * 3), (False, [20, 10, 20, 10, 5, 2])])
def test_a_short_batch_draws_among_its_real_rows_and_keeps_the_compiled_shape(static, shapes):
    # 45 samples in batches of 20: 20, 20, 5 (padded to 20 when static). The short batch's draw
    # sees its 5 real rows' losses only, trains int(0.5 x 5) = 2 of them, and on the padded path
    # its kept part is padded to a full batch's 10 rows, so the compiled model sees one shape per
    # batch size. Catches padding drawn as a training row, a kept part of varying size, padding
    # in the loss, the skipped count off.
    trainer, policy = toy_trainer(augment=False, static=static), sb(**EVERY_STEP)
    batches, forwards, picks = _recording(trainer, policy)
    trained = []
    loss = trainer.train_epoch(1, EpochPlan(torch.arange(0, 90, 2)), lambda i, l: trained.append((i, l)), select=policy)
    assert [len(x) for _, x in forwards] == shapes
    assert [(len(losses), keep) for losses, keep, _ in picks] == [(20, 10), (20, 10), (5, 2)]
    assert all(bool((rows < len(losses)).all()) for losses, _, rows in picks)
    assert [len(i) for i, _ in trained] == [10, 10, 2] and trainer.skipped == 23
    for (i, _), idx, (_, _, rows) in zip(trained, batches, picks):
        assert torch.equal(i, idx[rows][: len(i)])
    assert loss.item() == pytest.approx(sum(float(l.sum()) for _, l in trained), rel=1e-6)


def test_a_selective_epoch_reads_nothing_back_to_the_host(monkeypatch):
    # On CUDA a value read back waits for the device; here any such read fails the epoch
    # (test_gpu.py checks the same with CUDA's sync detector). Catches an .item(), a .tolist()
    # or a bool() of a tensor in the selective step or the policy's draw.
    trainer, policy = toy_trainer(static=True), sb(**EVERY_STEP)
    plan = EpochPlan(torch.arange(0, 90, 2))

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor read back to the host inside the epoch")

    with monkeypatch.context() as m:
        for name in ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__"):
            m.setattr(torch.Tensor, name, refuse)
        trainer.train_epoch(1, plan, select=policy)
        trainer.train_epoch(2, plan, select=policy)
    assert trainer.skipped == 23
    with pytest.raises(AssertionError, match="read back"), monkeypatch.context() as m:
        m.setattr(torch.Tensor, "item", refuse)
        torch.ones(()).item()  # the trap is armed


def test_a_run_records_the_backpropagated_samples_as_its_budget(tmp_path):
    # 200 samples in batches of 50, 4 epochs, Composer's defaults: epochs 3 and 4 start at 0.5
    # and 0.75 of the run, and their batches 0 and 2 keep 25 of 50. So 150 samples train in each,
    # 100 of 800 sample-epochs are skipped, and the regular run of the same seed trains the same
    # batches in epochs 1 and 2 (the draw uses the policy's generator, not the trainer's).
    # Catches the plan's count recorded (200), the skipped rows counted twice or per rank.
    runs = {}
    for policy in ("regular", "selective-backprop"):
        cfg = tiny_config(tmp_path / policy, **{"train.epochs": 4, "prune.policy": policy})
        train(cfg, show_progress=False)
        runs[policy] = metrics_rows(tmp_path / policy, drop_timing=True)
    rows = runs["selective-backprop"]
    assert [int(r["samples"]) for r in rows] == [200, 200, 150, 150]
    assert [int(r["pruned"]) for r in rows] == [0, 0, 1, 1]
    assert rows[:2] == runs["regular"][:2] and rows[2] != runs["regular"][2]
    summary = summary_of(tmp_path / "selective-backprop")
    assert summary["samples_skipped"] == 100 and summary["pruning_epochs"] == [3, 4]


# --- where it cannot run, refused in one line ---------------------------------------------


def test_the_paths_that_train_whole_batches_refuse_it():
    # Parameter-server workers, a --script's own loop and the Lightning callback never run the
    # selective step: each would train regular batches under the policy's name.
    from fineprune_cli.distributed.launch import check_parallel
    from fineprune_cli.engine.setup.config import validate

    for mode in ("async", "mixed"):
        cfg = tiny_config(**{"prune.policy": "selective-backprop", "run.dist_mode": mode, "train.batch_size": 48})
        with pytest.raises(ConfigError, match="--dist-mode sync"):
            check_parallel(cfg, 4)
    check_parallel(tiny_config(**{"prune.policy": "selective-backprop", "train.batch_size": 48}), 4)  # sync: runs
    script = tiny_config(**{"prune.policy": "selective-backprop", "script.command": "python train.py"})
    with pytest.raises(ConfigError, match="without --script"):
        validate(script)
    # the library's sampler (the Lightning callback's path) refuses it when it is made (issue 57:
    # it trained every row of every batch under the policy's name, with no word)
    from fineprune_cli.pruning.distsampler import DistributedPruningSampler
    from fineprune_cli.pruning.sampler import PruningSampler

    for sampler in (PruningSampler, DistributedPruningSampler):
        with pytest.raises(ValueError, match="selective-backprop chooses rows inside each training step"):
            sampler(sb(**EVERY_STEP))

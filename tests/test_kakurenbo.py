"""KAKURENBO (pruning/policies/kakurenbo.py): which samples hide, which move back, the lr
factor, the end-of-epoch pass and the checkpoint."""

import math

import pytest
import torch

from conftest import SignalAt, metrics_rows, summary_of, toy_trainer
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.engine.training.checkpoint import Interrupted
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.runner import resume, train

N = 10
# sample:       0     1     2     3     4     5     6     7     8     9
LOSS = [0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 1.00]
RIGHT = [True, False, True, True, True, True, True, True, True, True]
CONF = [0.95, 0.99, 0.69, 0.70, 0.90, 0.90, 0.90, 0.90, 0.90, 0.90]


def _observed(fraction=0.5, tau=0.7, **kw):
    policy = create("kakurenbo", N, PruneConfig(prune_fraction=fraction, kakurenbo_tau=tau, **kw), seed=3, epochs=10)
    idx = torch.arange(N)
    policy.observe(idx, torch.tensor(LOSS), None, torch.tensor(RIGHT), torch.tensor(CONF))
    policy.sync()
    return policy


def test_epoch_one_trains_everything():
    plan = create("kakurenbo", N, PruneConfig(prune_fraction=0.5), epochs=10).plan(1)
    assert plan.samples == N and not plan.pruned


def test_hides_the_lowest_losses_less_those_moved_back():
    # candidates: the 5 lowest losses, 0-4. Moved back: 1 (mispredicted, though confident),
    # 2 (confidence 0.69 < 0.7). 3 stays: 0.70 is not below tau. 5-9: not among the lowest.
    policy = _observed()
    plan = policy.plan(2)
    assert policy.hidden.tolist() == [0, 3, 4]
    assert sorted(plan.indices.tolist()) == [1, 2, 5, 6, 7, 8, 9] and plan.pruned
    assert policy.refresh(2).tolist() == [0, 3, 4]


def test_f_is_a_maximum_and_tau_moves_samples_back():
    assert _observed(fraction=0.2).plan(2).samples == N - 1  # candidates 0, 1: only 0 hides
    assert _observed(tau=0.96).plan(2).samples == N  # nobody that sure: all move back
    assert _observed(tau=0.0).plan(2).samples == N - 4  # 0, 2, 3, 4: only 1 was wrong


def test_a_mispredicted_repeat_observation_moves_back():
    policy = _observed()
    policy.plan(2)
    policy.observe(
        torch.tensor([0, 0]), torch.tensor([0.1, 0.1]), None, torch.tensor([True, False]), torch.tensor([0.9, 0.9])
    )  # seen twice, wrong once
    policy.sync()
    assert bool(policy.right[0]) is False
    policy.plan(3)
    assert policy.hidden.tolist() == [3, 4]


def test_unseen_samples_never_hide_and_scores_are_nan():
    policy = create("kakurenbo", N, PruneConfig(prune_fraction=0.5), epochs=10)
    policy.observe(
        torch.tensor([0, 1]), torch.tensor([0.1, 0.2]), None, torch.tensor([True, True]), torch.tensor([0.9, 0.9])
    )
    policy.sync()
    assert policy.plan(2).samples == N - 2  # 0 and 1: the only seen ones
    assert math.isnan(policy.scores[5]) and policy.scores[0] == pytest.approx(0.1)


def test_annealed_epochs_train_everything():
    policy = _observed(anneal=0.5)  # n = 10: epochs after 5 train all
    assert policy.plan(5).pruned and not policy.plan(6).pruned and policy.refresh(6) is None
    assert policy.planned_samples(6) == N and policy.planned_samples(5) is None


def test_observe_refuses_a_call_without_predictions():
    with pytest.raises(ValueError, match="correctness"):
        create("kakurenbo", N, PruneConfig()).observe(torch.arange(2), torch.ones(2))
    right, sure = torch.ones(2, dtype=torch.bool), torch.ones(2)
    for predictions in ({"correct": right}, {"confidence": sure}):  # either one missing
        with pytest.raises(ValueError, match="correctness and confidence"):
            create("kakurenbo", N, PruneConfig()).observe(torch.arange(2), torch.ones(2), **predictions)


def test_state_round_trips_bit_exactly():
    policy = _observed()
    policy.plan(2)
    state = policy.state_dict()
    again = create("kakurenbo", N, PruneConfig(prune_fraction=0.5, kakurenbo_tau=0.7), seed=99, epochs=10)
    again.load_state_dict(state)
    for key in ("seen", "loss", "right", "confidence"):
        assert torch.equal(getattr(again, key), getattr(policy, key)), key
    assert again.plan(3).indices.tolist() == policy.plan(3).indices.tolist()  # the generator too


def _run(tmp_path, name, bar=None, **extra):
    cfg = build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "data.subset": 200,
            "data.test_subset": 50,
            "train.epochs": 4,
            "train.batch_size": 50,
            "train.milestones": [],
            "run.device": "cpu",
            "run.out": str(tmp_path / name),
            "prune.enabled": True,
            "prune.policy": "kakurenbo",
            "prune.prune_fraction": 0.3,
            "prune.kakurenbo_tau": 0.0,
            **extra,
        },
    )
    return train(cfg, show_progress=False, bar=bar)


def test_a_run_hides_scales_its_lr_and_times_the_refresh(tmp_path):
    """tau 0: every correctly predicted candidate hides; the lr of a pruned epoch is
    lr x 200 / samples (warm-up over by then), and the refresh pass is reported."""
    summary = _run(tmp_path, "k", **{"train.warmup_epochs": 0.0})
    rows = metrics_rows(tmp_path / "k")
    assert int(rows[0]["samples"]) == 200 and any(int(r["samples"]) < 200 for r in rows[1:])
    for r in rows:
        assert float(r["lr"]) == pytest.approx(0.1 * 200 / int(r["samples"]), rel=1e-12)
    extra = summary_of(tmp_path / "k")
    assert 0 < extra["refresh_seconds"] <= summary.train_seconds
    off = _run(tmp_path, "off", **{"train.warmup_epochs": 0.0, "train.lr_scale_pruned": False})
    assert all(float(r["lr"]) == 0.1 for r in metrics_rows(tmp_path / "off"))
    assert off.samples_skipped > 0


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """Interrupted after epoch 2 (hidden samples, lr scaled, progress milestones) and resumed:
    the same rows, to the bit, as a run never stopped."""
    extra = {"train.lr_schedule": "progress", "train.milestones": [2]}
    _run(tmp_path, "whole", **extra)
    with pytest.raises(Interrupted):
        _run(tmp_path, "cut", bar=SignalAt(2), **extra)
    resume(tmp_path / "cut", show_progress=False)
    assert metrics_rows(tmp_path / "cut", drop_timing=True) == metrics_rows(tmp_path / "whole", drop_timing=True)
    assert any(int(r["pruned"]) for r in metrics_rows(tmp_path / "whole")[2:])


def test_the_refresh_pass_observes_exactly_the_hidden_samples_unaugmented():
    """Trainer.refresh: evaluation mode, the stored images without crop or flip (the padded
    store's centre), each given sample once with its loss, correctness and top probability;
    with static batches (compiled runs) the short last batch is filled up and sliced off."""
    import torch.nn.functional as F

    hidden = torch.tensor([3, 17, 40, 41, 90])  # eval batch 16: one short batch
    for static in (False, True):
        trainer = toy_trainer(augment=True, static=static)
        seen = []
        trainer.refresh(
            hidden, lambda idx, losses, mean, right, conf, seen=seen: seen.append((idx, losses, right, conf))
        )
        idx, losses, right, conf = (torch.cat(parts) for parts in zip(*seen))
        assert idx.tolist() == hidden.tolist() and not trainer.model.training
        x = trainer.data.train_x[hidden][:, :, 4:36, 4:36]  # CROP_PAD 4 around 32 x 32
        with torch.no_grad():
            logits = trainer.model(x)
        y = trainer.data.train_y[hidden]
        assert torch.allclose(losses, F.cross_entropy(logits, y, reduction="none"), atol=1e-6)
        assert torch.equal(right, logits.argmax(1) == y)
        assert torch.allclose(conf, logits.softmax(1).max(1).values, atol=1e-6)


def test_a_sample_observed_twice_before_a_sync_keeps_its_mean_confidence():
    """Two observations of one sample (confidence 0.6 and 0.8) fold to 0.7, the mean, not their sum
    1.4: with tau 0.75 it is unsure and moves back."""
    policy = create("kakurenbo", 2, PruneConfig(prune_fraction=0.5, kakurenbo_tau=0.75), seed=3, epochs=10)
    idx = torch.tensor([0, 0, 1])
    policy.observe(
        idx, torch.tensor([0.1, 0.1, 5.0]), None, torch.tensor([True, True, True]), torch.tensor([0.6, 0.8, 0.9])
    )
    policy.sync()
    assert policy.confidence[0].item() == pytest.approx(0.7)
    assert policy.plan(2).samples == 2  # the lowest loss, sample 0, moves back


def test_f_times_n_rounding_to_one_hides_the_lowest_and_to_zero_hides_none():
    # N = 10. F = 0.1: m = 1, the lowest loss (sample 0, right and sure) hides and the epoch's
    # count is only known from the losses. F = 0.04: m = round(0.4) = 0, nothing hides and
    # every epoch is planned whole. Catches the no-hiding shortcut taken at m = 1, or its empty
    # result sliced one long (sample 0 hidden at m = 0).
    one = _observed(fraction=0.1)
    assert one.plan(2).samples == N - 1 and one.hidden.tolist() == [0] and one.planned_samples(2) is None
    none = _observed(fraction=0.04)
    plan = none.plan(2)
    assert plan.samples == N and not plan.pruned and none.refresh(2) is None and none.planned_samples(2) == N

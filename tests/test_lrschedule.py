"""The lr rule (engine/training/lrschedule.py), written once: `epochs` is torch's MultiStepLR to the bit
(milestone m decays the epochs after it), the warm-up ramps the first steps, `progress` places
milestones at the run's own share of samples trained, `--lr-scale-pruned` multiplies a pruned
epoch's lr by N / samples."""

import pytest

from conftest import metrics_rows
from fineprune_cli.engine.setup.config import TrainConfig, build_config
from fineprune_cli.engine.training.lrschedule import EpochLr, LrSchedule, lr_at, passed_by_epoch, warmup_length
from fineprune_cli.runner import train


def _cfg(**kw):
    return TrainConfig(**{"epochs": 4, "lr": 0.1, "gamma": 0.2, "milestones": [2], **kw})


def _decays(schedule, samples):
    """Milestones passed in each epoch of a run whose epochs train `samples`."""
    return [schedule.at(e, samples[e - 1], samples[: e - 1]).decays for e in range(1, len(samples) + 1)]


def test_epochs_mode_is_torchs_multisteplr_to_the_bit():
    """An independent reference: MultiStepLR stepped once after each epoch (epoch e runs at
    its lr after e - 1 steps), over every epoch of the paper's 200, milestones included."""
    import torch

    cfg = TrainConfig(epochs=200, lr=0.1, gamma=0.2, milestones=[60, 120, 160])
    schedule = LrSchedule(cfg, 1000, lambda e: 700, scale_pruned=False)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    steps = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[60, 120, 160], gamma=0.2)
    for epoch in range(1, 201):
        expected = opt.param_groups[0]["lr"]
        assert schedule.at(epoch, 700, [700] * (epoch - 1)).value(cfg) == expected, epoch
        assert lr_at(cfg, epoch, 10**6, 0) == expected, epoch  # the trainer's lr past the warm-up
        opt.step()
        steps.step()


def test_a_milestone_decays_the_epoch_after_it_not_its_own():
    """Milestones 2 and 3: epoch 2 (the milestone itself) still runs at 0.1, epoch 3 is the
    first decayed, epoch 4 decayed twice; `epoch >= m` would decay epoch 2."""
    cfg = TrainConfig(epochs=4, lr=0.1, gamma=0.5, milestones=[2, 3])
    assert [passed_by_epoch(cfg, e) for e in (1, 2, 3, 4)] == [0, 0, 1, 2]
    assert [lr_at(cfg, e, 100, 4) for e in (1, 2, 3, 4)] == [0.1, 0.1, 0.05, 0.025]
    schedule = LrSchedule(cfg, 10, lambda e: 10, scale_pruned=False)
    assert _decays(schedule, [10] * 4) == [0, 0, 1, 2]


def test_unset_milestones_are_the_papers_shares_of_the_run():
    """A TrainConfig made in code, never resolved: 30/60/80% of 10 epochs = 3, 6, 8."""
    cfg = TrainConfig(epochs=10, lr=0.1, gamma=0.5)
    assert cfg.milestones is None
    assert [passed_by_epoch(cfg, e) for e in (3, 4, 6, 7, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_the_warmup_ends_at_full_lr_on_its_last_step():
    """4 warm-up steps: steps 0-3 ramp 1/4 .. 4/4, step 3 (the last) is the full lr and step 4
    is not ramped past it; `step <= warmup` would give step 4 5/4 of the lr, `step / warmup`
    a zero lr at step 0."""
    cfg = TrainConfig(lr=0.1, milestones=[2, 3], gamma=0.5)
    assert [lr_at(cfg, 1, s, 4) for s in range(6)] == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1])
    assert lr_at(cfg, 1, 3, 4) == 0.1
    assert lr_at(cfg, 3, 2, 4) == pytest.approx(0.05 * 3 / 4)  # a ramp still running meets a milestone
    assert lr_at(cfg, 1, 0, 0) == 0.1  # no warm-up
    assert lr_at(cfg, 1, 0, 4, base=0.4) == pytest.approx(0.1)  # an LrSchedule's epoch lr, ramped too


def test_the_warmup_counts_a_partial_last_batch_as_a_step():
    """warmup_epochs of full epochs' steps: 96 samples in 20s take 5 steps (4 full + 1 partial),
    100 take 5 (not 6: no empty step); half an epoch of 4 steps is 2."""
    assert warmup_length(TrainConfig(batch_size=20, warmup_epochs=1.0), 96) == 5
    assert warmup_length(TrainConfig(batch_size=20, warmup_epochs=1.0), 100) == 5
    assert warmup_length(TrainConfig(batch_size=25, warmup_epochs=0.5), 100) == 2
    assert warmup_length(TrainConfig(batch_size=20, warmup_epochs=0.0), 100) == 0
    # a fraction of a step rounds to the nearest (Python's round: 1.5 -> 2, 2.5 -> 2); int()
    # would give 1 for 1.5, a ceiling 3 for 2.5
    assert warmup_length(TrainConfig(batch_size=20, warmup_epochs=0.5), 60) == 2  # 0.5 x 3 steps
    assert warmup_length(TrainConfig(batch_size=20, warmup_epochs=0.5), 100) == 2  # 0.5 x 5 steps


def test_progress_equals_epochs_when_every_epoch_trains_everything():
    cfg = _cfg(epochs=10, milestones=[3, 5, 8], lr_schedule="progress")
    schedule = LrSchedule(cfg, 50, lambda e: None, scale_pruned=False)
    by_epoch = [sum(e > m for m in cfg.milestones) for e in range(1, 11)]
    assert _decays(schedule, [50] * 10) == by_epoch
    # the same when every epoch's count is known before the run (regular's planned N): a known
    # epoch must not also be counted as an unknown one (total 500 + 50 per epoch left)
    assert _decays(LrSchedule(cfg, 50, lambda e: 50, scale_pruned=False), [50] * 10) == by_epoch


def test_progress_moves_a_milestone_to_the_runs_own_half():
    # planned 5, 5, 10, 10 of N = 10: 30 in all; half (15) is reached only after epoch 3 ends,
    # so epoch 4 decays, where `epochs` would decay epoch 3 (after milestone 2)
    cfg = _cfg(lr_schedule="progress")
    planned = {1: 5, 2: 5, 3: 10, 4: 10}
    schedule = LrSchedule(cfg, 10, planned.get, scale_pruned=False)
    assert _decays(schedule, [5, 5, 10, 10]) == [0, 0, 0, 1]
    assert _decays(LrSchedule(_cfg(), 10, planned.get, False), [5, 5, 10, 10]) == [0, 0, 1, 1]


def test_progress_estimates_unknown_epochs_from_the_current_one():
    # N = 100, E = 10, milestone 5; a dynamic policy (all unknown) trains 100, 100, then 50 a
    # epoch. Epoch 5: done 300, estimate 300 + 6 x 50 = 600, so p = 0.5: decays there (epochs: 6)
    cfg = _cfg(epochs=10, milestones=[5], lr_schedule="progress")
    schedule = LrSchedule(cfg, 100, lambda e: None, scale_pruned=False)
    assert _decays(schedule, [100, 100] + [50] * 8) == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    # the current epoch is one of the unknown ones it stands for: N = 10, E = 4, milestone 2,
    # trained 10 then 4 a epoch. Epoch 2: 10 done of 10 + 3 x 4 = 22, short of half (11); epoch
    # 3: 14 of 14 + 2 x 4 = 22, past it. Leaving epoch 2 out of its estimate (10 of 18) decays it.
    short = LrSchedule(_cfg(lr_schedule="progress"), 10, lambda e: None, scale_pruned=False)
    assert _decays(short, [10, 4, 4, 4]) == [0, 0, 1, 1]


def test_progress_never_goes_back_up_when_the_estimate_falls():
    # epoch 2 trains 1 of 10: estimate 10 + 1 + 1 + 4 = 16, p = 10/16 >= 1/2 -> decayed; epoch 3
    # trains 10: estimate 11 + 10 + 4 = 25, p = 0.44 < 1/2, yet the lr stays decayed
    cfg = _cfg(lr_schedule="progress")
    planned = {1: None, 2: None, 3: None, 4: 4}
    schedule = LrSchedule(cfg, 10, planned.get, scale_pruned=False)
    assert _decays(schedule, [10, 1, 10, 4]) == [0, 1, 1, 1]
    # only the epochs before `epoch` are read from the history: a longer one (the run's later
    # rows, 7s here) changes nothing; reading epoch 2's row as 7 would give 10/28 < 1/2
    assert schedule.at(2, 1, [10, 7, 7, 7]).decays == 1


def test_lr_scale_pruned_multiplies_by_n_over_samples():
    cfg = _cfg()
    schedule = LrSchedule(cfg, 100, lambda e: None, scale_pruned=True)
    assert schedule.at(1, 70, []).scale == 100 / 70
    assert schedule.at(3, 70, [70, 70]).value(cfg) == pytest.approx(0.1 * 0.2 * 100 / 70, rel=1e-15)
    assert schedule.at(1, 100, []).scale == 1.0  # a full epoch: unchanged
    assert schedule.at(1, 1, []).scale == 100.0  # a single sample trained: x N, the smallest epoch
    assert LrSchedule(cfg, 100, lambda e: None, False).at(1, 70, []).scale == 1.0  # off
    assert EpochLr(0, 1.0).value(cfg) == 0.1


def test_a_pruned_run_records_progress_milestones_and_scaled_lr(tmp_path):
    """random in every epoch up to --anneal 0.5: epochs 1-2 train 70 of 100 samples, 3-4 all;
    340 in all. Milestone 2 of 4 falls at half of that, 170: epoch 3 starts at 140, epoch 4 at
    240, so epoch 4 decays (`epochs` would decay epoch 3); the pruned epochs run x 100/70."""
    cfg = build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "data.subset": 100,
            "data.test_subset": 50,
            "train.epochs": 4,
            "train.batch_size": 50,
            "train.milestones": [2],
            "train.warmup_epochs": 0.0,
            "train.lr_schedule": "progress",
            "train.lr_scale_pruned": True,
            "run.device": "cpu",
            "run.out": str(tmp_path / "r"),
            "prune.enabled": True,
            "prune.policy": "random",
            "prune.anneal": 0.5,
            "prune.window": 1,
            "prune.start": 0,
            "prune.block": 1,
            "prune.count": 1,
        },
    )
    train(cfg, show_progress=False)
    rows = metrics_rows(tmp_path / "r")
    assert [int(r["samples"]) for r in rows] == [70, 70, 100, 100]
    assert [float(r["lr"]) for r in rows] == pytest.approx([0.1 * 100 / 70, 0.1 * 100 / 70, 0.1, 0.1 * 0.2], rel=1e-12)


def test_progress_counts_the_samples_done_exactly_at_a_milestone():
    # Milestone 2 of 4 is half the run's samples. Planned 10, 5, 3, 2 of N = 10 (20 in all): after
    # epoch 1, 10 of 20 is exactly half, so epoch 2 decays. Planned 10, 5, 3, 3 (21): 10 of 21 is
    # just short of half, so epoch 3 (15 of 21) is the first; a count one sample high (11 of 22)
    # would decay epoch 2.
    cfg = _cfg(lr_schedule="progress")
    for planned, decays in (([10, 5, 3, 2], [0, 1, 1, 1]), ([10, 5, 3, 3], [0, 0, 1, 1])):
        schedule = LrSchedule(cfg, 10, lambda e, p=planned: p[e - 1], scale_pruned=False)
        assert _decays(schedule, planned) == decays, planned

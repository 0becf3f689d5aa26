import pytest
import torch

from conftest import toy_dataset, toy_trainer
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning.policy import EpochPlan


def test_hook_sees_every_kept_sample_once_with_its_own_loss():
    trainer = toy_trainer()
    calls = []
    keep = torch.tensor([0, 3, 5, 8, 13, 21, 34, 55, 89, 90, 91, 92, 93, 94, 95, 1, 2, 4, 6, 7, 9, 10])
    loss_sum = trainer.train_epoch(1, EpochPlan(keep), observe=lambda idx, losses: calls.append((idx, losses)))
    seen = torch.cat([idx for idx, _ in calls])
    assert sorted(seen.tolist()) == sorted(keep.tolist())
    assert [len(idx) for idx, _ in calls] == [20, 2]  # partial last batch kept
    assert all(losses.shape == idx.shape and (losses > 0).all() for idx, losses in calls)
    assert loss_sum.item() == pytest.approx(sum(l.sum().item() for _, l in calls), rel=1e-5)


def test_same_seed_same_numbers():
    a, b = toy_trainer(seed=3), toy_trainer(seed=3)
    for epoch in range(1, 4):
        assert a.train_epoch(epoch).item() == b.train_epoch(epoch).item()
    assert a.evaluate() == b.evaluate()
    assert toy_trainer(seed=4).train_epoch(1).item() != a.train_epoch(4).item()


def test_trainer_applies_the_warmup_ramp_and_the_milestones():
    trainer = toy_trainer(augment=False, warmup_epochs=1.0)  # 96 samples: 5 steps an epoch
    seen = []
    trainer.optimizer.register_step_pre_hook(lambda opt, a, k: seen.append(opt.param_groups[0]["lr"]))
    for epoch in (1, 2, 3):
        trainer.train_epoch(epoch)
    assert seen[:5] == pytest.approx([0.05 * s / 5 for s in range(1, 6)])
    assert seen[5:10] == pytest.approx([0.05] * 5) and seen[10:] == pytest.approx([0.01] * 5)


def test_plan_weights_scale_each_sample_loss():
    keep = torch.arange(96)
    doubled = toy_trainer(augment=False, weight_decay=0.0)
    doubled.train_epoch(1, EpochPlan(keep, weights=torch.full((96,), 2.0)))
    faster = toy_trainer(augment=False, weight_decay=0.0, lr=0.1)  # SGD: 2 x gradient = 2 x lr
    faster.train_epoch(1, EpochPlan(keep))
    for a, b in zip(doubled.model.parameters(), faster.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    frozen = toy_trainer(augment=False, weight_decay=0.0)
    before = [p.clone() for p in frozen.model.parameters()]
    loss = frozen.train_epoch(1, EpochPlan(keep, weights=torch.zeros(96)))
    assert loss.item() > 0  # the reported loss is unweighted
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.model.parameters()))


def test_training_lowers_the_loss():
    trainer = toy_trainer(augment=False)
    first = trainer.evaluate()[0]
    for epoch in range(1, 7):
        trainer.train_epoch(epoch)
    loss, acc = trainer.evaluate()
    assert loss < 0.8 * first and acc > 60.0  # chance is 25% with four classes


def test_static_batches_pad_the_last_batch_without_training_on_the_padding():
    """What --compile uses: one batch shape for every step, padding sliced off before the loss."""
    keep = torch.arange(0, 90, 2)  # 45 samples: 20, 20, 5
    padded, plain = toy_trainer(augment=False, static=True), toy_trainer(augment=False, static=False)
    shapes = []
    padded.model.register_forward_hook(lambda m, i, o: shapes.append(o.shape[0]))
    calls = []
    total = padded.train_epoch(1, EpochPlan(keep), observe=lambda idx, losses: calls.append((idx, losses)))
    assert shapes == [20, 20, 20]
    assert [len(idx) for idx, _ in calls] == [20, 20, 5]
    assert sorted(torch.cat([idx for idx, _ in calls]).tolist()) == keep.tolist()
    # the padding passes through the model but adds no loss: the same epoch loss as unpadded,
    # up to batch-norm-free LeNet's float noise
    assert total.item() == pytest.approx(plain.train_epoch(1, EpochPlan(keep)).item(), rel=1e-5)
    for a, b in zip(padded.model.parameters(), plain.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_last_batch_of_one_trains_under_batch_norm():
    """21 samples in batches of 20 leave one: batch norm cannot train on a single sample, so a
    second passes through the model and is sliced away before the loss."""
    ds = toy_dataset()
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 4),
    )
    trainer = Trainer(
        model,
        DeviceData.build(ds, torch.device("cpu"), False),
        TrainConfig(batch_size=20, lr=0.05, milestones=[2]),
        torch.device("cpu"),
        0,
    )
    sizes, calls = [], []
    model[1].register_forward_hook(lambda m, i, o: sizes.append(o.shape[0]))
    total = trainer.train_epoch(1, EpochPlan(torch.arange(21)), observe=lambda i, l: calls.append(len(i)))
    assert sizes == [20, 2] and calls == [20, 1]
    assert torch.isfinite(total)

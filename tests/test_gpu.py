"""The CUDA fast path (bf16 autocast, channels_last, fused SGD). Skipped, visibly, without CUDA."""

import pytest
import torch

from fineprune_cli import models
from fineprune_cli.engine.config import TrainConfig
from fineprune_cli.engine.data import make_synthetic
from fineprune_cli.engine.trainer import DeviceData, Trainer
from fineprune_cli.pruning import PruneConfig, create

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: no GPU on this machine")]


def _fine(n, fraction, device):
    """fine-pruning that prunes every epoch from epoch 1 (window 2, start 1, one-epoch blocks)."""
    cfg = PruneConfig(enabled=True, window=2, start=1, attenuation=1, block=1, count=1, prune_fraction=fraction)
    return create("fine", n, cfg, device=device)


def _epoch(trainer, policy, epoch):
    trainer.train_epoch(epoch, policy.plan(epoch), policy.observe)
    policy.sync()


def test_cuda_epoch_with_pruning_learns_and_keeps_data_on_device():
    device = torch.device("cuda")
    ds = make_synthetic(num_train=4096, num_test=1024)
    data = DeviceData.build(ds, device, augment=True)
    assert data.train_x.is_cuda and data.train_x.dtype == torch.bfloat16
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), device)
    assert trainer.optimizer.defaults.get("fused")
    policy = _fine(data.num_train, 0.5, device)
    first = trainer.evaluate()[0]
    for epoch in range(1, 4):
        _epoch(trainer, policy, epoch)
    assert policy.scores.is_cuda and policy.scores.sum() > 0
    assert trainer.evaluate()[0] < first


def test_compiled_pruned_epochs_do_not_recompile():
    """Full and pruned epochs end in different partial batches; padded batches keep one shape."""
    import torch._dynamo

    device = torch.device("cuda")
    data = DeviceData.build(make_synthetic(num_train=1000, num_test=500), device, augment=True)
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), device, compile=True)
    policy = _fine(data.num_train, 0.3, device)
    torch._dynamo.reset()
    _epoch(trainer, policy, 1)                                   # pruned: 700 = 5 x 128 + 60
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for epoch in range(2, 6):                                    # full: 1000 = 7 x 128 + 104
        _epoch(trainer, policy, epoch)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled

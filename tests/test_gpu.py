"""The CUDA fast path (bf16 autocast, channels_last, fused SGD). Skipped, visibly, without CUDA."""

import pytest
import torch

from fineprune_cli import models
from fineprune_cli.engine.config import TrainConfig
from fineprune_cli.engine.data import make_synthetic
from fineprune_cli.pruning import Pruner
from fineprune_cli.pruning.schedule import PruneSchedule
from fineprune_cli.engine.trainer import DeviceData, Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: no GPU on this machine")]


def test_cuda_epoch_with_pruning_learns_and_keeps_data_on_device():
    device = torch.device("cuda")
    ds = make_synthetic(num_train=4096, num_test=1024)
    data = DeviceData.build(ds, device, augment=True)
    assert data.train_x.is_cuda and data.train_x.dtype == torch.bfloat16
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), device)
    assert trainer.optimizer.defaults.get("fused")
    pruner = Pruner(data.num_train, PruneSchedule(window=2, start=1, attenuation=1, block=1, count=1),
                    0.5, device=device)
    first = trainer.evaluate()[0]
    for epoch in range(1, 4):
        trainer.train_epoch(pruner.begin_epoch(epoch), pruner.update)
    assert pruner.counts.is_cuda and pruner.counts.sum() > 0
    assert trainer.evaluate()[0] < first


def test_compiled_pruned_epochs_do_not_recompile():
    """Full and pruned epochs end in different partial batches; padded batches keep one shape."""
    import torch._dynamo

    device = torch.device("cuda")
    data = DeviceData.build(make_synthetic(num_train=1000, num_test=500), device, augment=True)
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), device, compile=True)
    pruner = Pruner(data.num_train, PruneSchedule(window=2, start=1, attenuation=1, block=1, count=1),
                    0.3, device=device)
    torch._dynamo.reset()
    trainer.train_epoch(pruner.begin_epoch(1), pruner.update)   # pruned: 700 = 5 x 128 + 60
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for epoch in range(2, 6):                                    # full: 1000 = 7 x 128 + 104
        trainer.train_epoch(pruner.begin_epoch(epoch), pruner.update)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled

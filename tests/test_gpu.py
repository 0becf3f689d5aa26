"""The CUDA path (bf16 autocast, channels_last, fused SGD, torch.compile with CUDA graphs), run by
`make gpu STEP=check` on a GPU machine. Skipped, visibly, without CUDA."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# The engine pieces these checks drive, as the session's fit loop uses them
from fineprune_cli import models
from fineprune_cli.engine.inputs.data import make_synthetic
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.device import Stopwatch
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning import PruneConfig, create, tracker

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: no GPU on this machine"),
]

ROOT = Path(__file__).resolve().parents[1]
CUDA = torch.device("cuda")
ALTERNATING = {"window": 2, "start": 1, "attenuation": 1, "block": 1, "count": 1}  # odd epochs prune


def _fine(num_train: int, fraction: float):
    return create("fine", num_train, PruneConfig(enabled=True, prune_fraction=fraction, **ALTERNATING), device=CUDA)


def _session(compile: bool, num_train: int = 1000):
    """Trainer, fine-pruning policy and its observe timed on CUDA events, as `fit` builds them,
    on CIFAR-shaped synthetic data."""
    data = DeviceData.build(make_synthetic(num_train=num_train, num_test=500), CUDA, augment=True)
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), CUDA, compile=compile)
    policy, watch = _fine(num_train, 0.3), Stopwatch(CUDA)

    def observe(*args):
        with watch.section():
            policy.observe(*args)

    return trainer, policy, observe


def _epoch(trainer, policy, observe, epoch, during=contextlib.nullcontext) -> int:
    """One epoch as `fit` runs it: plan, training (inside `during`), sync, evaluation.
    Returns the number of samples trained."""
    plan = policy.plan(epoch)
    torch.cuda.synchronize()
    with during():
        trainer.train_epoch(epoch, plan, observe)
    torch.cuda.synchronize()
    policy.sync()
    trainer.evaluate()
    return plan.samples


@contextlib.contextmanager
def _host_syncs_fail():
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_cuda_epoch_with_pruning_learns_and_keeps_data_on_device():
    device = torch.device("cuda")
    ds = make_synthetic(num_train=4096, num_test=1024)
    data = DeviceData.build(ds, device, augment=True)
    assert data.train_x.is_cuda and data.train_x.dtype == torch.bfloat16
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), device)
    assert trainer.optimizer.defaults.get("fused")
    policy = _fine(data.num_train, 0.5)
    first = trainer.evaluate()[0]
    for epoch in range(1, 4):
        trainer.train_epoch(epoch, policy.plan(epoch), policy.observe)
        policy.sync()
    assert policy.scores.is_cuda and policy.scores.sum() > 0
    assert trainer.evaluate()[0] < first


def test_the_sync_detector_is_armed():
    """Without this, the next test would pass on a torch whose detector did nothing."""
    with _host_syncs_fail(), pytest.raises(RuntimeError, match="synchroniz"):
        torch.ones(1, device=CUDA).item()


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_no_host_sync_inside_a_training_epoch(compile, monkeypatch):
    """Full and pruned epochs with DroppingCount on, flushing inside the epoch (as a long run's
    epochs do, every 512 steps). Compiled runs are checked after a pruned and a full warm-up
    epoch: compiling and recording CUDA graphs synchronise, once."""
    monkeypatch.setattr(tracker, "FLUSH_EVERY", 3)
    trainer, policy, observe = _session(compile)
    first = 3 if compile else 1
    for epoch in range(1, first):
        _epoch(trainer, policy, observe, epoch)
    sizes = [_epoch(trainer, policy, observe, epoch, _host_syncs_fail) for epoch in range(first, first + 4)]
    assert sorted(set(sizes)) == [700, 1000]  # pruned and full epochs were both checked
    policy.sync()
    assert policy.scores.sum() > 0  # and the tracker counted in them


def test_compiled_training_does_not_recompile_after_a_full_and_a_pruned_epoch():
    """Full and pruned epochs end in different partial batches; padded batches keep one shape.
    Evaluation runs between epochs, as in a run (its graphs are compiled in the warm-up)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    trainer, policy, observe = _session(compile=True)
    for epoch in (1, 2):  # pruned: 700 = 5 x 128 + 60; full: 1000 = 7 x 128 + 104
        _epoch(trainer, policy, observe, epoch)
    graphs = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(error_on_recompile=True):
        sizes = [_epoch(trainer, policy, observe, epoch) for epoch in range(3, 7)]
    assert sorted(set(sizes)) == [700, 1000]
    assert graphs > 0 and counters["stats"]["unique_graphs"] == graphs


def _selective(compile: bool):
    """A compiled or eager ResNet-18 trainer and Selective-Backprop in every epoch, a full step every
    third: of 1000 samples in batches of 128 steps 0, 1, 3, 4, 6 and the short last one (7, 104
    rows, padded to 128) select, 64 rows of a full batch and 52 of the short one."""
    data = DeviceData.build(make_synthetic(num_train=1000, num_test=500), CUDA, augment=True)
    trainer = Trainer(models.create("resnet18"), data, TrainConfig(milestones=[]), CUDA, compile=compile)
    cfg = PruneConfig(sb_start=0.0, sb_end=1.0, sb_interrupt=3)
    return trainer, create("selective-backprop", 1000, cfg, device=CUDA, epochs=10)


def _selective_epoch(trainer, policy, epoch, during=contextlib.nullcontext) -> int:
    torch.cuda.synchronize()
    with during():
        trainer.train_epoch(epoch, policy.plan(epoch), select=policy)
    torch.cuda.synchronize()
    trainer.evaluate()
    return trainer.skipped


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_no_host_sync_inside_a_selective_backprop_epoch(compile):
    """The whole-batch forward without gradients, the draw on the device and the kept rows' step:
    nothing waits for the host (a warm-up epoch first: compiling synchronises, once)."""
    trainer, policy = _selective(compile)
    _selective_epoch(trainer, policy, 1)
    assert [_selective_epoch(trainer, policy, e, _host_syncs_fail) for e in (2, 3)] == [372, 372]


def test_compiled_selective_backprop_does_not_recompile():
    """Three shapes reach the compiled model, whatever the epoch: the batch without gradients, the
    batch with them (the full steps), the kept rows (a short batch's padded to a full one's)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    trainer, policy = _selective(compile=True)
    _selective_epoch(trainer, policy, 1)
    graphs = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(error_on_recompile=True):
        skipped = [_selective_epoch(trainer, policy, e) for e in (2, 3, 4)]
    assert skipped == [372] * 3 and graphs > 0 and counters["stats"]["unique_graphs"] == graphs


def _fashion_mnist_dir() -> str:
    """Debian's copy, or the one `make gpu-data` puts in .gpu-data/ for the GPU machine."""
    for d in (
        os.environ.get("FINEPRUNE_FMNIST_DIR"),
        ROOT / ".gpu-data" / "fashion-mnist",
        "/usr/share/datasets/fashion-mnist",
    ):
        if d and Path(d, "train-images-idx3-ubyte.gz").exists():
            return str(d)
    pytest.skip("Fashion-MNIST not found: `make gpu-data` copies it to .gpu-data/fashion-mnist; carry that")


def _final_accuracy(device: str, data_dir: str, out: Path) -> float:
    """LeNet, 5 epochs, seed 0, through the command line as a user runs it."""
    cmd = [
        sys.executable,
        "-m",
        "fineprune_cli",
        "train",
        "--model",
        "lenet",
        "--dataset",
        "fashion-mnist",
        "--data-dir",
        data_dir,
        "--epochs",
        "5",
        "--seed",
        "0",
        "--device",
        device,
        "--checkpoint-every",
        "0",
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())["final_accuracy"]


def test_cuda_lenet_on_fashion_mnist_reaches_the_cpu_accuracy(tmp_path):
    data_dir = _fashion_mnist_dir()
    acc = {device: _final_accuracy(device, data_dir, tmp_path / device) for device in ("cpu", "cuda")}
    assert min(acc.values()) > 80, acc  # both learned: two broken runs would also agree
    assert abs(acc["cuda"] - acc["cpu"]) <= 1.0, acc

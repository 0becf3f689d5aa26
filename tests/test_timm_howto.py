"""docs/howto/timm.md's blocks, run in its order on timm's own parts (issue 55): an image folder
read by timm's ImageDataset, timm's create_loader and model, its scheduler factory, its losses
and Mixup. Only train.py's own `train_one_epoch` and `validate` are stood in for, the first
running the page's lines of its loop. Catches a documented line that does not run against timm,
a loader that loses timm's transforms, a per-sample loss that is not timm's, a log that records
another lr or count than what trained."""

import csv
import math
import re
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import fineprune
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from timm import create_model
from timm.data import ImageDataset, Mixup, create_loader
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.scheduler import create_scheduler_v2

PAGE = Path(__file__).resolve().parents[1] / "docs" / "howto" / "timm.md"
N_TRAIN, BATCH = 40, 16  # drop_last trains 32 of the 40 in each epoch


def blocks():
    """The page's Python blocks, as its numbered steps indent them."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)]


def _folder(root: Path, n: int) -> Path:
    """An image folder of two classes (red and blue squares on noise), as timm reads one."""
    g = torch.Generator().manual_seed(n)
    for i in range(n):
        c = i % 2
        pixels = (torch.rand(32, 32, 3, generator=g) * 100).to(torch.uint8)
        pixels[8:24, 8:24, 2 * c] += 120
        (root / str(c)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.numpy()).save(root / str(c) / f"{i}.png")
    return root


@pytest.fixture
def scope(tmp_path, monkeypatch):
    """What train.py holds where the page's blocks go."""
    monkeypatch.chdir(tmp_path)  # the run, on its own, writes results/runs/... here
    monkeypatch.delenv("FINEPRUNE_JOB", raising=False)
    torch.manual_seed(0)
    args = SimpleNamespace(no_prefetcher=True, seed=0, epochs=3, data_dir=str(_folder(tmp_path / "data", N_TRAIN)),
                           num_classes=2, model="test_efficientnet_gn", lr=0.01, batch_size=BATCH, mixup=0.0, cutmix=0.0,
                           smoothing=0.1, workers=0, pin_mem=False)  # fmt: skip
    dataset_train, dataset_eval = ImageDataset(args.data_dir), ImageDataset(str(_folder(tmp_path / "val", 12)))
    model = create_model(args.model, pretrained=False, num_classes=args.num_classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    size = dict(input_size=(3, 32, 32), use_prefetcher=False, num_workers=0, device=torch.device("cpu"))
    return {
        "args": args, "torch": torch, "F": F, "fineprune": fineprune, "time": time, "model": model,
        "optimizer": optimizer, "dataset_train": dataset_train, "dataset_eval": dataset_eval,
        "loader_train": create_loader(dataset_train, batch_size=BATCH, is_training=True, **size),
        "loader_eval": create_loader(dataset_eval, batch_size=12, **size),
    }  # fmt: skip


def test_the_page_has_the_blocks_this_test_runs():
    assert len(blocks()) == 6


def test_the_prefetcher_is_refused_in_one_error_line(scope):
    scope["args"].no_prefetcher = False
    with pytest.raises(SystemExit, match="^error: run train.py with --no-prefetcher"):
        exec(blocks()[0], scope)
    scope["args"].no_prefetcher = True
    exec(blocks()[0], scope)


def test_the_per_sample_loss_is_timms_loss_sample_by_sample(scope):
    exec(blocks()[3], scope)
    per_sample, output = scope["per_sample_loss"], torch.randn(8, 2)
    target = torch.tensor([0, 1] * 4)
    assert torch.allclose(per_sample(output, target).mean(), LabelSmoothingCrossEntropy(0.1)(output, target))
    mixed = Mixup(mixup_alpha=0.4, label_smoothing=0.1, num_classes=2)(torch.randn(8, 3, 4, 4), target)[1]
    assert per_sample(output, mixed).shape == (8,)
    assert torch.allclose(per_sample(output, mixed).mean(), SoftTargetCrossEntropy()(output, mixed))


def test_the_pages_lines_harness_timms_loader_and_record_what_trained(scope, tmp_path):
    prefetcher, start, loader, loss, loop, epoch = blocks()
    for block in (prefetcher, start, loader, loss):
        exec(block, scope)
    seen = []

    def train_one_epoch(*_):
        """train.py's, as far as the page changes it: its loop, the sampler's loss backpropagated."""
        inner = {**scope, "loader": scope["loader_train"], "loss_fn": scope["per_sample_loss"]}
        exec(loop.replace("    ...  # as before: backward", "    loss.backward(); seen.append(len(idx))  #"), inner)
        return {"loss": inner["loss"].item()}

    def validate(*_):
        with torch.no_grad():
            correct = sum((scope["model"](x).argmax(1) == y).sum().item() for x, y in scope["loader_eval"])
        return {"top1": 100 * correct / len(scope["dataset_eval"]), "loss": 0.5}

    scheduler, epochs = create_scheduler_v2(scope["optimizer"], "cosine", num_epochs=3, warmup_epochs=1)
    scope.update(train_one_epoch=train_one_epoch, validate=validate, seen=seen)
    lrs = []
    for e in range(epochs):
        scope["epoch"] = e
        exec(epoch, scope)
        lrs.append(scope["lr"])
        scheduler.step(e + 1)
    summary = scope["run"].finish()
    assert summary.status.value == "complete" and summary.num_train == N_TRAIN and summary.num_test == 12
    (folder,) = (tmp_path / "results" / "runs").iterdir()
    with open(folder / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["samples"]) for r in rows] == [32] * 3 and sum(seen) == 96  # drop_last: what trained
    assert [float(r["lr"]) for r in rows] == pytest.approx(lrs) and lrs[0] < lrs[1]  # the warm-up's lr, then the peak
    assert all(math.isfinite(float(r["cpu_seconds"])) for r in rows)
    first = next(iter(scope["loader_train"]))
    assert first[1].dtype == torch.float32 and first[1].shape == (BATCH, 3, 32, 32)  # timm's transforms kept

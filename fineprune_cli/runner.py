"""`fineprune train` as a plain function: config in, recorded run out."""

from __future__ import annotations

import platform
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

import models

from . import console
from .config import Config, validate
from .data import load_dataset
from .pruner import Pruner
from .records import RunRecord, default_run_dir, git_commit
from .timing import Stopwatch, synchronize
from .trainer import DeviceData, Trainer, resolve_device, wants_augment


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu}, {torch.get_num_threads()} threads"


def build_pruner(cfg: Config, num_samples: int, device: torch.device) -> Pruner | None:
    if not cfg.prune.enabled:
        return None
    p = cfg.prune
    return Pruner(num_samples, p.schedule(), p.prune_fraction, p.tolerance, p.policy,
                  seed=cfg.run.seed + 1, device=device)


def best3(accuracies: list[float]) -> float:
    """Mean of the three best test accuracies, as in the paper's Table 2."""
    top = sorted(accuracies, reverse=True)[:3]
    return sum(top) / len(top) if top else float("nan")


def train(cfg: Config, show_progress: bool = True, command: str | None = None,
          bar: Any = None) -> dict[str, Any]:
    """Train as `cfg` says. `command` (how it was launched) is kept in the summary; `bar`
    is a caller's progress bar to advance once per epoch instead of showing our own."""
    validate(cfg)
    record = RunRecord(Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset))
    device = resolve_device(cfg.run.device)
    d = cfg.data
    dataset = load_dataset(d.dataset, d.data_dir, d.download, d.subset, seed=cfg.run.seed,
                           test_subset=d.test_subset)
    torch.manual_seed(cfg.run.seed)
    kwargs = {"widen": cfg.model.widen} if cfg.model.widen else {}
    model = models.create(cfg.model.name, dataset.in_channels, dataset.num_classes, **kwargs)
    data = DeviceData.build(dataset, device, wants_augment(d.augment, dataset))
    trainer = Trainer(model, data, cfg.train, device, cfg.run.seed, cfg.run.compile)
    pruner = build_pruner(cfg, data.num_train, device)
    record.write_config(cfg.to_dict())
    summary = _base_summary(cfg, device, record.path, data.num_train)
    if command:
        summary["command"] = command
    record.write_summary(summary)
    _loop(cfg, trainer, pruner, record, summary, show_progress, bar)
    summary["status"] = "complete"
    summary["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    record.write_summary(summary)
    return summary


def _base_summary(cfg: Config, device: torch.device, path: Path, num_train: int) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "status": "incomplete", "model": cfg.model.name, "dataset": cfg.data.dataset,
        "epochs": cfg.train.epochs, "epochs_completed": 0, "seed": cfg.run.seed,
        "device": describe_device(device), "num_train": num_train, "run_dir": str(path),
        "torch": torch.__version__, "git_commit": git_commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "pruning": cfg.prune.enabled,
        "dataset_label": cfg.data.label or cfg.data.dataset,
        "policy": cfg.prune.policy if cfg.prune.enabled else "regular",
    }
    if cfg.prune.enabled:
        summary["schedule"] = {k: getattr(cfg.prune, k) for k in
                               ("window", "start", "attenuation", "block", "count",
                                "prune_fraction", "tolerance")}
    return summary


def _loop(cfg: Config, trainer: Trainer, pruner: Pruner | None, record: RunRecord,
          summary: dict[str, Any], show_progress: bool, outer_bar: Any = None) -> None:
    rows: list[dict[str, Any]] = []
    watch = Stopwatch(trainer.device)
    hook = None
    if pruner is not None:
        def hook(idx: torch.Tensor, losses: torch.Tensor) -> None:
            with watch.section():
                pruner.update(idx, losses)
    n_epochs = cfg.train.epochs
    train_total = eval_total = overhead_before = 0.0
    own_bar = console.progress(n_epochs, f"{cfg.model.name} on {cfg.data.dataset}", show_progress)
    with (nullcontext(outer_bar) if outer_bar is not None else own_bar) as bar:
        for epoch in range(1, n_epochs + 1):
            lr = trainer.lr
            synchronize(trainer.device)
            t0 = time.perf_counter()
            keep = None
            if pruner is not None:
                with watch.section():
                    keep = pruner.begin_epoch(epoch)
            loss_sum = trainer.train_epoch(keep, hook)
            synchronize(trainer.device)
            t1 = time.perf_counter()
            samples = trainer.data.num_train if keep is None else keep.numel()
            test_loss, test_acc = trainer.evaluate()
            eval_total += time.perf_counter() - t1
            train_total += t1 - t0
            overhead = watch.seconds()
            rows.append({
                "epoch": epoch, "lr": lr, "samples": samples, "train_seconds": round(t1 - t0, 4),
                "train_loss": loss_sum.item() / samples, "test_loss": test_loss,
                "test_accuracy": test_acc, "pruned": int(samples < trainer.data.num_train),
                "overhead_seconds": round(overhead - overhead_before, 5),
            })
            overhead_before = overhead
            if pruner is not None and pruner.schedule.window_ends(epoch, n_epochs):
                record.save_counts(pruner.schedule.window_index(epoch), pruner.counts)
            _update_summary(summary, rows, train_total, eval_total, overhead, pruner)
            record.write_metrics(rows)
            record.write_summary(summary)
            bar.advance(f"acc {test_acc:.2f}%")


def _update_summary(summary: dict[str, Any], rows: list[dict[str, Any]], train_s: float,
                    eval_s: float, overhead_s: float, pruner: Pruner | None) -> None:
    accs = [r["test_accuracy"] for r in rows]
    seen = sum(r["samples"] for r in rows)
    summary.update({
        "epochs_completed": len(rows), "train_seconds": round(train_s, 3),
        "eval_seconds": round(eval_s, 3), "final_accuracy": accs[-1], "best3_accuracy": best3(accs),
        "samples_seen": seen,
        "samples_skipped": len(rows) * summary["num_train"] - seen,
    })
    if pruner is not None:
        summary["pruning_epochs"] = [r["epoch"] for r in rows if r["pruned"]]
        summary["overhead_seconds"] = round(overhead_s, 4)

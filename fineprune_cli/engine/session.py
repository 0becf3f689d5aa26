"""`fineprune train` as a plain function: config in, recorded run out."""

from __future__ import annotations

import math
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import models

from . import checkpoint, console, distributed
from .config import Config, config_from_dict, validate
from .errors import ConfigError
from .data import load_dataset
from .pruner import Pruner
from .distributed import World
from .records import NullRecord, RunRecord, default_run_dir, git_commit, load_run_config, read_summary
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


def build_pruner(cfg: Config, num_samples: int, device: torch.device,
                 world: World = distributed.SINGLE) -> Pruner | None:
    if not cfg.prune.enabled:
        return None
    p = cfg.prune
    reduce = (lambda counts: distributed.all_sum(counts, world)) if world.active else None
    return Pruner(num_samples, p.schedule(), p.prune_fraction, p.tolerance, p.policy,
                  seed=cfg.run.seed + 1, device=device, reduce=reduce, owns_counts=world.main)


def best3(accuracies: list[float]) -> float:
    """Mean of the three best test accuracies, as in the paper's Table 2."""
    top = sorted(accuracies, reverse=True)[:3]
    return sum(top) / len(top) if top else float("nan")


@dataclass
class Progress:
    """What a run has done so far; a checkpoint stores it, a resumed run starts from it."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    train_s: float = 0.0
    eval_s: float = 0.0
    overhead_s: float = 0.0


@dataclass
class Session:
    cfg: Config
    record: RunRecord
    trainer: Trainer
    pruner: Pruner | None
    summary: dict[str, Any]
    done: Progress
    world: World = distributed.SINGLE


def train(cfg: Config, show_progress: bool = True, command: str | None = None,
          bar: Any = None) -> dict[str, Any]:
    """Train as `cfg` says. `command` (how it was launched) is kept in the summary; `bar`
    is a caller's progress bar to advance once per epoch instead of showing our own."""
    validate(cfg)
    world = distributed.from_env()
    if world.active and cfg.run.dist_mode != "sync":
        from .paramserver import train_ps
        return train_ps(cfg, world, command)
    path = Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset)
    record = RunRecord(path) if world.main else NullRecord(path)
    trainer, pruner = _build(cfg, world)
    record.write_config(cfg.to_dict())
    summary = _base_summary(cfg, trainer.device, record.path, trainer.data.num_train)
    summary["world_size"] = world.size
    if command:
        summary["command"] = command
    record.write_summary(summary)
    return _run(Session(cfg, record, trainer, pruner, summary, Progress(), world), show_progress, bar)


def resume(run_dir: Path, show_progress: bool = True, bar: Any = None) -> dict[str, Any]:
    """Continue an interrupted run from its checkpoint, as if it had never stopped."""
    summary = read_summary(run_dir)
    if summary.get("status") == "complete":
        raise ConfigError(f"{run_dir} is already complete")
    cfg = validate(config_from_dict(load_run_config(run_dir)))
    cfg.run.out = str(run_dir)
    world = distributed.from_env()
    record = RunRecord(Path(run_dir)) if world.main else NullRecord(Path(run_dir))
    trainer, pruner = _build(cfg, world)
    state = checkpoint.load(record.path, trainer.device)
    trainer.load_state_dict(state["trainer"])
    if pruner is not None:
        pruner.load_state_dict(state["pruner"])
    checkpoint.restore_rng(state)
    done = Progress(**state["progress"])
    summary["status"] = "incomplete"
    summary.setdefault("resumed_after_epochs", []).append(len(done.rows))
    record.write_metrics(done.rows)  # epochs after the checkpoint are trained again
    return _run(Session(cfg, record, trainer, pruner, summary, done, world), show_progress, bar)


def _build(cfg: Config, world: World) -> tuple[Trainer, Pruner | None]:
    device = resolve_device(distributed.device_for(world, cfg.run.device))
    distributed.init(world, device.type)
    d = cfg.data
    dataset = load_dataset(d.dataset, d.data_dir, d.download, d.subset, seed=cfg.run.seed,
                           test_subset=d.test_subset)
    torch.manual_seed(cfg.run.seed)
    kwargs = {"widen": cfg.model.widen} if cfg.model.widen else {}
    model = models.create(cfg.model.name, dataset.in_channels, dataset.num_classes, **kwargs)
    data = DeviceData.build(dataset, device, wants_augment(d.augment, dataset))
    trainer = Trainer(model, data, cfg.train, device, cfg.run.seed, cfg.run.compile, cfg.run.compile_mode,
                      world=world)
    return trainer, build_pruner(cfg, data.num_train, device, world)


def _run(s: Session, show_progress: bool, bar: Any) -> dict[str, Any]:
    finished = False
    try:
        with checkpoint.StopRequest() as stop:
            _loop(s, stop, show_progress, bar)
        s.summary["status"] = "complete"
        s.summary["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        s.record.write_summary(s.summary)
        finished = True
        return s.summary
    finally:
        distributed.shutdown(finished)


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


def _loop(s: Session, stop: checkpoint.StopRequest, show_progress: bool, outer_bar: Any) -> None:
    trainer, pruner, done, n_epochs = s.trainer, s.pruner, s.done, s.cfg.train.epochs
    watch = Stopwatch(trainer.device, done.overhead_s)
    own_bar = console.progress(n_epochs, f"{s.cfg.model.name} on {s.cfg.data.dataset}",
                               show_progress and s.world.main)
    with (nullcontext(outer_bar) if outer_bar is not None else own_bar) as bar:
        for _ in done.rows:
            bar.advance()
        for epoch in range(len(done.rows) + 1, n_epochs + 1):
            row = _epoch(epoch, trainer, pruner, watch, done)
            if not math.isfinite(row["train_loss"]):
                _diverged(s, epoch, row)
            if pruner is not None and pruner.schedule.window_ends(epoch, n_epochs):
                s.record.save_counts(pruner.schedule.window_index(epoch), pruner.counts)
            _update_summary(s.summary, done, pruner)
            s.record.write_metrics(done.rows)
            bar.advance(f"acc {row['test_accuracy']:.2f}%")
            every = s.cfg.run.checkpoint_every
            stopping = _any_rank(stop.requested is not None, s.world, trainer.device)
            if stopping or epoch == n_epochs or (every and epoch % every == 0):
                state = _state(s)  # on every rank: the global counts need all of them
                if s.world.main:
                    checkpoint.save(s.record.path, state)
            s.record.write_summary(s.summary)
            if stopping and epoch < n_epochs:
                s.summary["status"] = "interrupted"
                s.record.write_summary(s.summary)
                raise checkpoint.Interrupted(
                    f"{stop.requested or 'a signal to another rank'}: stopped after epoch {epoch} of {n_epochs}; "
                    f"continue with: fineprune train --resume {s.record.path}")


def _epoch(epoch: int, trainer: Trainer, pruner: Pruner | None, watch: Stopwatch,
           done: Progress) -> dict[str, Any]:
    lr = trainer.lr
    synchronize(trainer.device)
    t0 = time.perf_counter()
    keep = None
    if pruner is not None:
        with watch.section():
            keep = pruner.begin_epoch(epoch)
    loss_sum = trainer.train_epoch(keep, _tracking_hook(pruner, watch))
    synchronize(trainer.device)
    t1 = time.perf_counter()
    samples = trainer.data.num_train if keep is None else keep.numel()
    test_loss, test_acc = trainer.evaluate()
    done.eval_s += time.perf_counter() - t1
    done.train_s += t1 - t0
    overhead = watch.seconds()
    row = {
        "epoch": epoch, "lr": lr, "samples": samples, "train_seconds": round(t1 - t0, 4),
        "train_loss": loss_sum.item() / samples, "test_loss": test_loss,
        "test_accuracy": test_acc, "pruned": int(samples < trainer.data.num_train),
        "overhead_seconds": round(overhead - done.overhead_s, 5),
    }
    done.overhead_s = overhead
    done.rows.append(row)
    return row


def _any_rank(flag: bool, world: World, device: torch.device) -> bool:
    """Ranks stop together: one small all_reduce per epoch when data-parallel."""
    if not world.active:
        return flag
    return bool(distributed.all_sum(torch.tensor([int(flag)], device=device), world).item())


def _tracking_hook(pruner: Pruner | None, watch: Stopwatch) -> Any:
    if pruner is None:
        return None

    def hook(idx: torch.Tensor, losses: torch.Tensor, mean: torch.Tensor | None = None) -> None:
        with watch.section():
            pruner.update(idx, losses, mean)
    return hook


def _state(s: Session) -> dict[str, Any]:
    d = s.done
    return {"trainer": s.trainer.state_dict(),
            "pruner": s.pruner.state_dict() if s.pruner is not None else None,
            "progress": {"rows": d.rows, "train_s": d.train_s, "eval_s": d.eval_s,
                         "overhead_s": d.overhead_s}}


def _diverged(s: Session, epoch: int, row: dict[str, Any]) -> None:
    _update_summary(s.summary, s.done, s.pruner)
    s.summary.update(status="diverged", diverged_epoch=epoch)
    s.record.write_metrics(s.done.rows)
    s.record.write_summary(s.summary)
    raise checkpoint.Diverged(
        f"training diverged at epoch {epoch}: train loss is {row['train_loss']}; the record is kept "
        f"in {s.record.path} with status 'diverged' (try a lower --lr or a longer train.warmup_epochs)")


def _update_summary(summary: dict[str, Any], done: Progress, pruner: Pruner | None) -> None:
    rows, train_s, eval_s, overhead_s = done.rows, done.train_s, done.eval_s, done.overhead_s
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

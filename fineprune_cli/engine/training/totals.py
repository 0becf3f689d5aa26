"""What a run has done so far (`Totals`: its epoch rows and timings) and how that reaches its
summary: a new run's summary, the figures brought up to date after each epoch, the record of
a divergence. The synchronous loop (loop.py) and the parameter-server chief share them."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...lazytorch import torch
from ..records.record import EpochRow, RunRecord, RunSummary, Status, git_commit
from ..setup.config import Config
from . import checkpoint
from .device import describe_device, load_average, machine_signature, torch_version


@dataclass
class Totals:
    """What a run has done so far; a checkpoint stores it, a resumed run starts from it."""

    rows: list[EpochRow] = field(default_factory=list)
    train_s: float = 0.0
    eval_s: float = 0.0
    overhead_s: float = 0.0
    refresh_s: float = 0.0  # forward-only passes a policy asked for (kakurenbo), part of train_s

    def state_dict(self) -> dict[str, Any]:
        return {
            "rows": [vars(r) for r in self.rows],
            "train_s": self.train_s,
            "eval_s": self.eval_s,
            "overhead_s": self.overhead_s,
            "refresh_s": self.refresh_s,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Totals":
        return cls(
            [EpochRow(**r) for r in state["rows"]],
            state["train_s"],
            state["eval_s"],
            state["overhead_s"],
            state.get("refresh_s", 0.0),
        )  # absent from older checkpoints


def best3(accuracies: list[float]) -> float:
    """Mean of the three best test accuracies, as in the paper's Table 2."""
    top = sorted(accuracies, reverse=True)[:3]
    return sum(top) / len(top) if top else float("nan")


def summarize(summary: RunSummary, totals: Totals) -> None:
    """Bring the summary's figures up to the rows done so far."""
    rows = totals.rows
    seen = sum(r.samples for r in rows)
    summary.epochs_completed = len(rows)
    summary.train_seconds = round(totals.train_s, 3)
    summary.eval_seconds = round(totals.eval_s, 3)
    summary.overhead_seconds = round(totals.overhead_s, 4)
    summary.wall_seconds = round(totals.train_s + totals.eval_s, 3)  # each epoch's loop times all of it
    cpu = [r.cpu_seconds for r in rows]
    summary.cpu_seconds = round(sum(cpu), 3) if cpu and all(math.isfinite(c) for c in cpu) else None
    summary.final_accuracy = rows[-1].test_accuracy if rows else float("nan")
    summary.final_test_loss = rows[-1].test_loss if rows else None
    summary.best3_accuracy = best3([r.test_accuracy for r in rows])
    summary.samples_seen = seen
    summary.samples_skipped = len(rows) * summary.num_train - seen
    summary.pruning_epochs = [r.epoch for r in rows if r.pruned]
    if totals.refresh_s:
        summary.extra["refresh_seconds"] = round(totals.refresh_s, 3)


def new_summary(
    cfg: Config,
    device: torch.device | str,
    path: Path,
    num_train: int,
    world_size: int = 1,
    command: str | None = None,
    classes: int | None = None,
    model_shapes: str | None = None,
    num_test: int = 0,
    data: dict[str, str] | None = None,
) -> RunSummary:
    """A new run's summary; `data`: its data's identity where the run knows it itself (a script
    declares its own), else read from cfg.data."""
    schedule = {k: v for k, v in vars(cfg.prune).items() if k not in ("enabled", "policy")}
    extra = {"model_shapes": model_shapes} if model_shapes else {}
    return RunSummary(
        model=cfg.model.name,
        dataset=cfg.data.dataset,
        epochs=cfg.train.epochs,
        seed=cfg.run.seed,
        policy=cfg.policy,
        arm=cfg.run.arm,
        plan=cfg.run.plan,
        dataset_label=cfg.data.label or cfg.data.dataset,
        num_train=num_train,
        classes=classes or 0,
        num_test=num_test,
        device=describe_device(device),
        run_dir=str(path),
        torch=torch_version(),
        git_commit=git_commit(),
        started=time.strftime("%Y-%m-%dT%H:%M:%S"),
        command=command,
        world_size=world_size,
        schedule=schedule if cfg.policy != "regular" else {},
        data=_data_identity(cfg) if data is None else dict(data),
        machine=machine_signature(device),
        load_average=load_average(),
        extra=extra,
    )


def _data_identity(cfg: Config) -> dict[str, str]:
    # here, not at the top: reading datasets needs torch, a script's run (which declares its data) does not
    from ..inputs.stream import data_identity

    return data_identity(cfg.data)


def trainer_summary(cfg: Config, trainer: Any, path: Path, world_size: int, command: str | None) -> RunSummary:
    """A new run's summary with what its trainer knows of the data and the model."""
    return new_summary(
        cfg,
        trainer.device,
        path,
        trainer.data.num_train,
        world_size,
        command,
        classes=trainer.classes,
        model_shapes=trainer.model_shapes,
        num_test=trainer.data.test_y.numel(),
    )


def mark_diverged(record: RunRecord, summary: RunSummary, totals: Totals, row: EpochRow) -> checkpoint.Diverged:
    """Record the run as diverged at `row`'s epoch; returns the error to raise."""
    summarize(summary, totals)
    summary.status, summary.diverged_epoch = Status.DIVERGED, row.epoch
    record.write_metrics(totals.rows)
    record.write_summary(summary)
    return checkpoint.Diverged(
        f"training diverged at epoch {row.epoch}: train loss {row.train_loss}, test loss "
        f"{row.test_loss}; the record is kept in {record.path} with status 'diverged' "
        "(try a lower --lr or a longer train.warmup_epochs)"
    )

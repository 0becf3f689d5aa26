"""Reading run folders back for reports: every folder is either a Run or a Problem."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError
from .records import CONFIG, METRICS, SUMMARY, load_run_config, read_metrics, read_summary

NEEDED = ("model", "dataset", "policy", "seed", "train_seconds", "final_accuracy",
          "best3_accuracy", "epochs", "num_train", "samples_skipped")
METRIC_COLUMNS = ("epoch", "samples", "train_seconds", "test_loss", "test_accuracy", "pruned")


@dataclass
class Run:
    path: Path
    summary: dict[str, Any]
    config: dict[str, Any]
    metrics: list[dict[str, float]]
    counts: dict[int, torch.Tensor] = field(default_factory=dict)  # window -> DroppingCount

    @property
    def label(self) -> str:
        return str(self.summary.get("dataset_label") or self.summary["dataset"])

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.summary["model"]), self.label)


@dataclass
class Problem:
    path: Path
    status: str   # incomplete | interrupted | diverged | unreadable
    reason: str


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each given path is a run folder or holds run folders at any depth."""
    found: set[Path] = set()
    for root in paths:
        if not root.exists():
            raise ConfigError(f"{root} does not exist")
        if any((root / name).exists() for name in (SUMMARY, CONFIG, METRICS)):
            found.add(root)
        for name in (SUMMARY, CONFIG, METRICS):
            found.update(p.parent for p in root.rglob(name))
    return sorted(found)


def load_runs(paths: list[Path]) -> tuple[list[Run], list[Problem]]:
    runs: list[Run] = []
    problems: list[Problem] = []
    for path in find_run_dirs(paths):
        try:
            run = load_run(path)
        except ConfigError as exc:
            problems.append(Problem(path, "unreadable", str(exc)))
            continue
        status = run.summary.get("status")
        if status != "complete":
            done = run.summary.get("epochs_completed", 0)
            problems.append(Problem(path, str(status or "incomplete"),
                                    f"{done} of {run.summary.get('epochs', '?')} epochs done"))
            continue
        runs.append(run)
    return runs, problems


def load_run(path: Path) -> Run:
    summary = read_summary(path)
    if not isinstance(summary, dict):
        raise ConfigError(f"{path / SUMMARY} is unreadable or corrupt")
    summary.setdefault("policy", _policy_of_old_summary(summary))
    if summary.get("status") != "complete":
        return Run(path, summary, {}, [])
    missing = [k for k in NEEDED if k not in summary]
    if missing:
        raise ConfigError(f"{path / SUMMARY} lacks {', '.join(missing)}")
    metrics = [_numeric_row(row, path) for row in read_metrics(path)]
    if len(metrics) != summary["epochs"]:
        raise ConfigError(f"{path / METRICS} has {len(metrics)} epochs, summary says {summary['epochs']}")
    return Run(path, summary, load_run_config(path), metrics, _load_counts(path))


def _policy_of_old_summary(summary: dict[str, Any]) -> str:
    return "regular" if not summary.get("pruning") else "fine"


def _numeric_row(row: dict[str, str], path: Path) -> dict[str, float]:
    try:
        values = {k: float(row[k]) for k in METRIC_COLUMNS}
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{path / METRICS} has a malformed row") from None
    if any(math.isnan(v) for k, v in values.items() if k != "test_loss"):
        raise ConfigError(f"{path / METRICS} has a malformed row")
    return values


def _load_counts(path: Path) -> dict[int, torch.Tensor]:
    counts = {}
    for file in sorted(path.glob("dropping_counts_window*.pt")):
        try:
            window = int(file.stem.removeprefix("dropping_counts_window"))
            counts[window] = torch.load(file, map_location="cpu", weights_only=True)
        except Exception:  # a damaged snapshot only costs its histogram
            continue
    return counts

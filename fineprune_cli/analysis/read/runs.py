"""Reading run folders back for reports: every folder is either a Run or a Problem."""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...arms import frontier_fraction, shorter_budget
from ...engine.records.files import read_regular
from ...engine.records.record import (
    CONFIG,
    METRICS,
    SUMMARY,
    EpochRow,
    RunSummary,
    Status,
    finite,
    load_run_config,
    read_metrics,
    read_summary,
)
from ...errors import ConfigError
from ...pruning import registry as policies
from .checks import Implausible, check_record


@dataclass
class Run:
    path: Path
    summary: RunSummary
    config: dict[str, Any]
    metrics: list[EpochRow]
    counts: dict[int, torch.Tensor] = field(default_factory=dict)  # window -> scores snapshot

    @property
    def label(self) -> str:
        return self.summary.label

    @property
    def key(self) -> tuple[str, str]:
        return (self.summary.model, self.label)

    @property
    def policy(self) -> str:
        """The run's arm in a comparison: its policy, or a variant such as random-every-20."""
        return self.summary.arm or self.summary.policy

    @property
    def seed(self) -> int:
        return self.summary.seed

    @property
    def is_script(self) -> bool:
        """Made by the user's own script (`compare --script`), not fineprune's trainer."""
        script = self.config.get("script")
        return bool(isinstance(script, dict) and script.get("command")) or "script_version" in self.summary.extra


@dataclass
class Problem:
    path: Path
    status: str  # incomplete | interrupted | diverged | unreadable | implausible | copy | duplicate
    reason: str
    # the row and seed it would have been, where its summary says (a report names it in that row)
    row: tuple[str, str, str] | None = None  # (model, dataset label, arm)
    seed: int | None = None


def _row_of(summary: RunSummary) -> tuple[tuple[str, str, str], int]:
    return (summary.model, summary.label, summary.arm or summary.policy), summary.seed


def arm_of(row: str) -> str:
    """The arm of a report's row name: 'fine (prune_fraction 0.5)' -> 'fine'."""
    return row.split(" (", 1)[0]


def policy_label(name: str) -> str:
    """A row's name for readers: the policy's label, then the settings that set the row apart."""
    arm, _, rest = name.partition(" (")
    fraction, budget = frontier_fraction(arm), shorter_budget(arm)
    if fraction is not None:
        text = f"random every epoch, {fraction:.0%}"
    elif budget is not None:
        text = f"{budget:.0%} fewer epochs"
    else:
        try:
            text = policies.get(arm).label or arm
        except ValueError:  # a policy this version no longer has: its name still says what it was
            text = arm
    return f"{text} ({rest}" if rest else text


def policy_color(name: str) -> str:
    arm = arm_of(name)
    if frontier_fraction(arm) is not None:
        return "#7f7f7f"
    if shorter_budget(arm) is not None:
        return "#000000"
    try:
        return policies.get(arm).color
    except ValueError:
        return "#999999"


def policy_order(name: str) -> tuple[float, str]:
    arm = arm_of(name)
    fraction, budget = frontier_fraction(arm), shorter_budget(arm)
    if fraction is not None:
        return (1_000 + fraction, name)
    if budget is not None:
        return (2_000 + budget, name)
    try:
        return (policies.get(arm).order, name)
    except ValueError:
        return (10_000, name)


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each given path is a run folder or holds run folders at any depth."""
    found: set[Path] = set()
    for root in paths:
        if not root.exists():
            raise ConfigError(f"{root} does not exist")
        if any((root / name).is_file() for name in (SUMMARY, CONFIG, METRICS)):
            found.add(root)
        for name in (SUMMARY, CONFIG, METRICS):
            found.update(p.parent for p in root.rglob(name) if p.is_file())
    return sorted(found)


def load_runs(paths: list[Path]) -> tuple[list[Run], list[Problem]]:
    runs: list[Run] = []
    problems: list[Problem] = []
    for path in find_run_dirs(paths):
        summary = None
        try:
            summary = read_summary(path)
            if summary.status != Status.COMPLETE:
                problems.append(Problem(path, summary.status.value, _unfinished(summary), *_row_of(summary)))
                continue
            runs.append(load_run(path, summary))
        except Implausible as exc:
            problems.append(Problem(path, "implausible", str(exc), *(_row_of(summary) if summary else ())))
        except ConfigError as exc:
            problems.append(Problem(path, "unreadable", str(exc), *(_row_of(summary) if summary else ())))
    copied = copies(runs)
    problems += [
        Problem(
            run.path,
            "copy",
            f"{why}: a run folder copied under another seed's name, not a run of seed {run.seed}",
            *_row_of(run.summary),
        )  # fmt: skip
        for run, why in copied
    ]
    return [r for r in runs if all(r is not run for run, _ in copied)], problems


def _unfinished(summary: RunSummary) -> str:
    if summary.status == Status.DIVERGED and summary.diverged_epoch:
        return f"its loss stopped being finite at epoch {summary.diverged_epoch} of {summary.epochs}"
    return f"{summary.epochs_completed} of {summary.epochs} epochs done"


def copies(runs: list[Run]) -> list[tuple[Run, str]]:
    """(run, why it is a copy of another seed's run): the same train and test loss in every epoch
    as a run of another seed, or a summary.json that records the run was made in a folder of
    another seed's name. Two seeds never train alike (the seed draws the weights and the order),
    so such a run is a folder copied and renamed; the one read first is kept. Losses that stay the
    same from epoch to epoch (records crafted by hand) are no fingerprint and are not compared,
    nor are a script's, whose test loss is often not measured (NaN, equal to nothing): there the
    folder's recorded name tells (issue 57: a copied script run passed as a further seed)."""
    first: dict[tuple[tuple[float, float], ...], Run] = {}
    found = []
    for run in runs:
        made = _made_as(run)
        if made is not None and made[1] != run.seed:
            found.append((run, f"its summary.json records it was made as {made[0]} (seed {made[1]})"))
            continue
        losses = tuple((r.train_loss, r.test_loss) for r in run.metrics)
        if len({train for train, _ in losses}) < 2:
            continue
        kept = first.setdefault(losses, run)
        if kept.seed != run.seed:
            found.append((run, f"every epoch's losses are those of seed {kept.seed} in {kept.path}"))
    return found


SEEDED = re.compile(r"^.+-seed(\d+)$")  # a run folder's name in a comparison: <arm>-seed<s>


def _made_as(run: Run) -> tuple[str, int] | None:
    """The folder name and seed a run's summary.json records it was made in, where that name is a
    comparison's (`read_summary` puts the folder it is in now in its place)."""
    try:
        recorded = json.loads((run.path / SUMMARY).read_text()).get("run_dir")
    except (OSError, ValueError, AttributeError):
        return None
    name = Path(str(recorded or "")).name
    seeded = SEEDED.match(name)
    return (name, int(seeded.group(1))) if seeded else None


def load_run(path: Path, summary: RunSummary) -> Run:
    """A complete run whose figures the tables can use; ConfigError says why not."""
    for name in ("train_seconds", "final_accuracy", "best3_accuracy"):
        if not finite(getattr(summary, name)):  # null too
            raise ConfigError(f"{path / SUMMARY}: {name} is not a finite number")
    check_counts(summary, path / SUMMARY)
    if summary.train_seconds <= 0:
        raise ConfigError(f"{path / SUMMARY}: train_seconds must be positive")
    metrics = read_metrics(path)
    if len(metrics) != summary.epochs:
        raise ConfigError(f"{path / METRICS} has {len(metrics)} epochs, summary says {summary.epochs}")
    if any(not math.isfinite(v) for r in metrics for k, v in vars(r).items() if k not in ("test_loss", "cpu_seconds")):
        raise ConfigError(f"{path / METRICS} has a malformed row")
    check_record(path, summary, metrics)
    return Run(path, summary, load_run_config(path), metrics, _load_counts(path))


MAX_EPOCHS, MAX_SAMPLES = 10**6, 2**40  # beyond these a record is damaged, not large


def check_counts(summary: RunSummary, where: Path) -> None:
    """The sample counts a table or an estimate divides by, within what a run can hold."""
    if not (1 <= summary.num_train <= MAX_SAMPLES and 1 <= summary.epochs <= MAX_EPOCHS):
        raise ConfigError(f"{where}: num_train and epochs must be positive (at most {MAX_SAMPLES} and {MAX_EPOCHS})")
    if not 0 <= summary.samples_skipped <= summary.epochs * summary.num_train:
        raise ConfigError(f"{where}: samples_skipped must be between 0 and epochs x num_train")


def _load_counts(path: Path) -> dict[int, torch.Tensor]:
    """The DroppingCount snapshots that are what they say: one finite count per sample."""
    counts = {}
    for file in sorted(path.glob("dropping_counts_window*.pt")):
        try:
            window = int(file.stem.removeprefix("dropping_counts_window"))
            snapshot = torch.load(io.BytesIO(read_regular(file)), map_location="cpu", weights_only=True)
        except Exception:  # a damaged snapshot only costs its histogram
            continue
        if (
            isinstance(snapshot, torch.Tensor)
            and snapshot.dim() == 1
            and snapshot.numel() > 0
            and not snapshot.dtype.is_complex
            and snapshot.dtype != torch.bool
            and bool(((snapshot >= 0) & (snapshot <= MAX_EPOCHS)).all())
        ):  # NaN fails both
            counts[window] = snapshot
    return counts

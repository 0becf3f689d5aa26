"""The run folder: config.yaml, metrics.csv, summary.json, score snapshots, typed.

`EpochRow` is one line of metrics.csv, `RunSummary` is summary.json, `Status` says in one
place what is complete, resumable or diverged. Every file is written atomically (temporary
file in the same folder, fsync, rename): a reader never sees half a file and a crash leaves
the previous version intact. Folders written before schema 2 are read as well.
"""

from __future__ import annotations

import csv
import dataclasses
import fcntl
import io
import json
import math
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import ConfigError
from . import yamlvalues
from .files import UMASK, atomic_torch_save, atomic_write_text, read_regular_text, to_csv

if TYPE_CHECKING:  # reading records (compare's planning, report) needs no torch
    import torch

CONFIG, METRICS, SUMMARY, CHECKPOINT = "config.yaml", "metrics.csv", "summary.json", "checkpoint.pt"
SCHEMA = 3  # 1: written before the typed record (no "schema" key); 2: before the machine signature


class Status(str, Enum):
    INCOMPLETE = "incomplete"  # training, or killed before it could say otherwise
    INTERRUPTED = "interrupted"  # stopped on a signal after a whole epoch
    DIVERGED = "diverged"  # loss became NaN or infinite: training again would too
    COMPLETE = "complete"

    @property
    def resumable(self) -> bool:
        return self in (Status.INCOMPLETE, Status.INTERRUPTED)

    @classmethod
    def of(cls, value: Any) -> "Status":
        try:
            return cls(value)
        except ValueError:
            return cls.INCOMPLETE


@dataclass
class EpochRow:
    """One epoch in metrics.csv; the column order is the field order."""

    epoch: int
    lr: float
    samples: int
    train_seconds: float
    train_loss: float
    test_loss: float
    test_accuracy: float
    pruned: int
    overhead_seconds: float

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_csv(cls, row: dict[str, str]) -> "EpochRow":
        """Raises ValueError/KeyError/TypeError on a malformed row."""
        values = {}
        for f in dataclasses.fields(cls):
            text = row.get(f.name)
            if text in (None, "") and f.name == "overhead_seconds":
                text = "0"  # not written by some early parameter-server runs
            values[f.name] = int(float(text)) if f.type == "int" else float(text)
        return cls(**values)


@dataclass
class RunSummary:
    """summary.json. Fields a run always has come first; the others depend on its kind."""

    model: str
    dataset: str
    epochs: int
    seed: int
    policy: str = "regular"
    arm: str = ""  # its name in a comparison when that is not the policy (e.g. random-every-20)
    status: Status = Status.INCOMPLETE
    epochs_completed: int = 0
    dataset_label: str = ""
    num_train: int = 0
    classes: int = 0  # label classes; 0: not recorded (made before it), chance level unknown
    num_test: int = 0  # test images, each accuracy a multiple of 100 / num_test (0: not recorded)
    device: str = ""
    run_dir: str = ""
    torch: str = ""
    git_commit: str = ""
    started: str = ""
    finished: str | None = None
    command: str | None = None
    world_size: int = 1
    machine: dict[str, Any] = field(default_factory=dict)  # engine.device.machine_signature; {} before schema 3
    load_average: list[float] = field(default_factory=list)  # 1/5/15-minute load when the run started
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    overhead_seconds: float = 0.0
    final_accuracy: float = float("nan")
    best3_accuracy: float = float("nan")
    final_test_loss: float | None = None
    samples_seen: int = 0
    samples_skipped: int = 0
    pruning_epochs: list[int] = field(default_factory=list)
    schedule: dict[str, Any] = field(default_factory=dict)  # the prune settings of a pruned run
    data: dict[str, Any] = field(default_factory=dict)  # an image folder's listings (data_identity)
    resumed_after_epochs: list[int] = field(default_factory=list)
    diverged_epoch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # mode-specific (staleness...), kept as is
    schema: int = SCHEMA

    @property
    def label(self) -> str:
        return self.dataset_label or self.dataset

    @property
    def pruning(self) -> bool:
        return self.policy != "regular"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        extra = data.pop("extra")
        data["pruning"] = self.pruning  # read by schema-1 tools
        return {**data, **extra}

    @classmethod
    def from_dict(cls, data: Any, where: str = SUMMARY) -> "RunSummary":
        """Schema 2, or 1 (no policy: 'fine' when pruning was on). Raises ConfigError when a
        field has the wrong type."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where} is unreadable or corrupt")
        data = dict(data)
        data.pop("pruning", None) if "policy" in data else data.update(
            policy="fine" if data.pop("pruning", False) else "regular"
        )
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "extra"}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        missing = [k for k in ("model", "dataset", "epochs", "seed") if k not in values]
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
        values["status"] = Status.of(values.get("status"))
        summary = cls(**values)
        summary.check_types(where)
        return summary

    def check_types(self, where: str) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or f.name in ("status", "extra"):
                continue
            want = {
                "str": str,
                "int": int,
                "float": (int, float),
                "list[int]": list,
                "list[float]": list,
                "dict[str, Any]": dict,
            }.get(str(f.type).replace("None", "").strip(" |"))
            bad = want is not None and (not isinstance(value, want) or isinstance(value, bool))
            if bad:
                raise ConfigError(f"{where}: '{f.name}' has the wrong type ({type(value).__name__})")


def default_run_dir(model: str, dataset: str, name: str = "") -> Path:
    """results/runs/<time>-<model>-<dataset>, or <time>-<name> for `train --name`."""
    return Path("results") / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{name or f'{model}-{dataset}'}"


def git_commit() -> str:
    """Short commit of the code, '-dirty' when tracked code outside results/ has changed."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], capture_output=True, text=True, timeout=5, cwd=Path(__file__).resolve().parent
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:  # a copy without .git (e.g. a GPU machine's): the launcher may name it
        return os.environ.get("FINEPRUNE_GIT_COMMIT") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)results")
    return commit + ("-dirty" if dirty else "")


class RunRecord:
    """Writes a run folder (rank 0 of a data-parallel run; the others get `write=False`).

    The writer holds an exclusive lock on the folder until `close()` (or its process ends, so
    a dead writer's lock never lingers); `fresh=True` refuses a folder that holds a run."""

    scalars: Any = None  # --tensorboard: a ScalarLog that write_metrics also feeds (set by the run)

    def __init__(self, path: Path, write: bool = True, fresh: bool = False, open_now: bool = True):
        self.path, self.write, self._lock, self.created = Path(path), write, None, False
        self.fresh = fresh
        if write:
            _check_writable(self.path)
        self._refuse_a_run()
        if open_now:
            self.open()

    def open(self) -> None:
        """Create and lock the folder. Callers that can still fail (data, model) open it after
        those steps, so a failed start writes nothing at all."""
        if self.write and self._lock is None:
            self.created = not self.path.exists()
            self._prepare()
            self._take_lock()
            try:  # again under the lock: another process may have started a run here meanwhile
                self._refuse_a_run()
            except ConfigError:
                self.close()
                raise
            for orphan in self.path.glob(".*.tmp"):  # left by a writer killed mid-write; ours now
                orphan.unlink(missing_ok=True)

    def _refuse_a_run(self) -> None:
        if self.fresh and any((self.path / n).exists() for n in (SUMMARY, CHECKPOINT)):
            raise ConfigError(
                f"{self.path} already holds a run: continue it with `fineprune train "
                f"--resume {shlex.quote(str(self.path))}`, or choose another --out (or delete it)"
            )

    def _take_lock(self) -> None:
        fd = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR, 0o666 & ~UMASK)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ConfigError(
                f"{self.path} is being written by another fineprune process; wait for it or choose another --out"
            ) from None
        self._lock = fd

    def close(self) -> None:
        """Release the folder; one this record created and never wrote to is removed, so a run
        that failed before its first record leaves nothing behind."""
        if self.scalars is not None:
            self.scalars.close()
            self.scalars = None
        if self._lock is None:
            return
        if self.created and [p.name for p in self.path.iterdir()] == [".lock"]:
            (self.path / ".lock").unlink()
            self.path.rmdir()
        os.close(self._lock)  # releases the lock
        self._lock = None

    def _prepare(self) -> None:
        """Create the folder and prove it writable before any training time is spent."""
        made = next((p for p in reversed([self.path, *self.path.parents]) if not p.exists()), None)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path / ".write-check", "ok")
            (self.path / ".write-check").unlink()
        except OSError as exc:
            if made is not None:  # a full disk at start leaves no empty run folder behind
                shutil.rmtree(made, ignore_errors=True)
            raise ConfigError(f"cannot write run folder {self.path}: {exc.strerror or exc}") from None

    def write_config(self, config: dict[str, Any]) -> None:
        if self.write:
            atomic_write_text(self.path / CONFIG, yamlvalues.dump(config))  # --config reads it back

    def write_metrics(self, rows: list[EpochRow]) -> None:
        if self.write and rows:
            body = [[getattr(r, c) for c in EpochRow.columns()] for r in rows]
            atomic_write_text(self.path / METRICS, to_csv(EpochRow.columns(), body))
            if self.scalars is not None:
                self.scalars.write(rows)

    def write_summary(self, summary: RunSummary) -> None:
        if self.write:
            text = json.dumps(summary.to_dict(), indent=2, allow_nan=True) + "\n"
            atomic_write_text(self.path / SUMMARY, text)

    def save_scores(self, window: int, scores: torch.Tensor, name: str = "dropping_counts") -> None:
        if self.write:
            atomic_torch_save(scores.detach().cpu().clone(), self.path / f"{name}_window{window}.pt")


def held(path: Path) -> bool:
    """Whether another process holds `path`'s write lock (a run in progress there): its folder
    must be neither trained again nor deleted."""
    try:
        fd = os.open(path / ".lock", os.O_RDWR)
    except OSError:
        return False  # no lock file: nobody has written here, or nobody could
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases a lock taken just to look
    return False


def _check_writable(path: Path) -> None:
    """The folder exists and is writable, or its nearest existing ancestor is a writable
    folder: checked without creating anything."""
    try:
        for existing in (path, *path.parents):
            if existing.exists():
                break
        if not existing.is_dir():
            raise ConfigError(f"cannot write run folder {path}: {existing} is not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"cannot write run folder {path}: {existing} is not writable")
    except OSError as exc:  # a name too long, a loop of links
        raise ConfigError(f"cannot write run folder {path}: {exc.strerror or exc}") from None


def read_summary(run_dir: Path) -> RunSummary:
    summary = RunSummary.from_dict(_read_json(Path(run_dir) / SUMMARY, run_dir), str(Path(run_dir) / SUMMARY))
    summary.run_dir = str(run_dir)  # where it is now: a moved folder's record names its old place
    return summary


def _read_json(path: Path, run_dir: Path) -> Any:
    try:
        return json.loads(read_regular_text(path))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {SUMMARY} is missing") from None
    except OSError as exc:
        raise ConfigError(f"{path} is unreadable: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None


def read_metrics(run_dir: Path) -> list[EpochRow]:
    path = Path(run_dir) / METRICS
    try:
        text = read_regular_text(path)
        return [EpochRow.from_csv(row) for row in csv.DictReader(io.StringIO(text, newline=""))]
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {METRICS} is missing") from None
    except OSError as exc:
        raise ConfigError(f"{path} is unreadable: {exc.strerror or exc}") from None
    except (csv.Error, UnicodeDecodeError, KeyError, TypeError, ValueError, OverflowError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None


def load_run_config(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / CONFIG
    try:
        data = yamlvalues.load(read_regular_text(path))  # bounded: a hand-made alias bomb is refused
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {CONFIG} is missing") from None
    except OSError as exc:
        raise ConfigError(f"{path} is unreadable: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is unreadable or corrupt")
    return data


def finite(value: float) -> bool:
    try:  # an int of 400 digits (valid JSON) overflows the conversion to float
        return isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:
        return False

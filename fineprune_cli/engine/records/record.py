"""The run folder: config.yaml, metrics.csv, summary.json, score snapshots, typed.

`EpochRow` is one line of metrics.csv, `RunSummary` is summary.json, `Status` says in one
place what is complete, resumable or diverged (declared in `runsummary`). Every file is written atomically (temporary
file in the same folder, fsync, rename): a reader never sees half a file and a crash leaves
the previous version intact. Folders written before schema 2 are read as well.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ...errors import ConfigError
from ..setup import yamlvalues
from .files import UMASK, atomic_torch_save, atomic_write_text, read_regular_text, to_csv
from .holders import held_here, lock_problem, stamp

if TYPE_CHECKING:  # reading records (compare's planning, report) needs no torch
    import torch

from .runsummary import CHECKPOINT, CONFIG, METRICS, SCHEMA, SUMMARY, EpochRow, RunSummary, Status

# the record's data (runsummary) is read and written through this module: its names come from here
__all__ = ["CHECKPOINT", "CONFIG", "METRICS", "SCHEMA", "SUMMARY", "EpochRow", "RunRecord", "RunSummary", "Status"]
__all__ += ["default_run_dir", "finite", "git_commit", "held", "load_run_config", "read_metrics", "read_summary"]


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
            here = (
                f"{self.path} is already open for writing in this same process (fineprune.start() called twice "
                "for one run?): call it once and use the run it returns"
            )
            raise ConfigError(
                (here if held_here(self.path) else lock_problem(self.path))
                or f"{self.path} is being written by another fineprune process; wait for it or choose another --out"
            ) from None
        stamp(fd)
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

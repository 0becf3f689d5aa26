"""The run folder: config.yaml, metrics.csv, summary.json, DroppingCount snapshots.

Every file is written atomically (temporary file in the same folder, fsync, rename), so
a reader never sees half a file and a crash leaves the previous version intact.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from .errors import ConfigError

CONFIG, METRICS, SUMMARY = "config.yaml", "metrics.csv", "summary.json"
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would make records private
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_torch_save(obj: Any, path: Path) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def default_run_dir(model: str, dataset: str) -> Path:
    return Path("results") / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{model}-{dataset}"


def prepare_run_dir(path: Path) -> Path:
    """Create the folder and prove it writable before any training time is spent."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path / ".write-check", "ok")
        (path / ".write-check").unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write run folder {path}: {exc.strerror or exc}") from None
    return path


def git_commit() -> str:
    """Short commit of the code, '-dirty' when tracked code outside results/ has changed."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                                 cwd=Path(__file__).resolve().parent)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:  # a copy without .git (e.g. a GPU machine's): the launcher may name it
        return os.environ.get("FINEPRUNE_GIT_COMMIT") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)results")
    return commit + ("-dirty" if dirty else "")


class RunRecord:
    def __init__(self, path: Path):
        self.path = prepare_run_dir(path)

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_text(self.path / CONFIG, yaml.safe_dump(config, sort_keys=False))

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.path / METRICS, buf.getvalue())

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write_text(self.path / SUMMARY, json.dumps(summary, indent=2) + "\n")

    def save_counts(self, window: int, counts: torch.Tensor) -> Path:
        path = self.path / f"dropping_counts_window{window}.pt"
        atomic_torch_save(counts.detach().cpu().clone(), path)
        return path


class NullRecord(RunRecord):
    """What ranks other than 0 of a data-parallel run write: nothing."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def write_config(self, config: dict[str, Any]) -> None:
        pass

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        pass

    def write_summary(self, summary: dict[str, Any]) -> None:
        pass

    def save_counts(self, window: int, counts: torch.Tensor) -> Path:
        return self.path


def read_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / SUMMARY
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {SUMMARY} is missing") from None
    except (OSError, ValueError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None


def read_metrics(run_dir: Path) -> list[dict[str, str]]:
    path = Path(run_dir) / METRICS
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {METRICS} is missing") from None
    except (OSError, csv.Error, UnicodeDecodeError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None


def load_run_config(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / CONFIG
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a run folder: {CONFIG} is missing") from None
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        raise ConfigError(f"{path} is unreadable or corrupt") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is unreadable or corrupt")
    return data

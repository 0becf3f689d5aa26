"""--tensorboard: each epoch's row (the metrics.csv columns) as TensorBoard scalars, written
into the run folder, so `tensorboard --logdir results/runs` lists every run by its folder.

TensorBoard is an optional extra (`pip install 'fineprune[tensorboard]'`): metrics.csv stays the
record; the event files are a view of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..records.record import EpochRow

INSTALL = "pip install 'fineprune[tensorboard]'"


def writer_class() -> Any:
    """torch's SummaryWriter; one clear line when the tensorboard package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch's wrapper imports the tensorboard package and fails without it
        raise ConfigError(
            f"--tensorboard needs the tensorboard package, which is not installed: {INSTALL} "
            "(or pip install tensorboard)"
        ) from None
    return SummaryWriter


def require() -> None:
    writer_class()


class ScalarLog:
    """Logs the rows a run has not logged yet, the epoch as the step."""

    def __init__(self, run_dir: Path, done: int):
        # a resumed run trains again the epochs after its checkpoint: purge_step hides what an
        # earlier process logged for them, so TensorBoard shows each epoch once
        purge = {"purge_step": done + 1} if done else {}
        self.writer = writer_class()(log_dir=str(run_dir), **purge)
        self.logged = done

    @classmethod
    def open(cls, enabled: bool, run_dir: Path, done: int) -> "ScalarLog | None":
        return cls(run_dir, done) if enabled else None

    def write(self, rows: list[EpochRow]) -> None:
        for row in rows[self.logged :]:
            for name in EpochRow.columns():
                if name != "epoch":
                    self.writer.add_scalar(name, float(getattr(row, name)), global_step=row.epoch)
        self.logged = max(self.logged, len(rows))
        self.writer.flush()  # a run watched live, or killed, shows every epoch written so far

    def close(self) -> None:
        self.writer.close()

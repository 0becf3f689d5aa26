"""Progress of runs in flight at once: one grid of arms x seeds (queued / running epoch k / done /
failed, with each run's last test accuracy) and an ETA, live on a terminal, one plain line per
change on stderr otherwise (a log, a pipe).

The epochs are read from each run's summary.json, which the run rewrites after every epoch,
so the same view serves runs in child processes here and Slurm tasks on other machines.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable

from rich.live import Live
from rich.table import Table

from .. import console
from ..engine.records.record import SUMMARY
from .executors.contract import Task


def progress_of(task: Task) -> tuple[int, float | None]:
    """(epochs the run has recorded, its last epoch's test accuracy): (0, None) before its first
    record, or while the file is replaced."""
    try:
        data = json.loads((task.run_dir / SUMMARY).read_text())
        done, acc = int(data.get("epochs_completed", 0)), data.get("final_accuracy")
    except (OSError, ValueError, TypeError, AttributeError):
        return 0, None
    ok = isinstance(acc, (int, float)) and not isinstance(acc, bool) and math.isfinite(acc) and done > 0
    return done, float(acc) if ok else None


class Grid:
    """An executor's Watch: the state of every task, shown as it changes, with each run's last
    test accuracy and an ETA at the pace of the epochs this process has seen trained."""

    def __init__(
        self,
        tasks: list[Task],
        mode: str,
        clock: Callable[[], float] = time.monotonic,
        later: tuple[int, str] = (0, ""),
    ):
        """`later`: the epochs the planned looks after this one may train, and their name ('looks
        2-3'), counted into a second ETA: the whole plan's, should no policy be decided before
        the last look."""
        self.tasks, self.mode, self.clock = tasks, mode, clock  # mode: 'live', 'lines' or 'off'
        self.later = later
        self.state = {t: "queued" for t in tasks}
        self.epoch = {t: 0 for t in tasks}
        self.acc: dict[Task, float | None] = {t: None for t in tasks}
        self.before: dict[Task, int] = {}  # epochs a run had when first seen running (a resumed run's)
        self.started = clock()
        self._live: Live | None = None

    def __enter__(self) -> "Grid":
        if self.mode == "live":
            self._live = Live(self.table(), console=console.err, auto_refresh=False)
            self._live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self.table(), refresh=True)
            self._live.stop()

    def text(self, task: Task) -> str:
        state = self.state[task]
        acc = "" if self.acc[task] is None else f", acc {self.acc[task]:.2f}%"
        if state == "running":
            return f"running epoch {self.epoch[task]}/{task.epochs}{acc}"
        return "failed" if state.startswith("failed") else f"{state}{acc}"

    def eta(self) -> float | None:
        """Seconds left: the epochs still to train at the pace of those trained since the start
        (runs side by side and their start-ups included); None before the first epoch."""
        fresh = sum(self.epoch[t] - self.before.get(t, self.epoch[t]) for t in self.tasks)
        if fresh <= 0:
            return None
        left = sum(t.epochs - self.epoch[t] for t in self.tasks if self.state[t] in ("queued", "running"))
        return (self.clock() - self.started) / fresh * left

    def plan_eta(self) -> str:
        """' (this look); up to 0:20:00 with looks 2-3': the later looks' epochs at the same pace."""
        epochs, looks = self.later
        eta = self.eta()
        if not epochs or eta is None:
            return ""
        fresh = sum(self.epoch[t] - self.before.get(t, self.epoch[t]) for t in self.tasks)
        return f" (this look); up to {console.clock(eta + (self.clock() - self.started) / fresh * epochs)} with {looks}"

    def _read(self, task: Task) -> bool:
        """Reads the run's record; whether it moved."""
        done, acc = progress_of(task)
        self.before.setdefault(task, done)
        moved = (done, acc) != (self.epoch[task], self.acc[task])
        self.epoch[task], self.acc[task] = done, acc
        return moved

    def changed(self, task: Task, state: str) -> None:
        self.state[task] = state
        if state == "running" or state == "done":
            self._read(task)
        if state.startswith("failed"):  # its own error line, whatever the view
            error = state[len("failed: ") :]
            # a task's own line may name its run already (a script's failure, said by its child): once
            console.error(error if error.startswith(f"{task.label}:") else f"{task.label}: {error}")
        self._show(task)

    def tick(self) -> None:
        for task in self.tasks:
            if self.state[task] == "running" and self._read(task):
                self._show(task)

    def _times(self) -> str:
        return f"elapsed {console.clock(self.clock() - self.started)}, eta {console.clock(self.eta())}{self.plan_eta()}"

    def _show(self, task: Task) -> None:
        if self._live is not None:
            self._live.update(self.table(), refresh=True)
        elif self.mode == "lines":
            finished = sum(s in ("done",) or s.startswith("failed") for s in self.state.values())
            console.info(
                f"{task.label}: {self.text(task)} ({finished}/{len(self.tasks)} runs finished, {self._times()})"
            )

    def table(self) -> Table:
        several = len({t.group for t in self.tasks}) > 1
        rows = list(dict.fromkeys((t.group, t.arm) for t in self.tasks))
        seeds = sorted({t.seed for t in self.tasks})
        table = Table(
            title=f"compare: {len(self.tasks)} runs, {self._times()}",
            title_justify="left",
        )
        table.add_column("arm")
        for seed in seeds:
            table.add_column(f"seed {seed}")
        by = {(t.group, t.arm, t.seed): t for t in self.tasks}
        for group, arm in rows:
            cells = (self.text(by[group, arm, s]) if (group, arm, s) in by else "" for s in seeds)
            table.add_row(f"{group} {arm}" if several else arm, *cells)
        return table

"""Progress of runs in flight at once: one grid of arms x seeds (queued / running epoch k / done /
failed), live on a terminal, one plain line per change on stderr otherwise (a log, a pipe).

The epochs are read from each run's summary.json, which the run rewrites after every epoch,
so the same view serves runs in child processes here and Slurm tasks on other machines.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from rich.live import Live
from rich.table import Table

from .. import console
from ..engine.record import SUMMARY
from .executor import Task


def epochs_done(task: Task) -> int:
    """Epochs the run has recorded (0 before its first record, or while the file is replaced)."""
    try:
        data = json.loads((task.run_dir / SUMMARY).read_text())
        return int(data.get("epochs_completed", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


class Grid:
    """An executor's Watch: the state of every task, shown as it changes."""

    def __init__(self, tasks: list[Task], mode: str, clock: Callable[[], float] = time.monotonic):
        self.tasks, self.mode, self.clock = tasks, mode, clock  # mode: 'live', 'lines' or 'off'
        self.state = {t: "queued" for t in tasks}
        self.epoch = {t: 0 for t in tasks}
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
        if state == "running":
            return f"running epoch {self.epoch[task]}/{task.epochs}"
        return "failed" if state.startswith("failed") else state

    def changed(self, task: Task, state: str) -> None:
        self.state[task] = state
        if state == "running":
            self.epoch[task] = epochs_done(task)
        if state.startswith("failed"):  # its own error line, whatever the view
            console.error(f"{task.label}: {state[len('failed: ') :]}")
        self._show(task)

    def tick(self) -> None:
        for task in self.tasks:
            if self.state[task] == "running":
                done = epochs_done(task)
                if done != self.epoch[task]:
                    self.epoch[task] = done
                    self._show(task)

    def _show(self, task: Task) -> None:
        if self._live is not None:
            self._live.update(self.table(), refresh=True)
        elif self.mode == "lines":
            finished = sum(s in ("done",) or s.startswith("failed") for s in self.state.values())
            console.info(
                f"{task.label}: {self.text(task)} ({finished}/{len(self.tasks)} runs finished, "
                f"elapsed {console.clock(self.clock() - self.started)})"
            )

    def table(self) -> Table:
        several = len({t.group for t in self.tasks}) > 1
        rows = list(dict.fromkeys((t.group, t.arm) for t in self.tasks))
        seeds = sorted({t.seed for t in self.tasks})
        table = Table(
            title=f"compare: {len(self.tasks)} runs, elapsed {console.clock(self.clock() - self.started)}",
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

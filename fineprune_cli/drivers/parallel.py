"""`compare --jobs N` and `compare --executor NAME`: the matrix's runs as tasks of an executor
(executors/: the contract, the registry, one module each).

Each job's config is written to <out>/.jobs/<model>-<dataset>/<arm>-seed<seed>.yaml (with the
task's log beside it), so a task, here or on a cluster node, needs nothing but that file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from .. import console
from ..engine.records.files import atomic_write_text
from ..engine.setup import yamlvalues
from ..engine.setup.config import Config
from ..errors import FinepruneError
from .executors import registry
from .executors.contract import Task
from .grid import Grid
from .job import JOBS, job_file

if TYPE_CHECKING:
    from .compare import CompareConfig, Job


class RunsFailed(FinepruneError):
    """Some runs failed (each reported on its own line); the others finished and are kept."""

    exit_code = 1

    def __init__(self, failed: int, total: int, logs: str = "") -> None:
        super().__init__(
            f"{failed} of {total} runs failed (each said why above{f'; {logs}' if logs else ''}); the "
            "others are kept, and `compare` again trains only what is missing"
        )


def write_tasks(cfg: Config, c: "CompareConfig", todo: list["Job"], command: str | None) -> list[Task]:
    from .compare import job_config

    tasks = []
    for job in todo:
        job_cfg = job_config(cfg, job, c.out)
        where = job_file(Path(job_cfg.run.out))
        where.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(where, yamlvalues.dump(job_cfg.to_dict()))
        tasks.append(
            Task(
                str(job),
                f"{job.model}-{job.dataset}",
                job.arm,
                job.seed,
                where.resolve(),
                Path(job_cfg.run.out).resolve(),
                job_cfg.train.epochs,
                command,
            )
        )
    return tasks


def run_tasks(
    cfg: Config,
    c: "CompareConfig",
    todo: list["Job"],
    command: str | None,
    show_progress: bool,
    on_done: Callable[[Task], None] | None = None,
    notes: Sequence[str] = (),
    later: tuple[int, str] = (0, ""),
) -> None:
    """Run the jobs not finished yet through the executor `c` names; raises RunsFailed at the
    end when some failed. `on_done`, called as each run here finishes, may refuse the matrix:
    the runs in flight then stop after their epoch (where runs live elsewhere and would go on,
    it is not called). `notes` are said once the executor is found, before any task starts;
    `later`: the epochs of the looks after this one, and their name, for the whole plan's ETA."""
    kind = registry.kind(c.executor)
    executor = kind.make(cfg, c)
    for line in notes:
        console.info(line)
    tasks = write_tasks(cfg, c, todo, command)
    if not tasks:
        return
    mode = "off" if not show_progress else ("live" if console.err.is_terminal else "lines")
    with Grid(tasks, mode, later=later) as grid:
        outcomes = executor.run(tasks, grid if on_done is None or not kind.stops_on_refusal else Checked(grid, on_done))
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise RunsFailed(len(failed), len(tasks), f"logs beside their configs in {Path(c.out) / JOBS}")


class Checked:
    """A Watch that shows what `grid` shows and hands each run done to `on_done`."""

    def __init__(self, grid: Grid, on_done: Callable[[Task], None]):
        self.grid, self.on_done = grid, on_done

    def changed(self, task: Task, state: str) -> None:
        self.grid.changed(task, state)
        if state == "done":
            self.on_done(task)

    def tick(self) -> None:
        self.grid.tick()

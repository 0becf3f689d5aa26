"""What an executor of `compare` receives, returns and promises; every executor keeps to it.

Receives: `Task`s, each a job's config file that `compare` wrote under <out>/.jobs/ (the task's
log beside it), so a task needs nothing but that file and runs anywhere the package is installed:
`python -m fineprune_cli.drivers.executors.child JOB.yaml [COMMAND]`, or `child.run(...)` in a
process the executor owns. It tells a `Watch` as each task starts and ends, and returns one
`Outcome` per task it saw end.

Resumes: a task reads its folder's state itself (new: trains; incomplete: resumes from its
checkpoint; complete: leaves it), so starting one again never trains a run twice. An executor
whose tasks outlive `compare` (a cluster queue) keeps a ledger of what it submitted under
<out>/.jobs/, and a later `compare` collects those instead of submitting them again.

Forwards a stop: SIGINT, SIGTERM or SIGHUP to `compare` reaches each run in flight once; it
stops after its epoch (resumable) and the executor raises `RunsStopped`. An executor whose runs
live elsewhere may instead stop waiting and say how to collect or cancel them. No run it started
may outlive `compare` unsupervised on this machine.

`Kind` is an executor as the registry holds it: its name, its own settings section
(compare.<name>) and how it is made; `registry.py` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...errors import FinepruneError
from ...settings import apply_values

POLL_S = 0.5  # how often an executor looks at its tasks and the run folders


@dataclass(frozen=True)
class Task:
    """One run of the matrix, as an executor sees it."""

    label: str  # "lenet on synthetic, fine, seed 0"
    group: str  # "lenet-synthetic": the grid's rows are arms of a group
    arm: str
    seed: int
    config: Path  # the job's config (compare writes it under <out>/.jobs/)
    run_dir: Path
    epochs: int
    command: str | None = None  # how compare was started, for the run's summary

    @property
    def log(self) -> Path:
        """The task's own stdout and stderr: its error, and its traceback when it crashed."""
        return self.config.with_suffix(".log")


@dataclass
class Outcome:
    task: Task
    ok: bool
    error: str = ""  # the task's own last error line
    stopped: bool = False  # stopped on request after an epoch (or before its first): resumable


def state(outcome: Outcome) -> str:
    """What a Watch is told of an ended task."""
    if outcome.ok:
        return "done"
    return "stopped" if outcome.stopped else f"failed: {outcome.error}"


class Watch(Protocol):
    """What an executor tells while it works (drivers/grid.py shows it)."""

    def changed(self, task: Task, state: str) -> None:
        """`state`: 'running', 'done', 'stopped' (on request, resumable) or 'failed' (with the
        outcome's error line)."""

    def tick(self) -> None:
        """Called every POLL_S while tasks are in flight."""


class Executor(Protocol):
    def run(self, tasks: list[Task], watch: Watch) -> list[Outcome]:
        """Every task, to its end (or until a stop, raising RunsStopped)."""


class RunsStopped(FinepruneError):
    """A stop signal to `compare`: the runs in flight stopped after their epoch, checkpointed."""

    exit_code = 130
    stop = True

    def __init__(self, signame: str, outcomes: list[Outcome]):
        n = sum(o.stopped for o in outcomes)
        failed = sum(not o.ok and not o.stopped for o in outcomes)
        what = f"stopped {n} run{'s' * (n != 1)} after their epoch" if n else "stopped before the next run"
        more = f"; {failed} failed (each said why above)" if failed else ""
        super().__init__(f"{signame}: {what}{more}; compare again to continue")


class Matrix(Protocol):
    """What a Kind reads of the compare section (drivers/compare.py's CompareConfig)."""

    out: str
    jobs: int
    threads: int
    executor_settings: Any  # this kind's own section, or None


@dataclass(frozen=True)
class Placement:
    """How a run of an executor starts on this machine: the variables it gets (its threads), and
    the cores it is pinned to (None: those compare may use)."""

    env: dict[str, str]
    cores: tuple[int, ...] | None = None


class Kind:
    """An executor as the registry holds it. `settings`: the dataclass of its own section,
    compare.<name> (None: it has none); its fields' flags reach `compare` as any setting's do."""

    name = ""
    help = ""  # one line for --executor's help
    settings: type | None = None
    # whether a run refused as it finishes (on_done) can stop the others: not where runs live elsewhere
    stops_on_refusal = True

    def make(self, cfg: Any, c: Matrix) -> Executor:
        raise NotImplementedError

    def read(self, values: dict[str, Any], source: str) -> Any:
        """Its section from the mapping compare.<name> (YAML, --set and its flags alike)."""
        assert self.settings is not None
        section = self.settings()
        apply_values(section, values, source, f"compare.{self.name}")
        return section

    def refuse(self, cfg: Any, c: Matrix) -> None:
        """Refuse, one line, what this machine or cluster cannot run, before anything is written."""

    def in_process(self, c: Matrix) -> bool:
        """Whether `compare` trains its runs one after the other in its own process instead."""
        return False

    def pace(self, cfg: Any, c: Matrix) -> tuple[int, int | None]:
        """For the dry run: runs at once (0: as many as a queue allows) and threads each (None: torch's count)."""
        return 0, None

    def placement(self, cfg: Any, c: Matrix) -> Placement:
        """How one of its runs starts on this machine, for the dry run's timing of a script (the
        runs of an executor whose runs live elsewhere start as compare itself runs here)."""
        return Placement({})

    def detached(self, c: Matrix) -> bool:
        """Whether `compare` returns once the runs are submitted, without waiting for them."""
        return False

"""Where `compare`'s runs execute: several at once on this machine, or as tasks of a Slurm job
array (drivers/slurm.py). Every executor runs the same task, `drivers/task.py` on a job's
config file, in a process of its own, so one run's crash is that run's error line and the
others go on; a task finds its folder's state itself, so a task started again (a requeued
Slurm task, a later `compare`) resumes from the checkpoint instead of starting over.

On this machine the cores are split into `jobs` slots of `threads` cores each: a run is
pinned to its slot's cores (sched_setaffinity) and told to use that many threads, so two
runs never share a core and a run's thread count (which alone decides its CPU result) is
the setting's, not the number of neighbours'. On CUDA each slot is one visible GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..engine.jobenv import CONCURRENCY, THREADS
from ..errors import ConfigError

POLL_S = 0.5  # how often the executor looks at its processes and the run folders


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


class Watch(Protocol):
    """What an executor tells while it works (drivers/grid.py shows it)."""

    def changed(self, task: Task, state: str) -> None:
        """`state`: 'running', 'done' or 'failed' (with the outcome's error line)."""

    def tick(self) -> None:
        """Called every POLL_S while tasks are in flight."""


@dataclass(frozen=True)
class Slot:
    cores: tuple[int, ...]
    gpu: str | None = None  # the CUDA device it sees (CUDA_VISIBLE_DEVICES)

    def env(self, threads: int, concurrency: int) -> dict[str, str]:
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            THREADS: str(threads),
            CONCURRENCY: str(concurrency),
        }
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        return env


JOBS = ".jobs"


def job_file(run_dir: Path) -> Path:
    """Where the config of the job writing `run_dir` (<out>/<model>-<dataset>/<arm>-seed<seed>)
    goes: <out>/.jobs/<model>-<dataset>/<arm>-seed<seed>.yaml, its logs beside it."""
    return run_dir.parent.parent / JOBS / run_dir.parent.name / f"{run_dir.name}.yaml"


def available_cores() -> list[int]:
    """The cores this process may run on (a container or taskset may allow fewer than exist)."""
    return sorted(os.sched_getaffinity(0))


def visible_gpus() -> list[str]:
    """The CUDA devices this process sees, by the ids a child's CUDA_VISIBLE_DEVICES takes."""
    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in listed.split(",") if x.strip()] if listed else []
    return ids[: torch.cuda.device_count()] or [str(i) for i in range(torch.cuda.device_count())]


def slots(jobs: int, threads: int, cores: list[int], gpus: list[str] | None) -> list[Slot]:
    """`jobs` slots of `threads` cores each (0: an equal share of the cores), one GPU each on
    CUDA (`gpus` not None); more than the machine has is refused."""
    if gpus is not None and jobs > len(gpus):
        raise ConfigError(f"--jobs {jobs} is more than the {len(gpus)} visible GPU(s): one run per GPU")
    if jobs > len(cores):
        raise ConfigError(f"--jobs {jobs} is more than the {len(cores)} cores this process may use")
    threads = threads or len(cores) // jobs
    if jobs * threads > len(cores):
        raise ConfigError(
            f"--jobs {jobs} x --threads {threads} is more than the {len(cores)} cores "
            "this process may use: runs would share cores"
        )
    return [Slot(tuple(cores[i * threads : (i + 1) * threads]), None if gpus is None else gpus[i]) for i in range(jobs)]


def task_command(task: Task) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fineprune_cli.drivers.task",
        str(task.config),
        *([task.command] if task.command else []),
    ]


@dataclass
class LocalExecutor:
    """Runs tasks as child processes of this one, at most one per slot at a time."""

    slots: list[Slot]
    running: dict[Slot, tuple[Task, subprocess.Popen]] = field(default_factory=dict)

    @property
    def threads(self) -> int:
        return len(self.slots[0].cores)

    def run(self, tasks: list[Task], watch: Watch) -> list[Outcome]:
        """Run every task, telling `watch` as each starts and ends."""
        queue, outcomes = list(tasks), []
        try:
            while queue or self.running:
                for slot in [s for s in self.slots if s not in self.running]:
                    if queue:
                        task = queue.pop(0)
                        self.running[slot] = (task, self._start(task, slot))
                        watch.changed(task, "running")
                for slot, (task, proc) in list(self.running.items()):
                    if proc.poll() is not None:
                        del self.running[slot]
                        outcome = Outcome(
                            task,
                            proc.returncode == 0,
                            "" if proc.returncode == 0 else last_error(task.log, proc.returncode),
                        )
                        outcomes.append(outcome)
                        watch.changed(task, "done" if outcome.ok else f"failed: {outcome.error}")
                watch.tick()
                if queue or self.running:
                    time.sleep(POLL_S)
        finally:  # Ctrl-C: the children got it too (one process group); wait for their last epoch
            for _, proc in self.running.values():
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        return outcomes

    def _start(self, task: Task, slot: Slot) -> subprocess.Popen:
        task.log.parent.mkdir(parents=True, exist_ok=True)
        with open(task.log, "ab") as log:
            return subprocess.Popen(
                task_command(task),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=slot.env(self.threads, len(self.slots)),
                preexec_fn=lambda: os.sched_setaffinity(0, slot.cores),
            )


def last_error(log: Path, code: int | None) -> str:
    """The line that says why a task failed: its `error:` line, else its log's last line."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        lines = []
    errors = [x for x in lines if x.startswith("error:")]
    line = errors[-1][len("error:") :].strip() if errors else (lines[-1] if lines else "no output")
    return f"{line} (exit code {code}; log: {log})"

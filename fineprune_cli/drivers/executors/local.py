"""`--executor local` (the default): `compare`'s runs on this machine, `--jobs` at once, each the
child entry point (child.py) on a job's config file in a process of its own, so one run's crash
is that run's error line and the others go on. With --jobs 1 and no --threads, `compare` trains
them one after the other in its own process instead (`in_process`).

The processes are forked from a fork server (forkclient.py) that imported torch and the trainer
once, not new interpreters: a run starts in a fraction of a second instead of ~4.5 s of CPU, and
takes on its slot's environment, cores and thread count as it starts.

On this machine the cores are split into `jobs` slots of `threads` cores each: a run is
pinned to its slot's cores (sched_setaffinity) and told to use that many threads, so two
runs never share a core and a run's thread count (which alone decides its CPU result) is
the setting's, not the number of neighbours'. On CUDA each slot is one visible GPU.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...engine.records.holders import end_group
from ...engine.records.jobenv import CONCURRENCY, THREADS
from ...engine.setup.scriptconfig import runs_script
from ...errors import ConfigError
from ..job import ended
from .contract import POLL_S, Matrix, Outcome, RunsStopped, Task, Watch, state
from .forkclient import Forked, ForkServer


@dataclass(frozen=True)
class Slot:
    cores: tuple[int, ...]
    gpu: str | None = None  # the CUDA device it sees (CUDA_VISIBLE_DEVICES)

    def env(self, threads: int, concurrency: int) -> dict[str, str]:
        return {**os.environ, **self.variables(threads, concurrency)}

    def variables(self, threads: int, concurrency: int) -> dict[str, str]:
        """What a run in this slot is told beyond compare's own environment."""
        env = {
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            THREADS: str(threads),
            CONCURRENCY: str(concurrency),
        }
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        return env


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


# what a run imports, imported once in the fork server (torch's optimizer imports torch._dynamo:
# seconds of its own); the child module itself is not, so `-m` runs it fresh as __main__. A
# `--script` run trains in the user's own process: its child needs no torch, and waits for none.
PRELOAD = ["torch", "torch._dynamo", "fineprune_cli.runner", "fineprune_cli.drivers.reuse"]
SCRIPT_PRELOAD = ["fineprune_cli.drivers.reuse"]


def task_command(task: Task) -> list[str]:
    """The run's `python` arguments (the fork server's child runs them as `python` would)."""
    return ["-m", "fineprune_cli.drivers.executors.child", str(task.config), *([task.command] if task.command else [])]


@dataclass
class LocalExecutor:
    """Runs tasks as child processes of this one, at most one per slot at a time."""

    slots: list[Slot]
    preload: list[str] = field(default_factory=lambda: list(PRELOAD))
    running: dict[Slot, tuple[Task, Forked]] = field(default_factory=dict)
    server: ForkServer | None = None

    @property
    def threads(self) -> int:
        return len(self.slots[0].cores)

    def run(self, tasks: list[Task], watch: Watch) -> list[Outcome]:
        """Run every task, telling `watch` as each starts and ends. A SIGINT, SIGTERM or SIGHUP to this
        process goes on to the runs in flight (each in a process group of its own, so a Ctrl-C
        reaches them once, through here): they stop after their epoch, no other starts, and
        RunsStopped says so once they have."""
        queue, outcomes = list(tasks), []
        with ForkServer(self.preload) as self.server, Forwarding() as stop:
            try:
                while queue or self.running:
                    if stop.requested:
                        queue.clear()
                    for slot in [s for s in self.slots if s not in self.running]:
                        if queue:
                            task = queue.pop(0)
                            self.running[slot] = (task, self._start(task, slot))
                            watch.changed(task, "running")
                    stop.forward([proc for _, proc in self.running.values()])
                    for slot, (task, proc) in list(self.running.items()):
                        if (code := proc.poll()) is not None:
                            del self.running[slot]
                            end_group(proc.pid)  # what it forked (a script's children) ends with it
                            outcomes.append(self._outcome(task, code, stop.requested))
                            watch.changed(task, state(outcomes[-1]))
                    watch.tick()
                    if queue or self.running:  # woken by a run's end, not a fixed sleep
                        select.select([proc for _, proc in self.running.values()], [], [], POLL_S)
            finally:  # an error of our own: the runs in flight stop after their epoch too
                stop.end([proc for _, proc in self.running.values()])
        if stop.requested:
            raise RunsStopped(stop.requested, outcomes)
        return outcomes

    @staticmethod
    def _outcome(task: Task, code: int, stopping: str | None) -> Outcome:
        if code == 0:
            return Outcome(task, True)
        # asked to stop: 130 is a run stopped after its epoch; killed by the signal, one that
        # had not started its loop yet (its folder then holds no epoch, and is trained again)
        stopped = bool(stopping) and code in (130, *(-s for s in Forwarding.SIGNALS))
        return Outcome(task, False, "" if stopped else last_error(task.log, code), stopped)

    def _start(self, task: Task, slot: Slot) -> Forked:
        task.log.parent.mkdir(parents=True, exist_ok=True)
        assert self.server is not None
        with open(task.log, "ab") as log:
            return self.server.popen(
                task_command(task),
                process_group=0,  # a Ctrl-C reaches the run once, forwarded (Forwarding): never twice
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=slot.env(self.threads, len(self.slots)),
                cores=slot.cores,
                pdeathsig=signal.SIGTERM,  # compare killed (SIGKILL, a lost terminal): its runs stop too
            )


class Forwarding:
    """While active (in the main thread), SIGINT, SIGTERM and SIGHUP (a closed terminal, a dropped
    ssh) to this process are noted instead of acted on, and `forward` passes each on to every run in
    flight, once: the first asks a run to stop after its epoch, a second (an impatient Ctrl-C) to
    stop at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: list[int] = []
        self._sent: dict[int, int] = {}  # pid -> how many of `received` it was sent
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> str | None:
        return signal.Signals(self.received[0]).name if self.received else None

    def __enter__(self) -> "Forwarding":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}
            for s in self.SIGNALS:
                signal.signal(s, lambda signum, frame: self.received.append(signum))
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    def forward(self, procs: list[Any]) -> None:
        for proc in procs:
            for signum in self.received[self._sent.get(proc.pid, 0) :]:
                if proc.poll() is None:
                    proc.send_signal(signum)
            self._sent[proc.pid] = len(self.received)

    def end(self, procs: list[Any]) -> None:
        """Wait for the runs still in flight (only when the executor itself failed), asking
        each to stop after its epoch, and passing on the user's signals meanwhile. A run that
        already ended is asked nothing, and our own stop is not one of `received`: noted there,
        it read as the user's (`requested`), and a caller that ends after its runs ended
        normally reported them stopped."""
        live = [proc for proc in procs if proc.poll() is None]
        if not self.received:
            for proc in live:
                proc.send_signal(signal.SIGTERM)
        while any(proc.poll() is None for proc in live):
            self.forward(live)
            time.sleep(POLL_S)


def last_error(log: Path, code: int | None) -> str:
    """The line that says why a task failed: its `error:` line, else its log's last line."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        lines = []
    errors = [x for x in lines if x.startswith("error:")]
    line = errors[-1][len("error:") :].strip() if errors else (lines[-1] if lines else "no output")
    return f"{line} ({ended(code)}; log: {log})"


def on_cuda(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device != "auto":
        return False
    import torch

    return torch.cuda.is_available()


def local_executor(cfg: Any, c: Matrix) -> LocalExecutor:
    """The slots of this machine; --jobs or --threads beyond it is refused before anything trains."""
    return LocalExecutor(
        slots(c.jobs, c.threads, available_cores(), visible_gpus() if on_cuda(cfg.run.device) else None),
        SCRIPT_PRELOAD if runs_script(cfg) else PRELOAD,
    )

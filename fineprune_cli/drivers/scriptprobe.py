"""`compare --script --dry-run`'s clock: the user's script run once, as regular seed 0 would be,
in a folder of its own that is deleted after, and stopped once its first epoch is recorded. It
runs as the runs will: in a working directory of its own (scriptjob.prepare: a script's own
`out/` goes there, not into the launch directory), with the executor's thread count and cores
(--jobs, --threads: `Kind.placement`), since a probe at torch's default threads timed a plan of
one-thread runs several times too long. The epoch says what fineprune's probe says of its own
trainer: the start-up (process, data, model), the training and the rest of an epoch (its test
pass, its records), from which every planned run's time follows as for the trainer (drytime.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .. import console
from ..arms import REGULAR
from ..engine.records.record import read_summary
from ..engine.setup.config import Config
from ..errors import ConfigError
from .compare import CompareConfig, job_config, plan
from .drytime import PlannedRun
from .executors import registry
from .executors.contract import Placement
from .executors.local import last_error
from .trainers.scriptjob import prepare

POLL_S = 0.1


@dataclass(frozen=True)
class ScriptEpoch:
    start_s: float  # from the process's start to its run's start (fineprune.start())
    train_s: float  # the epoch's training, as the script said it (train_seconds=) or as timed
    rest_s: float  # the rest of the epoch: its test pass, its records
    num_train: int
    placed: str = ""  # how it ran, where not as compare itself runs: "1 thread on core 0, as each run of --jobs 2"

    def run_seconds(self, run: PlannedRun, pruning_saves: bool = True) -> float:
        """A planned run at this epoch's pace; a pruned epoch's training costs its kept share
        (`pruning_saves`), or, at the other end, as much as a full one."""
        share = run.images / (run.epochs * self.num_train) if pruning_saves and run.images is not None else 1.0
        return self.start_s + run.epochs * (self.rest_s + share * self.train_s)

    def text(self) -> str:
        return (
            f"one epoch of your script timed (regular, seed 0{', ' + self.placed if self.placed else ''}): start-up "
            f"{self.start_s:.1f} s, training "
            f"{self.train_s:.1f} s, the rest of the epoch (its test pass) {self.rest_s:.1f} s; the first "
            "epoch pays for warm-up, later ones may be faster"
        )


def time_one_epoch(cfg: Config, c: CompareConfig) -> ScriptEpoch | str:
    """The first epoch of the plan's first run, or why there is none (the script's own words)."""
    jobs = plan(cfg, c)
    job = next((j for j in jobs if j.arm == REGULAR), jobs[0])
    place = registry.kind(c.executor).placement(cfg, c)
    with tempfile.TemporaryDirectory(prefix="fineprune-dry-") as tmp:
        job_cfg = job_config(cfg, job, tmp)
        run_dir, log = Path(job_cfg.run.out), Path(tmp) / "script.log"
        words, cwd, env = prepare(job_cfg)
        with open(log, "wb") as out:
            started = time.monotonic()
            try:
                proc = subprocess.Popen(
                    words,
                    cwd=cwd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**env, **place.env},
                    start_new_session=True,
                    preexec_fn=_pinned(place.cores),
                )
            except OSError as exc:
                return f"the script could not start: {exc.strerror or exc}"
            console.info("timing one epoch of the script (regular, seed 0; Ctrl-C: the plan without a time)")
            try:
                seen = _first_epoch(proc, run_dir, cfg.script.timeout, started)
            except KeyboardInterrupt:  # an epoch may take hours: the plan is still worth seeing
                seen = "interrupted before its first epoch ended"
            finally:
                _stop(proc)
        if seen is None:
            return f"the script recorded no epoch: {last_error(log, proc.returncode)}".replace(f"; log: {log}", "")
        return replace(seen, placed=_placed(place, c.jobs)) if isinstance(seen, ScriptEpoch) else seen


def _placed(place: Placement, jobs: int) -> str:
    """How the probe ran, in words, where the executor placed it ('' where as compare itself runs)."""
    threads, cores = place.env.get("OMP_NUM_THREADS"), place.cores or ()
    if threads is None:
        return ""
    where = f"core{'s' if len(cores) != 1 else ''} {','.join(map(str, cores))}"
    return f"{threads} thread{'s' if threads != '1' else ''} on {where}, as each run of --jobs {jobs}"


def _pinned(cores: tuple[int, ...] | None):
    """The probe's process on the cores a run gets (none given: compare's own)."""
    return None if cores is None else lambda: os.sched_setaffinity(0, cores)


def _first_epoch(proc: subprocess.Popen, run_dir: Path, timeout: int, started: float) -> ScriptEpoch | str | None:
    """The first epochs recorded, read as soon as there is one; None if the script ended first."""
    while True:
        try:
            summary = read_summary(run_dir)
        except (ConfigError, OSError):  # not written yet, or being written
            summary = None
        if summary is not None and summary.epochs_completed >= 1:
            n, now = summary.epochs_completed, time.monotonic()
            train, rest = summary.train_seconds / n, summary.eval_seconds / n
            return ScriptEpoch(max(0.0, now - started - n * (train + rest)), train, rest, summary.num_train)
        if proc.poll() is not None:
            return None
        if timeout and time.monotonic() - started > timeout:
            return f"its first epoch took longer than --script-timeout {timeout} s"
        time.sleep(POLL_S)


def _stop(proc: subprocess.Popen) -> None:
    """The timing is over: the script and whatever it started go, SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue

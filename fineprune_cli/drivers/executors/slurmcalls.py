"""The calls to Slurm that `compare --executor slurm` waits on, each bounded in time and each
failure one line: sbatch (through submitit, which waits on it forever and ends a refusal in a
traceback), and squeue or sacct for whether jobs submitted earlier are still queued or running.
"""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import submitit
from submitit.core.utils import FailedJobError, FailedSubmissionError

from ...errors import FinepruneError

T = TypeVar("T")
ASK_EVERY_S = 30.0  # how often Slurm is asked which jobs it still holds, while compare waits
LISTED = ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUE_HOLD")
LISTED += ("REQUEUE_FED", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT")


class SubmitFailed(FinepruneError):
    """sbatch refused the array, printed no job id, or did not answer: nothing to follow."""


class _NoAnswer(Exception):
    """The submission's time ran out (raised inside submitit's wait on sbatch, which then kills it)."""


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raise _NoAnswer in this (the main) thread after `seconds`, and every second after, in
    case the first lands where it is caught. Only the main thread can take a signal: called from
    another (compare run from a library's worker thread) the call is not bounded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise _NoAnswer

    before = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def one_line(text: str, limit: int = 300) -> str:
    """A command's output as one line: its lines joined, 'sbatch: error: ' prefixes dropped."""
    lines = [x.strip().removeprefix("sbatch: error: ").removeprefix("sbatch: ") for x in text.splitlines()]
    joined = "; ".join(x for x in lines if x)
    return joined if len(joined) <= limit else joined[:limit] + "…"


def submitting(folder: Path, seconds: int, submit: Callable[[], T]) -> T:
    """`submit()` (submitit's map_array, which runs sbatch once), with sbatch's refusal, missing
    job id or silence as one line; the files submitit wrote for a submission that did not
    happen are removed, so no later look takes them for a job."""
    before = set(folder.iterdir()) if folder.is_dir() else set()
    quiet = io.StringIO()  # submitit prints sbatch's stderr before raising it
    try:
        with contextlib.redirect_stderr(quiet), _deadline(seconds):
            return submit()
    except (FailedJobError, FailedSubmissionError, OSError, _NoAnswer) as exc:
        for path in set(folder.iterdir()) - before if folder.is_dir() else ():
            if path.is_file():
                path.unlink(missing_ok=True)
        raise SubmitFailed(_why(exc, seconds)) from None


def _why(exc: BaseException, seconds: int) -> str:
    if isinstance(exc, _NoAnswer) or isinstance(exc.__cause__, _NoAnswer):
        return (
            f"sbatch did not answer within {seconds} s (compare.slurm.submit_timeout); the array may still "
            "have been submitted: look with squeue, and scancel it or wait, before compare again"
        )
    if isinstance(exc, FailedSubmissionError):
        output = str(exc).split('"')[1] if str(exc).count('"') >= 2 else str(exc)
        return (
            f"sbatch printed no job id (it said: {one_line(output) or 'nothing'!r}), so compare cannot follow "
            "the array; if squeue shows it, scancel it before compare again"
        )
    if isinstance(exc, OSError):
        return f"cannot run sbatch: {exc.strerror or exc}"
    code = getattr(exc.__cause__, "returncode", None)
    return (
        f"sbatch refused the job array: {one_line(str(exc)) or 'no message'} (exit code {code}); nothing was submitted"
    )


def _ask(command: list[str], seconds: int) -> str | None:
    """The command's output, or None where it is missing, fails or does not answer in time."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def held(job_ids: set[str], seconds: int) -> dict[str, bool] | None:
    """Whether Slurm still holds each of these jobs (array tasks as '4000_1'), queued or
    running: as squeue lists this user's jobs, or else by the state sacct recorded (a job sacct
    does not list is left out: not recorded yet, or purged). None when neither answers, since
    then a job still running cannot be told from one that ended."""
    arrays = ",".join(sorted({j.split("_")[0] for j in job_ids}))
    queue = _ask(["squeue", "--me", "--array", "--noheader", "--format=%i|%T"], seconds)
    sacct = ["sacct", "-o", "JobID,State", "--parsable2", "--noheader", "-j", arrays]
    answer = queue if queue is not None else _ask(sacct, seconds)
    if answer is None:
        return None
    # submitit's reader expands a pending array's range ('4000_[2-5]') to its tasks
    states = submitit.SlurmJob.watcher.read_info("JobID|State\n" + answer)
    state = {j: states[j]["State"].split(" ")[0] for j in job_ids if j in states}
    if queue is not None:  # squeue lists every job Slurm holds: one it does not list has ended
        return {j: state.get(j) in LISTED for j in job_ids}
    return {j: s in LISTED for j, s in state.items()}


@dataclass
class Lost:
    """Jobs Slurm no longer holds: asked every ASK_EVERY_S while compare waits, and a job
    counted only when gone at two asks in a row (its result may reach a shared disk late).
    Such a job without a result was killed before it wrote one; without this, compare waited
    for it forever (submitit asks sacct alone, and a cluster may have none)."""

    seconds: int
    asked: float = field(default_factory=time.monotonic)
    gone: set[str] = field(default_factory=set)

    def check(self, job_ids: set[str]) -> set[str]:
        if time.monotonic() - self.asked < ASK_EVERY_S:
            return set()
        self.asked = time.monotonic()
        now = {j for j, still in (held(job_ids, self.seconds) or {}).items() if not still}
        lost, self.gone = self.gone & now, now
        return lost

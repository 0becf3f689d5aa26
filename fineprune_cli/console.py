"""The one place that prints. Results go to stdout, progress and messages to stderr."""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

# piped output gets room for the wide comparison tables instead of rich's 80 columns
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, highlight=False, soft_wrap=True)


# messages carry user text (paths, labels): never read as rich markup, so '[red]x' stays text
def info(message: str) -> None:
    err.print(message, markup=False)


def result(message: Any) -> None:
    out.print(message, markup=False)


def error(message: str) -> None:
    sys.stderr.write(f"error: {_one_line(message)}\n")


def stopped(message: str) -> None:
    """A stop the user asked for (SIGINT/SIGTERM; the run can continue): one plain line, not an error."""
    sys.stderr.write(f"{_one_line(message)}\n")


def _one_line(message: str) -> str:
    # plain write, no markup; control characters from user input are escaped so the
    # message stays one line whatever a config file or flag contained
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(message.split("\n")))


def print_json(data: Any) -> None:
    """Strict JSON for scripts: a non-finite number (a diverged run's loss) becomes null, since
    NaN and Infinity are not JSON and many parsers reject them."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, allow_nan=False) + "\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def clock(seconds: float | None) -> str:
    """H:MM:SS; '-:--:--' while a time is not known yet."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


STEP_POLL_S = 0.25  # how often the step bar reads the trainer's step counter


class Bar:
    """Progress over `total` units (epochs): a rich bar on a terminal, one plain line per unit
    on stderr otherwise (a log file or a pipe), nothing when disabled. Within a unit, `steps`
    moves a second bar from a host-side counter, so a long epoch is seen to move."""

    def __init__(self, total: int, description: str, mode: str, now: Callable[[], float] = time.monotonic):
        self.total, self.description, self.mode, self.now = total, description, mode, now
        self.done = 0  # units done, those of an earlier process included
        self._fresh = 0  # units done by this process: the rate of the ETA
        self._start = now()
        self._progress: Progress | None = None
        self._task = self._steps_task = None

    def _open(self) -> None:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[eta]}"),
            TextColumn("{task.fields[status]}"),
        )
        self._progress = Progress(*columns, console=err, transient=False)
        self._progress.start()
        self._task = self._progress.add_task(self.description, total=self.total, eta="", status="")

    def _close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

    def elapsed(self) -> float:
        return self.now() - self._start

    def eta(self) -> float | None:
        """Seconds left at this process's rate so far (None before its first unit)."""
        if not self._fresh:
            return None
        return self.elapsed() / self._fresh * (self.total - self.done)

    def resumed(self, units: int) -> None:
        """Units done before this process (a resumed run): they move the bar, not the rate."""
        self.done += units
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done)

    def advance(
        self, status: str = "", seconds_left: float | None = None, untimed: int = 0, label: str = "", plan: str = ""
    ) -> None:
        """One epoch done. A caller may give its own ETA (compare sums each model's cost):
        `seconds_left`, plus `untimed` runs whose cost is not known yet; `label`: what is
        training, for the status column and the plain line; `plan`: what follows the ETA (the
        whole plan's, for planned looks)."""
        self.done += 1
        self._fresh += 1
        left = self.eta() if seconds_left is None else seconds_left
        more = f" + {untimed} run{'s' * (untimed != 1)} not timed yet" if untimed else ""
        eta = f"eta {clock(left)}{more}{plan}"
        if self._progress is not None:
            shown = f"{label}: {status}" if label else status
            self._progress.update(self._task, completed=self.done, status=shown, eta=eta)
        elif self.mode == "lines":
            info(self.line(status, eta, label))

    def line(self, status: str, eta: str, label: str = "") -> str:
        """The plain line of one epoch: what trained, where the whole job is, elapsed and ETA."""
        if label:  # one run of several: its own epoch in `status`, the whole job's after it
            head = f"{label}: {status}; {self.description}: {self.done}/{self.total} epochs"
        else:
            head = f"{self.description}: epoch {self.done}/{self.total}" + (f", {status}" if status else "")
        return f"{head}, elapsed {clock(self.elapsed())}, {eta}"

    def note(self, message: str) -> None:
        """A line of its own (a run of a comparison finished), above the bar on a terminal."""
        if self.mode != "off":
            info(message)

    @contextmanager
    def steps(self, total: int, read: Callable[[], int], label: str = "steps") -> Iterator[None]:
        """While the block runs, a second bar shows read() of `total` (a Python counter the
        training loop increments: reading it never waits for the device), a few times a
        second. Plain-line output has no per-step lines."""
        if self._progress is None:
            yield
            return
        p = self._progress
        if self._steps_task is None:
            self._steps_task = p.add_task("", total=total, eta="", status="")
        p.reset(self._steps_task, total=total, completed=0, description=f"  {label}")
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(STEP_POLL_S):
                p.update(self._steps_task, completed=min(read(), total))

        watcher = threading.Thread(target=poll, name="fineprune-steps", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
            p.update(self._steps_task, completed=min(read(), total))


def resumed(bar: Any, units: int) -> None:
    """`units` done before this process (a resumed run) on any bar: a caller's may only count advances."""
    if hasattr(bar, "resumed"):
        bar.resumed(units)
    else:
        for _ in range(units):
            bar.advance()


def step_view(bar: Any, total: int, read: Callable[[], int], label: str) -> Any:
    """`bar.steps(...)` where the bar has a per-step view (a caller's may not)."""
    return bar.steps(total, read, label) if hasattr(bar, "steps") else nullcontext()


@contextmanager
def progress(total: int, description: str, enabled: bool = True) -> Iterator[Bar]:
    """A progress bar on stderr (stdout stays for results and --json): a rich bar on a
    terminal, one plain line per unit when stderr goes to a file or a pipe (a long job in a
    log must show it is alive), nothing when disabled."""
    mode = "off" if not enabled else ("bar" if err.is_terminal else "lines")
    bar = Bar(total, description, mode)
    if mode == "bar":
        bar._open()
    try:
        yield bar
    finally:
        bar._close()

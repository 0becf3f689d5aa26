"""The one place that prints. Results go to stdout, progress and messages to stderr."""

from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

# piped output gets room for the wide comparison tables instead of rich's 80 columns
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, highlight=False, soft_wrap=True)


# messages carry user text (paths, labels): never read as rich markup, so '[red]x' stays text
def info(message: str) -> None:
    err.print(message, markup=False)


def result(message: Any) -> None:
    out.print(message, markup=False)


def error(message: str) -> None:
    # plain write, no markup; control characters from user input are escaped so the
    # message stays one line whatever a config file or flag contained
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(message.split("\n")))
    sys.stderr.write(f"error: {text}\n")


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


class _Bar:
    def __init__(self, progress: Progress | None, task: Any):
        self._progress, self._task = progress, task

    def advance(self, status: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, status=status)


@contextmanager
def progress(total: int, description: str, enabled: bool = True) -> Iterator[_Bar]:
    """A rich progress bar on stderr; silent when stderr is not a terminal."""
    if not enabled or not err.is_terminal:
        yield _Bar(None, None)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=err, transient=False) as bar:
        yield _Bar(bar, bar.add_task(description, total=total, status=""))

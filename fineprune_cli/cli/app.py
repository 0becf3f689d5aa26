"""The Typer app every command registers on: one line and exit code 2 for bad input, the
options shared by commands, and the command line a run records."""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from .. import console
from ..errors import FinepruneError
from .conventions import EXAMPLES, VersionOpt


class OneLineErrors(TyperGroup):
    """Bad input ends in one line on stderr and exit code 2, never a traceback or a box."""

    def main(
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            ending()
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `fineprune`: show the help
                console.result(exc.format_message())
                sys.exit(0)
            console.error(" ".join(exc.format_message().split()))
            sys.exit(2)
        except FinepruneError as exc:
            ending()
            (console.stopped if exc.stop else console.error)(str(exc))
            sys.exit(exc.exit_code)
        except OSError as exc:  # disk full, permissions, a folder removed meanwhile: not a bug to trace
            ending()
            console.error(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
            sys.exit(2)
        except (typer.Abort, KeyboardInterrupt):
            ending()
            console.stopped("interrupted")
            sys.exit(130)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv

    def invoke(self, ctx: Any) -> Any:
        # typer turns a KeyboardInterrupt from a command into a silent exit 130, before main()
        # above could say it: say it here, as the one line of a stop
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted("interrupted") from None


class Interrupted(FinepruneError):
    """Ctrl-C (or a SIGTERM a command takes as one) outside a training loop's own stop."""

    exit_code = 130
    stop = True


@contextlib.contextmanager
def term_as_interrupt() -> Any:
    """SIGTERM (and SIGHUP) ends a command as Ctrl-C does: by an exception that says one line (killed
    outright, a report left its hidden staging folder in --out, and a compare between runs
    ended with nothing said). A training loop's own stop replaces it while it trains."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # SIGHUP (a closed terminal, a dropped ssh) as SIGTERM: killed outright, compare left its runs
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


OWN_PROCESS = {"main": False}  # set by main(): the process ends with this command


def ending() -> None:
    """The process is about to print its one line and exit: a late Ctrl-C (a second press
    just after the first stopped a run) must not break into that with a traceback. Only where
    the command owns the process: a library caller keeps its handlers."""
    if OWN_PROCESS["main"] and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Data fine-pruning (Li et al., 2018) and other data-pruning policies: train, compare "
    "against equal-budget controls, report, and estimate the time saved.",
    epilog=EXAMPLES[""],
)


@app.callback()
def _options(version: VersionOpt = False) -> None:
    pass


ConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--config", "-c", help="YAML file with sections model/data/train/prune/run (and compare); flags override it."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def invocation() -> str:
    """The command line as typed, for the run's record."""
    return shlex.join(["fineprune", *sys.argv[1:]])


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]

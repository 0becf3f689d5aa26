"""`python -m fineprune_cli ARGV` for a case's setup, forked from the harness (which imported
torch and the CLI once, single-threaded: hostile.py's `run_all`) instead of a new interpreter:
seconds of imports saved per setup. What the setup's compare does is the case's premise, not
what the case tests, so its exit code is returned and its output dropped, as before."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def fineprune(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 90) -> int | None:
    """Run the CLI with `argv` in `cwd` (and `env`, else this process's) in a forked child; its
    exit code, None if it ran past `timeout` seconds (then killed)."""
    pid = os.fork()
    if pid == 0:
        _child(argv, cwd, env)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def _child(argv: list[str], cwd: Path, env: dict[str, str] | None) -> None:
    code = 1
    try:
        os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        sys.argv = ["fineprune", *argv]
        from fineprune_cli.cli import main

        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        os._exit(code)

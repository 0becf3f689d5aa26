"""One job of `compare --script`: the user's command, run for this arm and seed, in place of
fineprune's trainer. The command's {placeholders} are filled from the job's config, which the
script also finds through FINEPRUNE_JOB (`fineprune.start()` reads it); its output goes to a log
beside the job's config. The run is failed, with one line naming that log, when the script exits
non-zero, never starts its run, never records its end, or outlasts --script-timeout."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .. import console
from ..engine import yamlvalues
from ..engine.config import Config
from ..engine.files import atomic_write_text
from ..engine.holders import die_with_parent, end_group
from ..engine.record import CHECKPOINT, METRICS, SUMMARY, Status, read_summary
from ..errors import ConfigError, FinepruneError
from ..harness import JOB_ENV, RUN_DIR_ENV
from .executors.contract import job_file
from .executors.local import last_error

POLL_S = 0.5


class ScriptFailed(FinepruneError):
    """One script run failed; the matrix goes on with the others."""

    exit_code = 1


def script_name(command: str) -> str:
    """The name a script's runs are filed under when --model gives none: its file's stem."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    named = [w for w in words if w.endswith(".py")] or words[-1:] or ["script"]
    return Path(named[0]).stem or "script"


def fill(cfg: Config) -> list[str]:
    """The command's words with the job's values in place of its placeholders."""
    values = {
        "seed": cfg.run.seed,
        "epochs": cfg.train.epochs,
        "milestones": ",".join(map(str, cfg.train.milestones or [])),
        "policy": cfg.policy,
        "arm": cfg.run.arm or cfg.policy,
        "out": cfg.run.out,
    }
    quoted = {k: shlex.quote(str(v)) for k, v in values.items()}
    try:
        return shlex.split(cfg.script.command.format(**quoted))
    except ValueError as exc:
        raise ConfigError(f"--script '{cfg.script.command}' is not a command line: {exc}") from None


def run_script(cfg: Config, bar: Any) -> None:
    """Run the script for this job and wait for it; ScriptFailed says why it failed."""
    run_dir = Path(cfg.run.out)
    config = job_file(run_dir)
    config.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(config, yamlvalues.dump(cfg.to_dict()))
    log = config.with_suffix(".script.log")
    env = {**os.environ, JOB_ENV: str(config.resolve()), RUN_DIR_ENV: str(run_dir.resolve())}
    with open(log, "ab") as out:
        try:
            proc = subprocess.Popen(
                fill(cfg),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(),  # compare (or its task) killed: the script is told to stop
            )
        except OSError as exc:
            raise ScriptFailed(
                f"{bar.label}: the script could not start: {exc.strerror or exc}; its log: {log}"
            ) from None
        try:
            code = _wait(proc, run_dir, cfg.script.timeout, bar)
        finally:
            end_group(proc.pid)  # a child it forked and left (holding the run's lock, perhaps) ends too
    if code:  # its own last words say more than the code
        raise ScriptFailed(f"{bar.label}: the script failed: {last_error(log, code)}")
    reason = _failure(code, run_dir, cfg.script.timeout)
    if reason:
        raise ScriptFailed(f"{bar.label}: the script {reason}; its log: {log}")


def _wait(proc: subprocess.Popen, run_dir: Path, timeout: int, bar: Any) -> int | None:
    """The script's exit code (None: stopped at the time limit), advancing the bar per epoch."""
    started, seen = time.monotonic(), 0
    # SIGTERM to this process (compare's, or a --jobs task's, forwarded) must stop the script too:
    # Python's default would end this process at once and leave the script, a session of its
    # own, running with nobody to wait for it
    restore = _main_thread()
    stops = (signal.SIGTERM, signal.SIGHUP)  # SIGHUP: a closed terminal
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in stops} if restore else {}
    try:
        while proc.poll() is None:
            if timeout and time.monotonic() - started > timeout:
                _stop(proc)
                return None
            seen = _advance(run_dir, seen, bar)
            time.sleep(POLL_S)
    except BaseException:  # Ctrl-C or SIGTERM to compare: the script stops with it
        _stop(proc)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _advance(run_dir, seen, bar)
    return proc.returncode


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _advance(run_dir: Path, seen: int, bar: Any) -> int:
    try:
        rows = max(0, len((run_dir / METRICS).read_text().splitlines()) - 1)
    except OSError:
        return seen
    for _ in range(rows - seen):
        bar.advance()
    return max(rows, seen)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the script's process group, SIGKILL if it is still there after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            if proc.poll() is not None:
                return


def _failure(code: int | None, run_dir: Path, timeout: int) -> str | None:
    """Why a script that exited cleanly (or was stopped at its time limit) made no whole run."""
    if code is None:
        return f"ran past --script-timeout {timeout} s and was stopped"
    if not (run_dir / SUMMARY).exists():
        return "exited without starting its run (it never called fineprune.start())"
    try:
        summary = read_summary(run_dir)
    except ConfigError as exc:
        return f"left an unreadable record ({exc})"
    if summary.status != Status.COMPLETE:
        return (
            f"exited after recording {summary.epochs_completed} of {summary.epochs} epochs without "
            "finishing its run (run.finish())"
        )
    return None


def clear_attempt(run_dir: Path) -> None:
    """An earlier attempt that left no checkpoint for the script to resume is trained anew."""
    if (run_dir / CHECKPOINT).exists():
        console.info(f"{run_dir}: resumable if the script calls run.resume()")
        return
    for name in (SUMMARY, METRICS, "config.yaml"):
        (run_dir / name).unlink(missing_ok=True)

"""One job of `compare --script`: the user's command, run for this arm and seed, in place of
fineprune's trainer. The command's {placeholders} are filled from the job's config, which the
script also finds through FINEPRUNE_JOB (`fineprune.start()` reads it); its output goes to a log
beside the job's config. Each run works in a directory of its own beside that log, since scripts
write to fixed relative paths (./checkpoint/ckpt.pth) and two runs at once would overwrite each
other's; the command's relative paths are made absolute so that it still finds the script. The run is failed, with one line naming that log, when the script exits
non-zero, never starts its run, never records its end, or outlasts --script-timeout."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ... import console
from ...engine.records.files import atomic_write_text
from ...engine.records.holders import die_with_parent, end_group
from ...engine.records.record import CHECKPOINT, METRICS, SUMMARY, Status, read_summary
from ...engine.setup import yamlvalues
from ...engine.setup.config import Config
from ...errors import ConfigError
from ...harness import COMMAND_ENV, JOB_ENV, RUN_DIR_ENV
from ..job import ended, job_file
from .contract import RunFailed

POLL_S = 0.5  # how often the bar reads the script's metrics
LAUNCH_DIR_ENV = "FINEPRUNE_LAUNCH_DIR"  # where compare runs: for a script's own relative paths (./data)


class ScriptFailed(RunFailed):
    """One script run failed; the matrix goes on with the others."""


def script_name(command: str) -> str:
    """The name a script's runs are filed under when --model gives none: its file's stem, the
    module of `python -m module`, else the program's; never a word holding a placeholder."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    words = [w for w in words if "{" not in w and "}" not in w]
    module = [b for a, b in zip(words, words[1:]) if a == "-m"]
    if module and not any(w.endswith(".py") for w in words):
        return module[0]
    named = [w for w in words if w.endswith(".py")] or words[:1] or ["script"]
    return Path(named[0]).stem or "script"


def probe(cfg: Config) -> None:
    """A command that cannot run at all (no such program, a folder, a file without the execute
    bit, `python` given no such file) is refused once here, before the plan or any run folder is
    written: not failed again for every run of the matrix."""
    words = fill(cfg)
    program = words[0] if words else ""
    if "/" in program:
        path = Path(program)
        problem = (
            None if path.is_file() and os.access(path, os.X_OK)
            else "is not an executable file" if path.exists() else "does not exist"
        )  # fmt: skip
    else:
        problem = None if shutil.which(program) else "is no program on PATH"
    if problem:
        raise ConfigError(f"--script '{cfg.script.command}': {program or '(nothing)'} {problem}")
    script = next((w for w in words[1:] if not w.startswith("-")), "")
    if Path(program).name.startswith("python") and script.endswith(".py") and not Path(script).is_file():
        raise ConfigError(f"--script '{cfg.script.command}': {script} does not exist (in {Path.cwd()})")


def fill(cfg: Config, here: Path | None = None) -> list[str]:
    """The command's words with the job's values in place of its placeholders; with `here`, the
    directory compare runs in, each word naming a path there made absolute (the script runs in a
    directory of its own)."""
    values = {
        "seed": cfg.run.seed,
        "epochs": cfg.train.epochs,
        "milestones": ",".join(map(str, cfg.train.milestones or [])),
        "policy": cfg.policy,
        "arm": cfg.run.arm or cfg.policy,
        "out": cfg.run.out,
    }
    if here is not None:
        values["out"] = Path(cfg.run.out).absolute()
    quoted = {k: shlex.quote(str(v)) for k, v in values.items()}
    try:
        words = shlex.split(cfg.script.command.format(**quoted))
    except ValueError as exc:
        raise ConfigError(f"--script '{cfg.script.command}' is not a command line: {exc}") from None
    if here is None:
        return words
    told = {str(v) for k, v in values.items() if k != "out"}  # a seed of 3 is not a file named 3
    # the word after -m names a module (found through PYTHONPATH), even where a folder has its name
    kept = [w in told or (i and words[i - 1] == "-m") for i, w in enumerate(words)]
    return [w if keep else _absolute(w, here, first=i == 0) for i, (w, keep) in enumerate(zip(words, kept))]


def _absolute(word: str, here: Path, first: bool) -> str:
    """`word` (or the value of a --flag=value or key=value) as an absolute path when it names one
    in `here`. A first word without a slash is a program found on PATH (python), never a file here."""
    key = word.split("=", 1)[0]
    flag, eq, value = word.partition("=") if "=" in word and "/" not in key else ("", "", word)
    if not value or value.startswith("-") or Path(value).is_absolute() or (first and "/" not in value):
        return word
    return f"{flag}{eq}{here / value}" if (here / value).exists() else word


def workdir(run_dir: Path) -> Path:
    """The run's own working directory, beside its log: <out>/.jobs/<model>-<dataset>/<arm>-seed<seed>.work."""
    return job_file(run_dir).with_suffix(".work")


def prepare(cfg: Config, command: str | None = None) -> tuple[list[str], Path, dict[str, str]]:
    """The job's config written where the script finds it, its own working directory made: the
    command's words, that directory and the environment to run it in. The dry run's timing runs
    the script through this too, so that it runs as a run will (scriptprobe.py)."""
    run_dir = Path(cfg.run.out)
    config = job_file(run_dir)
    config.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(config, yamlvalues.dump(cfg.to_dict()))
    here, cwd = Path.cwd(), workdir(run_dir)
    cwd.mkdir(exist_ok=True)
    env = {**os.environ, JOB_ENV: str(config.resolve()), RUN_DIR_ENV: str(run_dir.resolve()), LAUNCH_DIR_ENV: str(here)}
    # `python -m module` looked for the module where compare runs; it still does
    env["PYTHONPATH"] = os.pathsep.join([str(here), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop(COMMAND_ENV, None)
    env.update({COMMAND_ENV: command} if command else {})
    return fill(cfg, here), cwd, env


def run_script(cfg: Config, bar: Any, command: str | None = None) -> None:
    """Run the script for this job and wait for it; ScriptFailed says why it failed. `command`:
    compare's own, which the run records as what makes it again (the script's line lacks the arm)."""
    run_dir = Path(cfg.run.out)
    words, cwd, env = prepare(cfg, command)
    log = job_file(run_dir).with_suffix(".script.log")
    before = log.stat().st_size if log.exists() else 0  # an earlier attempt's words are not this one's
    with open(log, "ab") as out:
        try:
            proc = subprocess.Popen(
                words,
                cwd=cwd,
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
        raise ScriptFailed(f"{bar.label}: the script failed: {last_words(log, before)} ({ended(code)}; log: {log})")
    reason = _failure(code, run_dir, cfg.script.timeout)
    if reason:
        raise ScriptFailed(f"{bar.label}: the script {reason}; its log: {log}")


TAIL = 64 * 1024  # of a log read for its last words: a script's 5-MB line is not read whole
WORDS = 2000  # of that line printed


def last_words(log: Path, start: int = 0) -> str:
    """Why the attempt that wrote `log` from byte `start` on failed: its last `error:` line, else
    its last line; read from at most its last TAIL bytes, at most WORDS characters of the line."""
    try:
        with open(log, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(start, size - TAIL))
            text = f.read().decode(errors="replace")
    except OSError:
        text = ""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    line = errors[-1][len("error:") :].strip() if errors else (lines[-1] if lines else "no output")
    return line if len(line) <= WORDS else "…" + line[-WORDS:]


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
            try:  # not a sleep: a script that ends is seen at once (a short run waited half a second)
                proc.wait(POLL_S)
            except subprocess.TimeoutExpired:
                pass
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
    if summary.status == Status.DIVERGED:  # a legitimate record, as the built-in trainer's own
        console.info(f"{run_dir}: the script's loss stopped being finite at epoch {summary.diverged_epoch}: "
                     "recorded as diverged")  # fmt: skip
        return None
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

"""Issue 49, class 5: no process left behind. SIGHUP (a closed terminal) or SIGKILL to `compare`
left its runs training unsupervised; a script's forked child outlived the script, holding the
run's lock, and the next `compare` said "being written by another fineprune process: left to
it" and exited 0. Each case failed before their fix."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import invoke, tiny

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG")


def _pids(marker: str) -> list[int]:
    """Processes (not this one) whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            words = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in words and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _gone(marker: str, seconds: float) -> list[int]:
    """What still runs with `marker` after waiting up to `seconds`; killed then, so no test leaves it."""
    deadline = time.monotonic() + seconds
    while (left := _pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


@pytest.mark.slow  # a compare and its run, each a process importing torch
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["sigkill", "sighup"])
def test_a_killed_or_hung_up_compare_takes_its_runs_with_it(tmp_path, sig, forked):
    out = tmp_path / "leftover-runs"
    args = [*tiny(epochs=2000, policies="regular"), "--threads", "1", "--out", str(out)]
    compare = forked.popen(
        ["-m", "fineprune_cli", "compare", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # as a terminal's job: the signal reaches compare alone
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "lenet-synthetic" / "regular-seed0" / "metrics.csv").exists():
            assert compare.poll() is None and time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        assert _pids(str(out / ".jobs")), "the run is not a process of its own"
        compare.send_signal(sig)
        compare.wait(timeout=60)
    finally:
        if compare.poll() is None:
            compare.kill()
    assert _gone(str(out / ".jobs"), 30) == []


SCRIPT = """
import os, sys, time
import fineprune
run = fineprune.start(num_train=100, seed=0, epochs=2, milestones=[], classes=2, num_test=10)
if os.fork() == 0:  # a worker the script forgets: it holds the run's lock, as a forked child does
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "MARKER"])
raise SystemExit("crashed after forking")
"""


@pytest.mark.slow  # a script run, a Python process importing torch
def test_a_scripts_forked_child_ends_with_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = f"left-{tmp_path.name}"
    script = tmp_path / "forks.py"
    script.write_text(SCRIPT.replace("MARKER", marker))
    done = invoke(
        [
            "compare",
            "--script",
            f"{sys.executable} {script}",
            "--epochs",
            "2",
            "--milestones",
            "",
            "--policies",
            "regular",
            "--out",
            "cmp",
        ]
    )
    assert done.exit_code == 1 and "crashed after forking" in done.output, done.output
    assert _gone(marker, 10) == []


def test_a_lock_held_by_no_run_of_the_folder_is_named_not_waited_for(tmp_path):
    """The run that took the lock has ended; a process it left still holds it."""
    run = tmp_path / "out" / "lenet-synthetic" / "regular-seed0"
    run.mkdir(parents=True)
    ended = subprocess.Popen(["true"])
    ended.wait()
    (run / ".lock").write_text(f"{ended.pid} 1\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(run / ".lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        done = invoke(["compare", *tiny(policies="regular"), "--out", tmp_path / "out"])
    finally:
        holder.kill()
        holder.wait()
    assert done.exit_code == 2, done.output
    assert done.output.startswith(f"error: {run} is locked, but not by a fineprune run of it: the run that took")
    assert f"{holder.pid} (" in done.output and done.output.count("\n") == 1

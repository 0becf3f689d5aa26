"""Who holds a run folder's lock, and processes that must not outlive the one that started them.

A folder's `.lock` is flock'ed by the run writing it, which writes its pid and start time into
it. flock passes to a forked child, so a crashed script's child could hold a folder for ever
while compare reads "being written by another fineprune process" and leaves it: `lock_problem`
tells that apart (the recorded writer is gone, yet the lock is held) and names what holds it.

`die_with_parent` is a child's preexec: on Linux the kernel sends it `sig` when the process
that started it dies, even by SIGKILL (prctl PR_SET_PDEATHSIG), so no run trains on
unsupervised after `compare` is killed or its terminal closed. `end_group` ends what a
finished task left in its process group (a script's forked grandchildren).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path
from typing import Callable

PR_SET_PDEATHSIG = 1


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), so a reused pid is not taken
    for the process that wrote the lock; '' where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def stamp(fd: int) -> None:
    """Write this process as the lock's holder into the lock file open as `fd`."""
    text = f"{os.getpid()} {_start_time(os.getpid())}\n".encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
    except OSError:
        pass  # a read-only lock file: the holder cannot be told, as before


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return not started or _start_time(pid) in ("", started)


def _openers(lock: Path) -> list[str]:
    """'pid (command)' of each process with `lock` open (Linux's /proc; [] elsewhere)."""
    found = []
    target = os.path.realpath(lock)
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self/fd").exists() else []:
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    words = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    found.append(f"{entry.name} ({words[:80] or '?'})")
                    break
            except OSError:
                continue
    return found


def held_here(path: Path) -> bool:
    """Whether the folder's lock names this very process: flock refuses a second open of it here
    too, and "another process" would be wrong (issue 57: a script calling start() twice)."""
    try:
        words = (path / ".lock").read_text().split()
    except OSError:
        return False
    return bool(words) and words[0] == str(os.getpid()) and words[1:2] in ([], [_start_time(os.getpid())])


def lock_problem(path: Path) -> str | None:
    """For a folder whose lock is held: None when its holder is the run that took it (alive),
    else what holds it instead, in words. A lock file that names no holder (written before
    holders were recorded) is taken as a run's."""
    lock = path / ".lock"
    try:
        words = lock.read_text().split()
    except OSError:
        return None
    if not words or not words[0].isdigit():
        return None
    pid, started = int(words[0]), (words[1] if len(words) > 1 else "")
    if _alive(pid, started):
        return None
    others = [o for o in _openers(lock) if not o.startswith(f"{os.getpid()} ")]
    who = ", ".join(others) if others else "a process that could not be named"
    return (
        f"{path} is locked, but not by a fineprune run of it: the run that took the lock (pid {pid}) has "
        f"ended and {who} still holds it (a child it left behind?); stop that process, then compare again"
    )


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn: the child gets `sig` when this process dies (Linux; nothing elsewhere). prctl
    is looked up here, before the fork: loading a library in the forked child of a threaded
    process can deadlock."""
    parent = os.getpid()
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def end_group(pgid: int) -> None:
    """SIGKILL what is left of a finished process's group (it led one of its own)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

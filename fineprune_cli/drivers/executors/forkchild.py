"""A fork server's child (forkserver.py) after it took on its request's streams, folder and
environment: what a new interpreter would set up from them, then the command itself.

A new interpreter reads its environment as it starts; this one imported torch in the server, so
the settings read at import are set again here: the thread count (OMP_NUM_THREADS, else the
cores this process may use, as OpenMP counts them), the standard streams' buffering, the module
search path (PYTHONPATH, and the folder of the script or the working folder for `-m`).
"""

from __future__ import annotations

import ctypes
import io
import locale
import os
import runpy
import sys


def _stream(fd: int, write: bool, line_buffered: bool) -> io.TextIOWrapper:
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    binary = open(fd, "wb" if write else "rb", closefd=False)  # noqa: SIM115 - the process's own stream
    return io.TextIOWrapper(
        binary,
        encoding=os.environ.get("PYTHONIOENCODING", "").split(":")[0] or locale.getpreferredencoding(False),
        errors="backslashreplace" if fd == 2 else "strict",
        line_buffering=line_buffered,
        write_through=write and unbuffered,
    )


def _streams() -> None:
    """New stdin, stdout and stderr over fds 0-2, buffered as a new interpreter buffers them."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    sys.stdin, sys.stdout, sys.stderr = _stream(0, False, False), _stream(1, True, os.isatty(1)), _stream(2, True, True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]


def _threads() -> None:
    """torch's intra-op threads as a new interpreter would have them (torch read its environment
    in the server, with the server's cores)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(wanted) if wanted.isdigit() and int(wanted) > 0 else len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)


def _path(first: str) -> None:
    """sys.path as `python ARGS` would start it: `first`, PYTHONPATH, then the installation's."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path[1:] if p not in extra]
    sys.path[:] = [first, *extra, *rest]


def _title(words: list[str]) -> None:
    """This process's command line (/proc/PID/cmdline, what `ps` and `pgrep -f` read) made the
    command's, written over the server's own argv (Linux; its room is the server's argv, which
    forkclient pads): a run is found by its job's path, as it was when it was `python ...`."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
    except (OSError, IndexError, ValueError):
        return
    text = "\0".join(words).encode(errors="replace")[: end - start - 1]
    ctypes.memmove(start, text + b"\0" * (end - start - len(text)), end - start)


def run_command(request: dict) -> None:
    """Run `python ARGS` (`-m module ...`, `-c code ...` or `script ...`) in this process; an
    exception or SystemExit leaves it as it would leave `python`."""
    _title([sys.executable, *request["args"]])
    _streams()
    _threads()
    args = list(request["args"])
    if args[0] == "-m":
        _path(os.getcwd())
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        _path("")
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        _path(os.path.dirname(os.path.abspath(args[0])))
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")

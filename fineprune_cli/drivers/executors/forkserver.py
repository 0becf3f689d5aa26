"""A preloaded fork server: one interpreter imports what its commands need (torch, the CLI) once,
then forks a process per command, so a command starts in a fraction of a second instead of the
seconds a new interpreter spends importing torch (`compare --jobs`' runs, the test suite's
processes). forkclient.py starts it and talks to it.

Forking is safe only from a single-threaded process: the server imports before any thread pool
exists (torch's intra-op pool starts on first use, CUDA on first call) and checks it, and is
itself nothing but a loop over one listening socket. Each request brings its command's argv,
environment, working folder, standard streams (passed as file descriptors), process group and
cores; the child takes them on before running the command, as a new interpreter would have
been started with them. The server sends back the child's pid, then its exit status (negative:
the signal that ended it), as `subprocess` reports them.

Run as `python -m fineprune_cli.drivers.executors.forkserver LISTEN_FD MODULE... ROOM`; it exits
when its listening socket's owner says so (SIGTERM) or, with the owner's pdeathsig, dies with it.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import threading

HEADER = struct.Struct("!I")
MAX_FDS = 3  # stdin, stdout, stderr
PR_SET_PDEATHSIG = 1


def read_message(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: a length, then a JSON object; the file descriptors ride with the length."""
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, MAX_FDS)
    if len(head) < HEADER.size:
        raise EOFError("the client closed the connection")
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the client closed the connection mid-request")
        body += chunk
    return json.loads(body), list(fds)


def native_threads() -> int:
    """Threads of this process, Python's and native pools' alike (Linux's /proc; 1 elsewhere)."""
    tasks = "/proc/self/task"
    return len(os.listdir(tasks)) if os.path.isdir(tasks) else 1


# libraries whose thread pools stop and restart themselves around a fork (OpenBLAS's
# pthread_atfork): numpy's, and scipy's own OpenBLAS, which Lightning's metrics load
FORK_SAFE_POOLS = ("numpy", "scipy.linalg")


def preload(modules: list[str]) -> None:
    """Import `modules`; refused if that started a thread. The FORK_SAFE_POOLS start their pools
    as they load, so they are imported and their threads counted first, and allowed; any other
    (torch's intra-op pool, CUDA's) would be copied broken into children."""
    for pool in FORK_SAFE_POOLS:
        try:
            importlib.import_module(pool)
        except ImportError:
            pass
    allowed = native_threads()
    for name in modules:
        importlib.import_module(name)
    if threading.active_count() != 1 or native_threads() != allowed:
        raise SystemExit(f"forkserver: a thread runs after importing {modules}: forking would be unsafe")


def serve(listener: socket.socket) -> dict:
    """Fork a child per request until told to stop; returns (in the child only) its request."""
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([listener], [], [], 0.05)
        if ready:
            conn, _ = listener.accept()
            try:
                request, fds = read_message(conn)
            except (EOFError, OSError, ValueError):
                conn.close()
                continue
            # the preloaded objects out of the collector's reach: a child's collections (and its
            # exit's) touched each one, copying every page of them (~1.5 CPU s a child, 0.4 now)
            gc.freeze()
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in children.values():
                    other.close()
                return _take_on(request, fds, conn)
            for fd in fds:
                os.close(fd)
            _send(conn, f"pid {pid}\n")
            children[pid] = conn
        _reap(children)


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(line.encode())
    except OSError:
        pass  # the client went away; the child runs on, as a Popen'd one would


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            _send(conn, f"exit {os.waitstatus_to_exitcode(status)}\n")
            conn.close()


def _take_on(request: dict, fds: list[int], conn: socket.socket) -> dict:
    """In the child: become the process the request describes (what exec would have given)."""
    conn.close()
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a new interpreter has it
    if request.get("session"):
        os.setsid()
    elif request.get("group"):
        os.setpgid(0, 0)
    if request.get("pdeathsig"):
        _die_with_server(int(request["pdeathsig"]))
    if request.get("cores"):
        os.sched_setaffinity(0, request["cores"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    return request


def _die_with_server(sig: int) -> None:
    """The server's own pdeathsig chain: it dies with its owner, and each child with it."""
    import ctypes

    server = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != server:
        os.kill(os.getpid(), sig)


def main(argv: list[str]) -> dict:
    listener = socket.socket(fileno=int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its owner's to pass on, never the server's
    preload([name for name in argv[1:] if name.strip()])  # the blank last one is room for titles
    return serve(listener)


if __name__ == "__main__":
    from .forkchild import run_command

    run_command(main(sys.argv[1:]))

"""The owner's side of a fork server (forkserver.py): `ForkServer` starts one that preloads the
named modules, and `popen` starts `python ARGS` as its forked child, returned as a `Forked` that
answers what a `subprocess.Popen` answers (pid, poll, wait, send_signal, returncode, pipes).

The server is started with the owner's pdeathsig (SIGKILL): killed with its owner, its children
then get their own pdeathsig, so a `die_with_parent` child still dies with the process that
asked for it. The child is the server's, not ours: its exit status comes over the socket.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from ...engine.records.holders import die_with_parent
from .forkserver import HEADER

SERVER = "fineprune_cli.drivers.executors.forkserver"
Stream = int | IO[Any] | None
TITLE_ROOM = 4096  # the server's last argument, blank: room for each child's command line


class Forked:
    """A command forked by the server, as a Popen: signals go to its pid (or group) directly."""

    def __init__(self, args: list[str], conn: socket.socket, pipes: dict[int, IO[Any]]):
        self.args, self._conn = args, conn
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = (pipes.get(i) for i in range(3))
        first = self._line().split()
        if not first or first[0] != "pid":
            raise OSError("the fork server did not start the command (it has ended; its log says why)")
        self.pid = int(first[1])

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def fileno(self) -> int:
        """The socket the server writes our exit status to: readable once we ended (select on it)."""
        return self._conn.fileno()

    def _line(self) -> str:
        """One line from the server, read unbuffered: a buffered reader could take the exit line
        along with the pid line, and select would then wait on a socket with nothing left in it."""
        line = b""
        while not line.endswith(b"\n"):
            chunk = self._conn.recv(1)
            if not chunk:
                break
            line += chunk
        return line.decode()

    def _read_status(self) -> None:
        words = self._line().split()
        # no status: the server was killed, and the child with it (its pdeathsig)
        self.returncode = int(words[1]) if len(words) == 2 and words[0] == "exit" else -signal.SIGKILL
        self._conn.close()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read_status()
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Feed stdin, read stdout and stderr to their ends, and wait (threads: no pipe fills)."""
        results: dict[int, Any] = {}
        readers = [
            threading.Thread(target=_drain, args=(s, i, results)) for i, s in ((1, self.stdout), (2, self.stderr)) if s
        ]
        for reader in readers:
            reader.start()
        if self.stdin:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return results.get(1), results.get(2)

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: Any) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe:
                pipe.close()
        self.wait()


def _drain(stream: IO[Any], index: int, results: dict[int, Any]) -> None:
    results[index] = stream.read()
    stream.close()


def _child_end(spec: Stream, index: int, opened: list[int], pipes: dict[int, IO[Any]], text: bool) -> int:
    """The fd the child gets as its stream `index` (0-2), for Popen's stdin/stdout/stderr values."""
    if spec is None:
        return index
    if spec == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
    elif spec == subprocess.PIPE:
        read, write = os.pipe()
        ours, fd = (write, read) if index == 0 else (read, write)
        pipes[index] = open(ours, ("w" if index == 0 else "r") + ("" if text else "b"))  # noqa: SIM115
    elif isinstance(spec, int):
        return spec
    else:
        return spec.fileno()
    opened.append(fd)
    return fd


class ForkServer:
    """A fork server owned by this process (a context manager: it ends with the block)."""

    def __init__(self, preload: list[str], log: Path | None = None, env: dict[str, str] | None = None):
        """`env`: the server's own environment (this process's if None), where it finds what it
        preloads; each command gets the environment its `popen` names."""
        self.folder = tempfile.mkdtemp(prefix="fineprune-fork-")
        self.address = os.path.join(self.folder, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(64)
        self.log = log or Path(self.folder) / "server.log"
        with open(self.log, "ab") as err:
            self.server = subprocess.Popen(
                [sys.executable, "-m", SERVER, str(listener.fileno()), *preload, " " * TITLE_ROOM],
                env=env,
                pass_fds=(listener.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                process_group=0,  # a Ctrl-C to the terminal is for the owner to pass on
                preexec_fn=die_with_parent(signal.SIGKILL),
            )
        listener.close()  # the server's copy alone: if it dies, connecting fails at once

    def popen(self, args: list[str], **options: Any) -> Forked:
        """`python ARGS` forked: options env, cwd, stdin, stdout, stderr (fds, files, PIPE,
        DEVNULL, STDOUT), text, process_group=0, start_new_session, cores, pdeathsig."""
        opened: list[int] = []
        pipes: dict[int, IO[Any]] = {}
        text = bool(options.get("text"))
        fds = [_child_end(options.get(n), i, opened, pipes, text) for i, n in enumerate(("stdin", "stdout", "stderr"))]
        if options.get("stderr") == subprocess.STDOUT:
            fds[2] = fds[1]
        request = {
            "args": [str(a) for a in args],
            "env": dict(os.environ if options.get("env") is None else options["env"]),
            "cwd": str(options.get("cwd") or os.getcwd()),
            "group": options.get("process_group") == 0,
            "session": bool(options.get("start_new_session")),
            "cores": list(options["cores"]) if options.get("cores") else None,
            "pdeathsig": options.get("pdeathsig"),
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.address)
            body = json.dumps(request).encode()
            socket.send_fds(conn, [HEADER.pack(len(body))], fds)
            conn.sendall(body)
            return Forked([str(a) for a in args], conn, pipes)
        except OSError as exc:
            conn.close()
            raise OSError(f"{exc} (fork server log: {self.log}: {self.tail()})") from exc
        finally:
            for fd in opened:
                os.close(fd)

    def run(
        self, args: list[str], timeout: float | None = None, input: Any = None, **options: Any
    ) -> subprocess.CompletedProcess:
        """subprocess.run's counterpart (capture_output, text, timeout, check)."""
        if options.pop("capture_output", False):
            options["stdout"] = options["stderr"] = subprocess.PIPE
        check = options.pop("check", False)
        if input is not None:
            options["stdin"] = subprocess.PIPE
        proc = self.popen(args, **options)
        try:
            out, err = proc.communicate(input, timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        done = subprocess.CompletedProcess(args, proc.wait(), out, err)
        if check:
            done.check_returncode()
        return done

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.terminate()
            self.server.wait()
        for path in (self.address, self.log if self.log.parent == Path(self.folder) else None):
            if path:
                Path(path).unlink(missing_ok=True)
        os.rmdir(self.folder)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

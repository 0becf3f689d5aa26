"""Files written whole or not at all (temporary file in the same folder, fsync, rename), and
the CSV / Markdown text of tables."""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

UMASK = os.umask(0)  # read once: files get the permissions the user's umask allows
os.umask(UMASK)


def cache_home() -> Path:
    """Where decoded datasets are kept between runs: $FINEPRUNE_CACHE, else the user's cache
    folder ($XDG_CACHE_HOME or ~/.cache) / fineprune."""
    explicit = os.environ.get("FINEPRUNE_CACHE")
    return (
        Path(explicit) if explicit else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fineprune"
    )


@contextmanager
def filling(path: Path) -> Iterator[None]:
    """Held while a cache file `path` is made: an exclusive lock on a file beside it (released by
    the kernel if its holder dies), so the processes of a run that all miss a fresh cache make it
    once: each re-reads the cache once it holds the lock. Without a writable folder, no lock."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o666 & ~UMASK)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


READ_LIMIT = 64 * 2**20  # a record, config or notes file larger than this is none of ours


def read_regular(path: Path, limit: int = READ_LIMIT) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. A FIFO would block the reader and
    /dev/zero never end: those, and anything larger, are an OSError naming the file (opened
    without blocking, then checked, so a file swapped for a FIFO meanwhile is caught too)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - len(data)))
            if not chunk:
                return data
            data += chunk
        raise OSError(errno.EFBIG, f"larger than {size_text(limit)}", str(path))
    finally:
        os.close(fd)


def size_text(size: int) -> str:
    """A size in the largest binary unit it fills (64 KiB, 64 MiB, 1.5 GiB): a 64 KiB limit
    written in whole MB read "0 MB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def read_regular_text(path: Path, limit: int = READ_LIMIT) -> str:
    """read_regular as UTF-8 text (UnicodeDecodeError when it is not)."""
    return read_regular(path, limit).decode("utf-8")


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 points to /dev/null inside the block: C libraries (libpng, c10d) write
    there directly, and the error we raise says it in one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would make records private
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_torch_save(obj: Any, path: Path) -> None:
    buf = io.BytesIO()
    import torch  # here: reading settings and text files must not import torch

    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def to_csv(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def to_markdown(header: list[str], rows: list[list[Any]]) -> str:
    def line(cells: list[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header))] + [line(r) for r in rows]) + "\n"

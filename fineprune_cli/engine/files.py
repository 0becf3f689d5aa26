"""Files written whole or not at all (temporary file in the same folder, fsync, rename), and
the CSV / Markdown text of tables."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

UMASK = os.umask(0)  # read once: files get the permissions the user's umask allows
os.umask(UMASK)


def cache_home() -> Path:
    """Where decoded datasets are kept between runs: $FINEPRUNE_CACHE, else the user's cache
    folder ($XDG_CACHE_HOME or ~/.cache) / fineprune."""
    explicit = os.environ.get("FINEPRUNE_CACHE")
    return Path(explicit) if explicit else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fineprune"


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

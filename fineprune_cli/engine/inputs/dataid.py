"""Which data a run trained on, by content: the identity a run records, a resume must find again,
a comparison must match to reuse a run, and a report groups runs by.

An identity is a hash of every file's relative path, label and bytes: the same files at another
path, copied to a node's local disk, re-extracted from an archive or checked out by git (new
mtimes) are the same data; one changed byte, or one file renamed or moved between classes, is
other data. Its values read '50000 files, content 1a2b3c4d5e6f7a8b'. Runs made before this
recorded an image folder's listing instead (paths, labels, sizes and mtimes: '50000 files,
1a2b...'); they are checked against a listing computed the same way (`is_content`), as before.

Reading 60,000 files on every run start would cost seconds, so each file's digest is cached in the
user's cache folder, keyed on its relative path, size, mtime and ctime: a file is read again only
when one of those changes (an edit can set its mtime back, not its ctime).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..records.files import atomic_write_text, cache_home

MARK = "content"  # the word a content identity's values carry
VERSION = 1  # of the digest cache's layout


def is_content(identity: dict[str, str]) -> bool:
    """Whether a recorded identity is by content (else: an older listing, or none)."""
    return any(f" {MARK} " in str(v) for v in identity.values())


def _cache_file(root: Path) -> Path:
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return cache_home() / f"content-{root.resolve().name[:40]}-{key}.json"


def _load(path: Path) -> dict[str, list]:
    try:
        data = json.loads(path.read_text())
        return data["files"] if data.get("version") == VERSION and isinstance(data.get("files"), dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}  # no cache, or a broken one: the digests are computed again


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _relative(root: Path, files: list[Path]) -> list[str]:
    """Each file's path below root, as '/'-separated text (os.path.relpath costs seconds for
    60,000 files; the listing's files are root's own children, so a prefix does it)."""
    prefix = str(root).rstrip(os.sep) + os.sep
    return [
        (text[len(prefix) :] if text.startswith(prefix) else os.path.relpath(text, root)).replace(os.sep, "/")
        for text in map(str, files)
    ]


def digests(root: Path, files: list[Path]) -> list[str]:
    """Each file's sha256, in order, from the cache where its size, mtime and ctime are what the
    cache saw (an mtime can be set back after an edit; the ctime cannot: any write or utime moves
    it); the cache is rewritten only when a digest was computed."""
    path = _cache_file(root)
    known = _load(path)
    out, fresh = [], False
    for f, rel in zip(files, _relative(root, files)):
        st = f.stat()
        entry = known.get(rel)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        if not (isinstance(entry, list) and len(entry) == 4 and entry[:3] == stamp):
            known[rel] = entry = [*stamp, _digest(f)]
            fresh = True
        out.append(entry[3])
    if fresh:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps({"version": VERSION, "files": known}))
        except OSError:
            pass  # a read-only cache folder: the identity is the same, only slower next time
    return out


def content_hash(root: Path, items: list[tuple[Path, int]]) -> str:
    """The files' relative paths, labels and bytes, hashed in order."""
    files = [f for f, _ in items]
    h = hashlib.sha256()
    for rel, (_, label), digest in zip(_relative(root, files), items, digests(root, files)):
        h.update(f"{rel}\0{label}\0{digest}\n".encode())
    return h.hexdigest()


def folder_identity(root: Path, listing: dict) -> dict[str, str]:
    """An image folder's identity: per split, its file count and content hash."""
    return {
        split: f"{len(listing[split])} files, {MARK} {content_hash(root, listing[split])[:16]}"
        for split in ("train", "test")
    }


def files_identity(files: list[Path]) -> dict[str, str]:
    """A built-in dataset's identity from its source files (named by their file names)."""
    root = files[0].parent
    items = [(f, 0) for f in sorted(files, key=lambda p: p.name)]
    h = hashlib.sha256()
    for (f, _), digest in zip(items, digests(root, [f for f, _ in items])):
        h.update(f"{f.name}\0{digest}\n".encode())
    return {"files": f"{len(files)} files, {MARK} {h.hexdigest()[:16]}"}

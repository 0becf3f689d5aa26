"""Which version of a user's script made a run: a report names it as the runs' code, since
fineprune's own commit says nothing of the script's."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def script_version(path: str | Path) -> str:
    """'main.py at git commit 1a2b3c4d5e6f' for a file committed unchanged; with its content's
    sha256 beside the commit where the file differs from it (the commit alone would name another
    script); 'main.py, sha256 …' outside a git work tree; '' when `path` is no file (python -c)."""
    file = Path(path)
    if not file.is_file():
        return ""
    digest = f"sha256 {hashlib.sha256(file.read_bytes()).hexdigest()[:16]}"
    commit = _git(file.parent, "rev-parse", "--short=12", "HEAD")
    if commit is None:
        return f"{file.name}, {digest}"
    changed = _git(file.parent, "status", "--porcelain", "--", file.name)
    return f"{file.name} at git commit {commit}" + (f", changed since ({digest})" if changed or changed is None else "")


def _git(where: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=where)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None

"""Which version of a user's script made a run: a report names it as the runs' code, since
fineprune's own commit says nothing of the script's."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def script_version(path: str | Path) -> str:
    """'main.py at git commit 1a2b3c4d5e6f' for a file committed unchanged in a clean work tree;
    with its content's sha256 beside the commit where it or a tracked file of its tree changed
    since (the commit alone would name other code); 'main.py, sha256 …' outside a git work tree;
    '' when `path` is no file (python -c)."""
    file = Path(path)
    if not file.is_file():
        return ""
    digest = f"sha256 {hashlib.sha256(file.read_bytes()).hexdigest()[:16]}"
    commit = _git(file.parent, "rev-parse", "--short=12", "HEAD")
    if commit is None:
        return f"{file.name}, {digest}"
    # the script's own file, untracked or not, and the tracked files beside it (its models, its utils)
    changed = _git(file.parent, "status", "--porcelain", "--", file.name)
    tree = _git(file.parent, "status", "--porcelain", "--untracked-files=no", "--", ":/")
    dirty = changed is None or tree is None or changed or tree
    return f"{file.name} at git commit {commit}" + (f", changed since ({digest})" if dirty else "")


def _git(where: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=where)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None

"""What a script declares its data to be (`fineprune.start(data=...)`), by content, as fineprune's
own datasets are recorded (`engine.inputs.dataid`): the same data copied elsewhere is the same data, one
changed byte or sample is other data, and a report never pairs runs on other data."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..engine.inputs import dataid
from ..engine.inputs.imagefolder import list_folder
from ..lazytorch import torch


def tensor_identity(*tensors: torch.Tensor, name: str = "tensors") -> dict[str, str]:
    """The identity of data held in tensors (e.g. the training inputs and labels): their dtypes,
    shapes and bytes."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        h.update(f"{t.dtype}\0{tuple(t.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return {name: f"{len(tensors)} tensors, {dataid.MARK} {h.hexdigest()[:16]}"}


def folder_identity(root: str | Path) -> dict[str, str]:
    """The identity of a folder of files: an image folder (train/<class>/, test/<class>/) as
    fineprune records its own, any other folder by every file's relative path and bytes
    (digests cached, keyed on path, size, mtime and ctime)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder")
    if (root / "train").is_dir() and (root / "test").is_dir():
        return dataid.folder_identity(root, list_folder(root))
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {"files": f"{len(files)} files, {dataid.MARK} {dataid.content_hash(root, [(f, 0) for f in files])[:16]}"}

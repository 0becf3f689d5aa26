"""torch, imported on its first use. A user's script that only records its runs
(`fineprune.start()`, `run.log()`, `run.finish()`) never trains with fineprune's tensors, yet the
settings it is checked against name the policies, whose modules compute with torch: they take
`torch` from here, so defining them costs nothing and importing torch (1.5 s of CPU) waits until
a tensor is made. `loaded()` tells whether anyone has imported it."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any


class _Torch:
    """Stands for the module: each name is looked up in it once, then kept (torch's top-level
    names are bound as it is imported, never rebound), so a hot loop pays no more than a dict."""

    def __getattr__(self, name: str) -> Any:
        value = getattr(importlib.import_module("torch"), name)
        setattr(self, name, value)
        return value


def loaded() -> ModuleType | None:
    """torch where this process imported it (the script's own training did), else None."""
    return sys.modules.get("torch")


if TYPE_CHECKING:
    import torch as torch
else:
    torch = _Torch()

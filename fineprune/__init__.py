"""fineprune, imported under the distribution's own name (`pip install fineprune`, `import
fineprune`): the library of `fineprune_cli`, which keeps its name for code written against it.
The names load on first use, so importing this needs no torch until one is asked for."""

from __future__ import annotations

from typing import Any

import fineprune_cli
from fineprune_cli import __all__, __version__

__all__ = [*__all__, "__version__"]


def __getattr__(name: str) -> Any:
    return getattr(fineprune_cli, name)


def __dir__() -> list[str]:
    return sorted(__all__)

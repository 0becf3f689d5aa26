"""The method, independent of any trainer: DroppingCount (Algorithm 1), the schedule
(Algorithm 2), the policy protocol and registry, the library `Pruner`, the DataLoader sampler and the estimate.

The names load on first use (PEP 562), so the settings (`pruning.config`) and the schedule
can be imported without torch; the registry imports the policies when first asked."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "PruneConfig": "config",
    "EpochPlan": "policy",
    "Policy": "policy",
    "create": "policy",
    "Pruner": "pruner",
    "get": "registry",
    "list_policies": "registry",
    "register": "registry",
    "DistributedPruningSampler": "distsampler",
    "IndexedDataset": "sampler",
    "PruningSampler": "sampler",
    "PruneSchedule": "schedule",
    "DroppingCount": "tracker",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)

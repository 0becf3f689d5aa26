"""fineprune: data fine-pruning (Li et al., 2018) on a fast device-resident PyTorch trainer.

Library use in your own loop: `Pruner`, `PruneSchedule`, `DroppingCount`, or any registered
policy through `create_policy`; in a DataLoader pipeline `IndexedDataset` and `PruningSampler`
(`DistributedPruningSampler` data-parallel); Lightning: `fineprune_cli.integrations.lightning`
(see docs/howto/own-loop.md, dataloader.md and lightning.md). Your own training script under
`fineprune compare --script`: `start` (docs/howto/own-script.md). `import fineprune` gives the
same names; this package keeps its name for code that imports it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DistributedPruningSampler",
    "DroppingCount",
    "EpochPlan",
    "IndexedDataset",
    "Policy",
    "PruneConfig",
    "PruneSchedule",
    "Pruner",
    "PruningSampler",
    "ScriptRun",
    "create_policy",
    "folder_identity",
    "list_policies",
    "start",
    "tensor_identity",
]
__version__ = "0.2.0"

_RENAMED = {"create_policy": "create"}


def __getattr__(name: str) -> Any:
    """The library names load on first use (PEP 562): `import fineprune_cli` for the command
    line, e.g. `fineprune --help`, must not import torch."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import harness, pruning

    value = getattr(harness if name in harness.__all__ else pruning, _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)

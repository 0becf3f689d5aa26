"""fineprune: data fine-pruning (Li et al., 2018) on a fast device-resident PyTorch trainer.

Library use in your own loop: `Pruner`, `PruneSchedule`, `DroppingCount`, or any registered
policy through `create_policy`; in a DataLoader pipeline `IndexedDataset` and `PruningSampler`
(`DistributedPruningSampler` data-parallel); Lightning: `fineprune_cli.lightning` (see README.md).
"""

from .pruning import (DistributedPruningSampler, DroppingCount, EpochPlan, IndexedDataset, Policy,
                      PruneConfig, PruneSchedule, Pruner, PruningSampler)
from .pruning import create as create_policy
from .pruning import list_policies

__all__ = ["DistributedPruningSampler", "DroppingCount", "EpochPlan", "IndexedDataset", "Policy",
           "PruneConfig", "PruneSchedule", "Pruner", "PruningSampler", "create_policy", "list_policies"]
__version__ = "0.2.0"

"""fineprune: data fine-pruning (Li et al., 2018) on a fast device-resident PyTorch trainer.

Library use in your own loop: `Pruner`, `PruneSchedule`, `DroppingCount`, or any registered
policy through `create_policy` (see README.md).
"""

from .pruning import DroppingCount, EpochPlan, Policy, PruneConfig, PruneSchedule, Pruner
from .pruning import create as create_policy
from .pruning import list_policies

__all__ = ["DroppingCount", "EpochPlan", "Policy", "PruneConfig", "PruneSchedule", "Pruner",
           "create_policy", "list_policies"]
__version__ = "0.2.0"

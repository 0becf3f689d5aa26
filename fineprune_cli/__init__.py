"""fineprune: data fine-pruning (Li et al., 2018) on a fast device-resident PyTorch trainer.

Library use in your own loop: `Pruner`, `PruneSchedule`, `DroppingCount` (see README.md).
"""

from .pruner import Pruner
from .schedule import PruneSchedule
from .tracker import DroppingCount

__all__ = ["DroppingCount", "PruneSchedule", "Pruner"]
__version__ = "0.1.0"

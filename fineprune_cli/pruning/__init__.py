"""The method, independent of any trainer: DroppingCount (Algorithm 1), the schedule
(Algorithm 2), the policy protocol and registry, the library `Pruner`, the DataLoader sampler and the estimate."""

from . import policies  # noqa: F401  (registers every policy module)
from .config import PruneConfig
from .policy import EpochPlan, Policy, create
from .pruner import Pruner
from .registry import get, list_policies, register
from .sampler import DistributedPruningSampler, IndexedDataset, PruningSampler
from .schedule import PruneSchedule
from .tracker import DroppingCount

__all__ = ["DistributedPruningSampler", "DroppingCount", "EpochPlan", "IndexedDataset", "Policy",
           "PruneConfig", "PruneSchedule", "Pruner", "PruningSampler", "create", "get", "list_policies",
           "register"]

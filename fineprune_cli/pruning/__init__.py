"""The method, independent of any trainer: DroppingCount (Algorithm 1), the schedule
(Algorithm 2), the policy protocol and registry, the library `Pruner` and the estimate."""

from .config import PruneConfig
from .policy import EpochPlan, Policy, create, get, list_policies, register
from .pruner import Pruner
from .schedule import PruneSchedule
from .tracker import DroppingCount

__all__ = ["DroppingCount", "EpochPlan", "Policy", "PruneConfig", "PruneSchedule", "Pruner",
           "create", "get", "list_policies", "register"]

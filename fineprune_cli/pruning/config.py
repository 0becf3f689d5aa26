"""The pruning settings: the `prune` section of a config, declared once."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..settings import at_least, in_range, option
from .registry import ALIASES, list_policies


def _known_policy(name: str) -> str | None:
    return None if ALIASES.get(name, name) in list_policies() else \
        f"must be one of: {', '.join(list_policies())}"


@dataclass
class PruneConfig:
    enabled: bool = option(False, flag="--prune/--no-prune",
                           help="Turn data pruning on (policy --policy); off trains every sample.")
    policy: str = option("fine", check=_known_policy,
                         help="Pruning policy (see `fineprune policies`). (default fine)")
    window: int = option(60, check=at_least(1),
                         help="DroppingCount window w in epochs. (default 60)")
    start: int = option(30, check=at_least(0),
                        help="Starting point a_0: first pruning position in a window. (default 30)")
    attenuation: float = option(2.0, check=at_least(1),
                                help="a_k = int(a_{k-1}/attenuation) per new window. (default 2)")
    block: int = option(2, check=at_least(1), help="PruningBlock: epochs per block. (default 2)")
    count: int = option(1, check=at_least(1),
                        help="PruningCount: pruning epochs per block. (default 1)")
    prune_fraction: float = option(0.3, check=in_range(0, 1),
                                   help="Share of samples left out of a pruning epoch. (default 0.3)")
    tolerance: float = option(0.0, check=at_least(0),
                              help="Count a sample when loss > batch mean x (1 + tolerance). (default 0)")

    def check(self) -> None:
        if self.start >= self.window:
            raise ConfigError(f"--start must be in [0, window={self.window}), got {self.start}")
        if self.count > self.block:
            raise ConfigError(f"--count must be in [1, block={self.block}], got {self.count}")

    @property
    def active_policy(self) -> str:
        """The policy a run uses: 'regular' unless pruning is enabled."""
        return ALIASES.get(self.policy, self.policy) if self.enabled else "regular"

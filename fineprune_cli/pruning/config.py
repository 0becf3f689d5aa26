"""The pruning settings: the `prune` section of a config, declared once."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..settings import at_least, in_range, optional, option
from .registry import ALIASES, list_policies


def _known_policy(name: str) -> str | None:
    return None if ALIASES.get(name, name) in list_policies() else \
        f"must be one of: {', '.join(list_policies())}"


def _in_unit_interval(value: float) -> str | None:
    return None if 0 < value <= 1 else "must be in (0, 1]"


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
                                   help="Share of samples left out of a pruning epoch (fine, random: the "
                                        "schedule's; ucb, egreedy: every epoch; kakurenbo: at most, every "
                                        "epoch). (default 0.3)")
    tolerance: float = option(0.0, check=at_least(0),
                              help="Count a sample when loss > batch mean x (1 + tolerance). (default 0)")
    drop: str = option("hard", choices=("hard", "easy"),
                       help="fine: leave out the highest DroppingCount (hard, the paper) or the "
                            "lowest (easy). (default hard)")
    anneal: float | None = option(None, check=optional(lambda v: None if 0 < v <= 1 else "must be in (0, 1]"),
                                  help="No pruning in epochs after anneal x epochs (any policy). "
                                       "(default: the policy's; infobatch 0.875, others none)")
    infobatch_ratio: float = option(0.5, check=in_range(0, 0.9, closed_high=True),
                                    help="infobatch r: share of the below-mean-loss samples that sit "
                                         "out an epoch; the others get loss weight 1/(1-r). (default 0.5)")
    infobatch_rescale: bool = option(True, flag="--infobatch-rescale/--no-infobatch-rescale",
                                     help="infobatch: weight the kept below-mean samples 1/(1-r) (the paper's "
                                          "expectation rescaling); off: weight 1, an ablation. (default on)")
    kakurenbo_tau: float = option(0.7, check=in_range(0, 1, closed_high=True),
                                  help="kakurenbo: a low-loss sample stays hidden only if predicted right with "
                                       "confidence (top softmax probability) >= tau. (default 0.7, the authors' code's)")
    ucb_c: float = option(1.0, check=at_least(0),
                          help="ucb: keep the highest mean + c x std of the loss. (default 1)")
    epsilon: float = option(0.1, check=in_range(0, 1, closed_high=True),
                            help="egreedy: share of the kept samples drawn at random, not by "
                                 "mean loss. (default 0.1)")
    ema_weight: float = option(0.3, check=_in_unit_interval,
                               help="ucb, egreedy: weight of an epoch's loss in each sample's "
                                    "running mean and variance (1 = the latest only). (default 0.3)")

    def check(self) -> None:
        if self.start >= self.window:
            raise ConfigError(f"--start must be in [0, window={self.window}), got {self.start}")
        if self.count > self.block:
            raise ConfigError(f"--count must be in [1, block={self.block}], got {self.count}")

    @property
    def active_policy(self) -> str:
        """The policy a run uses: 'regular' unless pruning is enabled."""
        return ALIASES.get(self.policy, self.policy) if self.enabled else "regular"

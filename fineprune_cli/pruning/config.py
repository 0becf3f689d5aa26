"""The pruning settings: the `prune` section of a config, declared once.

Three fields are left unset (None) until the run's length is known, then `resolve(epochs)`
fills them: `enabled` (on when a pruning policy is named; `--no-prune` wins over a policy),
`policy` (fine), `window` and `start` (the paper's 30% and 15% of the epochs, schedule.py).
A run's config.yaml holds the resolved values, so runs made before these defaults existed
(window: 60, start: 30 written out) stay comparable."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import ConfigError
from ..settings import at_least, in_range, option, optional
from .registry import ALIASES, list_policies
from .schedule import paper_start, paper_window

DEFAULT_POLICY = "fine"


def _known_policy(name: str) -> str | None:
    return None if ALIASES.get(name, name) in list_policies() else f"must be one of: {', '.join(list_policies())}"


def _in_unit_interval(value: float) -> str | None:
    return None if 0 < value <= 1 else "must be in (0, 1]"


@dataclass
class PruneConfig:
    enabled: bool | None = option(
        None,
        flag="--prune/--no-prune",
        help="Turn data pruning on (policy --policy, default fine); --no-prune trains "
        "every sample whatever --policy says. (default: on when --policy names "
        "a pruning policy, else off)",
    )
    policy: str | None = option(
        None,
        check=optional(_known_policy),
        help="Pruning policy (see `fineprune policies`); any but regular turns pruning on. (default fine with --prune)",
    )
    window: int | None = option(
        None,
        check=optional(at_least(1)),
        help="DroppingCount window w in epochs. (default 30% of --epochs, rounded half up: 60 of 200)",
    )
    start: int | None = option(
        None,
        check=optional(at_least(0)),
        help="Starting point a_0: first pruning position in a window. (default 15% "
        "of --epochs, rounded half up, below the window: 30 of 200)",
    )
    attenuation: float = option(
        2.0, check=at_least(1), help="a_k = int(a_{k-1}/attenuation) per new window. (default 2)"
    )
    block: int = option(2, check=at_least(1), help="PruningBlock: epochs per block. (default 2)")
    count: int = option(1, check=at_least(1), help="PruningCount: pruning epochs per block. (default 1)")
    prune_fraction: float = option(
        0.3,
        check=in_range(0, 1),
        help="Share of samples left out of a pruning epoch (fine, random: the "
        "schedule's; ucb, egreedy: every epoch; kakurenbo: at most, every "
        "epoch; rs2, orderdp: every epoch). (default 0.3)",
    )
    tolerance: float = option(
        0.0, check=at_least(0), help="Count a sample when loss > batch mean x (1 + tolerance). (default 0)"
    )
    drop: str = option(
        "hard",
        choices=("hard", "easy"),
        help="fine: leave out the highest DroppingCount (hard, the paper) or the lowest (easy). (default hard)",
    )
    anneal: float | None = option(
        None,
        check=optional(lambda v: None if 0 < v <= 1 else "must be in (0, 1]"),
        help="No pruning in epochs after anneal x epochs (any policy; seta keeps its random draw). "
        "(default: the policy's; infobatch and seta 0.875, others none)",
    )
    infobatch_ratio: float = option(
        0.5,
        check=in_range(0, 0.9, closed_high=True),
        help="infobatch r: share of the below-mean-loss samples that sit "
        "out an epoch; the others get loss weight 1/(1-r). (default 0.5)",
    )
    infobatch_rescale: bool = option(
        True,
        flag="--infobatch-rescale/--no-infobatch-rescale",
        help="infobatch: weight the kept below-mean samples 1/(1-r) (the paper's "
        "expectation rescaling); off: weight 1, an ablation. (default on)",
    )
    kakurenbo_tau: float = option(
        0.7,
        check=in_range(0, 1, closed_high=True),
        help="kakurenbo: a low-loss sample stays hidden only if predicted right with "
        "confidence (top softmax probability) >= tau. (default 0.7, the authors' code's)",
    )
    seta_ratio: float = option(
        0.1,
        check=in_range(0, 0.9, closed_high=True),
        help="seta: share of the samples its random draw leaves out of every epoch, before the "
        "loss groups; after --anneal the draw is all that prunes. (default 0.1, the authors' CIFAR command)",
    )
    seta_groups: int = option(
        10, check=at_least(1), help="seta: k-means groups of the drawn samples by loss. (default 10, as in its code)"
    )
    seta_window: float = option(
        0.5,
        check=_in_unit_interval,
        help="seta: share of the groups that train, a window sliding one group per epoch from "
        "the easiest. (default 0.5, as in its code)",
    )
    ies_threshold: float = option(
        1e-3,
        check=at_least(0),
        help="ies: a sample sits out while the moving average of the |second difference| of its "
        "loss over epochs is below this. (default 0.001, the authors')",
    )
    ucb_c: float = option(1.0, check=at_least(0), help="ucb: keep the highest mean + c x std of the loss. (default 1)")
    epsilon: float = option(
        0.1,
        check=in_range(0, 1, closed_high=True),
        help="egreedy: share of the kept samples drawn at random, not by mean loss. (default 0.1)",
    )
    ema_weight: float = option(
        0.3,
        check=_in_unit_interval,
        help="ucb, egreedy: weight of an epoch's loss in each sample's "
        "running mean and variance (1 = the latest only). (default 0.3)",
    )
    orderdp_subset: float = option(
        0.8,
        check=_in_unit_interval,
        help="orderdp: share of the samples drawn at random each epoch, whose highest last-seen losses "
        "fill the epoch (1 - --prune-fraction of all); at least that share. (default 0.8, the authors' "
        "CIFAR command)",
    )
    sb_keep: float = option(
        0.5,
        check=_in_unit_interval,
        help="selective-backprop: share of a batch's rows that go forward and backward in a selective step, "
        "drawn by loss percentile. (default 0.5, Composer's)",
    )
    sb_start: float = option(
        0.5,
        check=in_range(0, 1, closed_high=True),
        help="selective-backprop: share of the run before its first selective epoch (epoch e starts at "
        "(e - 1) / epochs). (default 0.5, Composer's)",
    )
    sb_end: float = option(
        0.9,
        check=in_range(0, 1, closed_high=True),
        help="selective-backprop: share of the run from which every step is full again. (default 0.9, Composer's)",
    )
    sb_interrupt: int = option(
        2,
        check=at_least(0),
        help="selective-backprop: every this many batches one is a full step (0: none). (default 2, Composer's)",
    )
    reweight: str = option(
        "none",
        choices=("none", "cumulative"),
        help="Loss weights of any pruning policy, times its own: none, or cumulative (RePB's temporal "
        "rescaling: in epoch t a sample kept in c of epochs 1..t weighs t / c, scaled per epoch so that "
        "the epoch's weights sum to N). (default none)",
    )

    def check(self) -> None:
        if self.window is not None and self.start is not None and self.start >= self.window:
            raise ConfigError(f"--start must be in [0, window={self.window}), got {self.start}")
        if self.count > self.block:
            raise ConfigError(f"--count must be in [1, block={self.block}], got {self.count}")
        if self.enabled and self.policy is not None and ALIASES.get(self.policy, self.policy) == "regular":
            raise ConfigError(
                f"--prune asks for pruning but --policy {self.policy} trains every sample; drop one of them"
            )

    @property
    def pruning(self) -> bool:
        """On when asked (--prune) or implied by a pruning policy; an explicit off wins."""
        if self.enabled is not None:
            return self.enabled
        return self.policy is not None and ALIASES.get(self.policy, self.policy) != "regular"

    @property
    def active_policy(self) -> str:
        """The policy a run uses: 'regular' unless pruning is on."""
        policy = self.policy or DEFAULT_POLICY
        return ALIASES.get(policy, policy) if self.pruning else "regular"

    def resolve(self, epochs: int | None) -> "PruneConfig":
        """Fill the unset fields (in place; returns self): `enabled`, `policy`, and, when the
        run's length is known, `window` and `start` as the paper's shares of `epochs`.
        Explicit values stay as they are, so resolving twice changes nothing."""
        self.enabled = self.pruning
        self.policy = self.policy or DEFAULT_POLICY
        if epochs is not None and isinstance(epochs, int) and epochs >= 1:
            if self.window is None:
                self.window = paper_window(epochs)
            if self.start is None:
                self.start = paper_start(epochs, self.window)
        return self

    def resolved(self, epochs: int | None) -> "PruneConfig":
        """A resolved copy (the caller's object untouched)."""
        return dataclasses.replace(self).resolve(epochs)

"""The pruning-policy protocol and its registry (like the model zoo's).

A policy decides, epoch by epoch, which samples train and with what loss weight:

    policy = create("fine", num_samples, PruneConfig(...), seed=1, epochs=epochs)
    for epoch in range(1, epochs + 1):
        plan = policy.plan(epoch)                    # EpochPlan: indices (+ weights)
        for step, idx in enumerate(batches(plan.indices)):
            k = policy.batch_keep(epoch, step, len(idx))  # None but under selective-backprop
            if k is not None:                        # its rows, from a forward without gradients
                idx = idx[policy.select_batch(per_sample_loss(idx), k)]
            losses = per_sample_loss(idx)            # reduction="none"
            loss = plan.loss(idx, losses)            # weighted mean, or plain mean
            ...backward, step...
            policy.observe(idx, losses.detach())
        # (kakurenbo) a forward-only pass over policy.refresh(epoch), observed likewise
        policy.sync()                                # epoch edge: fold observations in

Data-parallel, each rank observes its own samples (with the global batch mean) and `sync`
sums what the ranks observed with the `reduce` it is given, so the scores, and so every
rank's plan, stay identical. A parameter server does the same in two halves: workers
`take_pending()`, the server `fold()`s the sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, TypeAlias

from ..errors import ConfigError
from ..lazytorch import torch
from ..settings import check_section
from .config import PruneConfig
from .registry import get
from .reweight import reweighting
from .schedule import PruneSchedule, annealed, last_pruning_epoch

# sum over ranks (a new tensor); a string, so that defining it needs no torch (lazytorch)
Reduce: TypeAlias = "Callable[[torch.Tensor], torch.Tensor]"


def global_mean(total: torch.Tensor, count: int, reduce: Reduce) -> torch.Tensor:
    """The mean loss of a data-parallel batch, which each rank's losses are compared with: this
    rank's loss sum `total` over its `count` samples, both summed over the ranks in one reduce."""
    # torch.full is a fill kernel; torch.tensor would copy from the host and sync
    samples = torch.full((), float(count), device=total.device, dtype=total.dtype)
    both = reduce(torch.stack([total, samples]))
    return both[0] / both[1]


@dataclass(frozen=True)
class EpochPlan:
    indices: torch.Tensor  # the samples this epoch trains (any order)
    weights: torch.Tensor | None = None  # per-sample loss weight for all N samples; None = 1
    pruned: bool = False  # the epoch leaves samples out

    @property
    def samples(self) -> int:
        return self.indices.numel()

    def loss(self, idx: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
        """The loss to backpropagate: mean of the batch's weighted per-sample losses."""
        if self.weights is not None:  # idx and losses may live on another device than the plan
            losses = losses * self.weights[idx.to(self.weights.device)].to(losses.device, losses.dtype)
        return losses.sum() / losses.numel()


class Policy:
    """Base class: trains every sample with weight 1 and observes nothing.

    Subclasses set `name`, `label` (for tables and plots), `color` and `help`, and
    override what they need. `scores` is the per-sample vector a run snapshots at the end
    of each window (DroppingCount for `fine`). Under `--reweight` an instance's `plan` is
    `reweighted_plan`, which weights the subclass's own plan (reweight.py)."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    color: ClassVar[str] = "#444444"
    help: ClassVar[str] = ""  # a line for `fineprune policies` and the help that lists the policies
    observes: ClassVar[bool] = False  # False: the trainer skips observe() altogether
    # PruneConfig fields only this policy reads: under another policy they are reset to their
    # defaults, so a setting that cannot act neither splits report rows nor blocks compare reuse
    own_settings: ClassVar[tuple[str, ...]] = ()
    order: ClassVar[int] = 100  # position in tables, plots and `fineprune policies`
    score_name: ClassVar[str] = "scores"  # snapshot files: <score_name>_window<k>.pt
    budget_before_run: ClassVar[bool] = True  # False: which epochs prune, and how much, depend on losses
    # where budget_before_run is False, how its pruning is chosen: the dry run's and estimate's words
    unplanned: ClassVar[str] = "chosen from the losses during the run"
    default_anneal: ClassVar[float | None] = None  # δ when --anneal is not given (None: never)
    # δ·n as its authors' code computes it, a float product (schedule.last_pruning_epoch)
    anneal_in_float: ClassVar[bool] = False
    observes_predictions: ClassVar[bool] = False  # True: observe() also gets correct and confidence
    scales_lr: ClassVar[bool] = False  # --lr-scale-pruned when the run does not say (kakurenbo: on)
    selects_batches: ClassVar[bool] = False  # True: batch_keep / select_batch choose rows inside steps

    @classmethod
    def idle_reason(cls, cfg: PruneConfig, epochs: int) -> str | None:
        """Why no epoch of a run of `epochs` can leave a sample out under `cfg` (resolved), or
        None when some epoch may. A policy that chooses from the losses answers only for what
        is certain before the run."""
        return None

    @classmethod
    def random_equal_epochs(cls, window: int, pruning_epochs: Iterable[int]) -> list[int]:
        """Of a run's `pruning_epochs` under window `window`, those in which this policy leaves out,
        by construction, the samples the random control of the same seed leaves out; [] but for
        `fine`. A comparison of the two measures nothing in them."""
        return []

    @classmethod
    def anneal_of(cls, cfg: PruneConfig) -> float | None:
        return cfg.anneal if cfg.anneal is not None else cls.default_anneal

    def __init__(
        self,
        num_samples: int,
        cfg: PruneConfig,
        seed: int = 0,
        device: torch.device | str = "cpu",
        epochs: int | None = None,
    ):
        """`epochs`: the run's length n, for policies that change with the epoch's share of
        the run (annealing, the default schedule); None when the caller does not know it."""
        self.num_samples, self.cfg, self.device = num_samples, cfg, torch.device(device)
        self.epochs = epochs
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.all = torch.arange(num_samples, device=self.device)
        self.anneal = self.anneal_of(cfg)
        self.last_pruning_epoch = last_pruning_epoch(self.anneal, epochs, self.anneal_in_float)
        self.setup()
        self.reweighting = reweighting(cfg.reweight, num_samples, self.device)
        if self.reweighting is not None:  # every caller's plan(), whichever class's rule it is
            self.plan = self.reweighted_plan  # type: ignore[method-assign]

    def setup(self) -> None:
        """A subclass's own state, made from the attributes above (`num_samples`, `cfg`,
        `device`, `epochs` ...) at the end of the constructor, which subclasses do not restate;
        an override calls `super().setup()` first."""

    # --- the protocol ---
    def plan(self, epoch: int) -> EpochPlan:
        return EpochPlan(self.all)

    def observe(
        self,
        indices: torch.Tensor,
        losses: torch.Tensor,
        mean: torch.Tensor | None = None,
        correct: torch.Tensor | None = None,
        confidence: torch.Tensor | None = None,
    ) -> None:
        """Per-sample losses of one step (after its forward pass); `mean`: the global batch
        mean when this is one rank's part of a data-parallel batch. Only to a policy with
        `observes_predictions`: `correct` (bool, argmax == label) and `confidence` (the top
        softmax probability) of each sample."""

    def refresh(self, epoch: int) -> torch.Tensor | None:
        """Samples that need a forward-only pass after `epoch`'s training (observed like a
        training step, before `sync`); None: none. Called after `plan(epoch)`."""
        return None

    def planned_samples(self, epoch: int) -> int | None:
        """How many samples `epoch` trains, when that is known before the run (no losses
        needed); None when it depends on what the run observes."""
        return self.num_samples

    def batch_keep(self, epoch: int, batch: int, size: int) -> int | None:
        """How many of the `size` rows of `epoch`'s step `batch` (0-based) train, chosen by
        `select_batch` from a forward without gradients; None: the whole batch, no such forward.
        Host arithmetic: a step never waits for the device to know its shape."""
        return None

    def select_batch(self, losses: torch.Tensor, keep: int) -> torch.Tensor:
        """Positions in `losses` (one batch's per-sample losses) of the `keep` rows that train."""
        raise NotImplementedError(f"{self.name} trains whole batches: its batch_keep is None")

    def take_pending(self) -> list[torch.Tensor]:
        """What this process observed since the last sync, and forget it."""
        return []

    def fold(self, pending: list[torch.Tensor]) -> None:
        """Fold observations (summed over every process) into the scores."""

    def sync(self, reduce: Reduce | None = None) -> None:
        pending = self.take_pending()
        self.fold([reduce(t) for t in pending] if reduce is not None else pending)

    @property
    def scores(self) -> torch.Tensor | None:
        return None

    def snapshot_due(self, epoch: int, epochs: int) -> int | None:
        """The window whose final scores exist after `epoch`, if a snapshot is due."""
        return None

    def state_dict(self) -> dict:
        state = {"generator": self.generator.get_state()}
        return state if self.reweighting is None else {**state, "reweight": self.reweighting.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        if self.reweighting is not None:
            self.reweighting.load_state_dict(state["reweight"])

    def reweighted_plan(self, epoch: int) -> EpochPlan:
        """`plan` under `--reweight`: the class's own plan, its weights times the reweighting's."""
        assert self.reweighting is not None, "plan() is this method only under --reweight"
        plan = type(self).plan(self, epoch)
        weights = self.reweighting.weigh(plan.indices, plan.pruned, plan.weights)
        return plan if weights is plan.weights else EpochPlan(plan.indices, weights, plan.pruned)

    # --- helpers for subclasses ---
    def annealed(self, epoch: int) -> bool:
        """Past δ·n (`--anneal`): the epoch trains every sample (seta: its random draw)."""
        return annealed(epoch, self.last_pruning_epoch)

    def keep_all_but(self, dropped: torch.Tensor) -> torch.Tensor:
        keep = torch.ones(self.num_samples, dtype=torch.bool, device=self.device)
        keep[dropped] = False
        return self.all[keep]


def pruned_count(cfg: PruneConfig, num_samples: int) -> int:
    """m = round(prune_fraction x N), refused when it would leave an epoch without samples."""
    m = round(cfg.prune_fraction * num_samples)
    if m >= num_samples:
        raise ConfigError(
            f"--prune-fraction {cfg.prune_fraction:g} leaves none of the {num_samples} "
            f"training samples; use at most {(num_samples - 1) / num_samples:.4g}"
        )
    return m


def create(
    name: str,
    num_samples: int,
    cfg: PruneConfig | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
    epochs: int | None = None,
) -> Policy:
    """The policy `name`; every argument checked here, in one line (TypeError for a wrong
    type, ValueError for a wrong value), before any of it reaches torch."""
    if not isinstance(name, str):
        raise TypeError(f"the policy name must be a string, got {_shown(name)}")
    kind = get(name)
    require_int(num_samples, "num_samples", 1)
    require_int(seed, "seed", 0, 2**63 - 1)
    require_int(epochs, "epochs", 1, optional=True)
    if cfg is not None and not isinstance(cfg, PruneConfig):
        raise TypeError(f"cfg must be a PruneConfig, got {_shown(cfg)}")
    cfg = cfg if cfg is not None else PruneConfig()
    check_section(cfg, "prune.")
    cfg = cfg.resolved(epochs)  # a copy: the caller's unset window and start stay unset
    if epochs is not None:
        refuse_idle(kind, cfg, epochs)
    return kind(num_samples, cfg, seed, as_device(device), epochs)


def refuse_idle(kind: type[Policy], cfg: PruneConfig, epochs: int) -> None:
    """A pruning run whose settings prune no epoch stops here, saying why and what to set."""
    reason = kind.idle_reason(cfg, epochs)
    if reason:
        raise ConfigError(f"--policy {kind.name} prunes no epoch of {epochs}: {reason}")


def random_equal_note(policy: str, cfg: PruneConfig, epochs: int) -> str | None:
    """A line naming a run of `policy` for `epochs` whose every pruning epoch is random-equal
    (`random_equal_epochs`): there the policy is its random control. None when some pruning
    epoch is not, or when the losses choose which epochs prune. `cfg` checked, maybe unresolved."""
    kind = get(policy)
    if not kind.budget_before_run:
        return None
    cfg = cfg.resolved(epochs)
    schedule = PruneSchedule.from_config(cfg)
    pruning = schedule.pruning_epochs(epochs, last_pruning_epoch(kind.anneal_of(cfg), epochs))
    if not pruning or kind.random_equal_epochs(schedule.window, pruning) != pruning:
        return None
    shown = ", ".join(map(str, pruning)) if len(pruning) <= 6 else f"{pruning[0]}, {pruning[1]}, …, {pruning[-1]}"
    which = (
        f"its only pruning epoch ({shown})"
        if len(pruning) == 1
        else f"each of its {len(pruning)} pruning epochs ({shown})"
    )
    return (
        f"{kind.label or kind.name} is its random control here: {which} selects from an empty "
        "DroppingCount (the epoch opens a window, or the run), so it leaves out the samples the random "
        "control of its seed leaves out; for counts to choose, a pruning epoch must come after its window's "
        "first epoch: change --window or --start, or lengthen --epochs"
    )


def require_int(value: object, name: str, low: int, high: int | None = None, optional: bool = False) -> None:
    """An argument that must be an integer in [low, high] (None allowed when optional)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {_shown(value)}")
    if value < low or (high is not None and value > high):
        raise ConfigError(
            f"{name} must be {f'between {low} and {high}' if high is not None else f'at least {low}'}, got {value}"
        )


def as_device(device: object) -> torch.device:
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string or torch.device, got {_shown(device)}")
    try:
        return torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device must name a torch device (cpu, cuda, cuda:1 ...), got {device!r}") from None


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def every_epoch_idle(cfg: PruneConfig) -> str | None:
    """Why a policy that leaves --prune-fraction out of every epoch leaves nothing out (rs2,
    orderdp), or None."""
    if cfg.prune_fraction == 0:
        return "--prune-fraction 0 trains every sample in every epoch; give the share to leave out"
    return None

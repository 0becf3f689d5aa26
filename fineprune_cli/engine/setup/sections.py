"""The sections of a run's config tree (model, data, train, run), each field declared once
(`settings.option`: default, help, flag, check). Their defaults are the paper's CIFAR-10 recipe
(Section 5); `config` puts them together with the prune and script sections and reads files
and flags into them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...errors import ConfigError
from ...pruning.schedule import percent_of
from ...settings import at_least, between, in_range, option, optional, positive

MAX_EPOCHS = 100_000  # schedules are walked epoch by epoch; a typo must not hang the tool
MAX_WIDEN = 64  # WRN-28-10 uses 10; 10,000 would ask for a 921 GB first layer
MAX_BATCH = 2**24  # beyond any dataset here; 10**20 overflowed inside torch.split
LOADERS = ("auto", "device", "stream")
DEFAULT_WORKERS = min(4, len(os.sched_getaffinity(0)))  # the cores this process may use
COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DATASETS = ("fashion-mnist", "cifar10", "cifar100", "folder", "synthetic")
MILESTONE_PERCENTS = (30, 60, 80)  # the paper's 60, 120, 160 of 200 epochs


def paper_milestones(epochs: int) -> list[int]:
    """30, 60 and 80% of the run rounded half up; under 4 epochs some coincide or round to 0,
    and those are dropped (3 epochs: 1, 2)."""
    return sorted({m for m in (percent_of(epochs, p) for p in MILESTONE_PERCENTS) if m >= 1})


def _model_name(name: str) -> str | None:
    from ... import models  # the zoo needs torch; checked when the config is, not at import

    if models.is_factory(name):  # your own model: importing it runs that module, as Python would
        try:
            models.factory(name)
        except ValueError as exc:
            return str(exc)
        return None
    zoo = ", ".join(models.list_models())
    return None if name in models.list_models() else f"must be one of: {zoo}, or package.module:factory"


def _device(name: str) -> str | None:
    ok = name in ("auto", "cpu", "cuda") or (name.startswith("cuda:") and name[5:].isascii() and name[5:].isdigit())
    return None if ok else "must be auto, cpu, cuda or cuda:N"


def _increasing(values: list[int]) -> str | None:
    ok = all(1 <= m <= MAX_EPOCHS for m in values) and all(a < b for a, b in zip(values, values[1:]))
    return None if ok else f"must be strictly increasing epochs between 1 and {MAX_EPOCHS:,}"


@dataclass
class ModelConfig:
    name: str = option(
        "",
        flag="--model -m",
        check=_model_name,
        help="Model name (see `fineprune models`), or your own: package.module:factory, a callable "
        "returning an nn.Module (given in_channels and num_classes where it takes them).",
    )
    widen: int | None = option(None, check=optional(between(1, MAX_WIDEN)), help="WRN widen factor k. (default 8)")

    def check(self) -> None:
        if self.widen is not None and not self.name.startswith("wrn"):
            raise ConfigError("--widen applies to wrn models only")


@dataclass
class DataConfig:
    dataset: str = option(
        "", flag="--dataset -d", choices=DATASETS, help="fashion-mnist, cifar10, cifar100, folder or synthetic."
    )
    data_dir: str | None = option(
        None, help="Dataset folder (cifar10/100, folder, fashion-mnist elsewhere than Debian's)."
    )
    download: bool = option(
        False, flag="--download", help="Fetch cifar10/100 or fashion-mnist into --data-dir (needs internet)."
    )
    subset: int | None = option(
        None, check=optional(positive), help="Train on a fixed, seeded, class-balanced subset of N samples."
    )
    test_subset: int | None = option(
        None,
        check=optional(positive),
        help="Evaluate on a fixed class-balanced subset of N test samples (quick checks).",
    )
    augment: str = option(
        "auto",
        flag="",
        choices=("auto", "none", "crop-flip"),
        help="auto augments RGB data of any size (random crop with size/8 padding, 4 px at 32x32, + flip), grey none.",
    )
    label: str = option("", flag="", help="Name shown in reports, e.g. 'CIFAR-10 (JPEG q75)'.")
    image_size: int | None = option(
        None,
        check=optional(between(4, 4096)),
        help="--dataset folder: resize every image to N x N (then crop + flip); default: the images' own size, the same for all.",
    )
    loader: str = option(
        "auto",
        choices=LOADERS,
        help="--dataset folder: device (decoded once, held on the device), stream (DataLoader workers decode each epoch's kept samples) or auto (device when it fits). (default auto)",
    )
    workers: int = option(
        DEFAULT_WORKERS,
        check=between(0, 64),
        help="DataLoader workers decoding images when streaming. (default: min(4, the cores this process may use))",
    )

    def check(self) -> None:
        if self.dataset != "folder" and (self.image_size is not None or self.loader == "stream"):
            raise ConfigError("--image-size and --loader stream apply to --dataset folder only")


@dataclass
class TrainConfig:
    epochs: int = option(
        200,
        check=lambda v: None if 1 <= v <= MAX_EPOCHS else f"must be between 1 and {MAX_EPOCHS:,}",
        help="Training epochs n. (default 200)",
    )
    batch_size: int = option(
        128,
        check=between(1, MAX_BATCH),
        help="Batch size: of a step of all processes together (sync), of one worker's push (async), of one group's push (mixed). (default 128)",
    )
    batch_per_worker: int | None = option(
        None,
        check=optional(between(1, MAX_BATCH)),
        help="Weak scaling, as Campos et al.: each worker's batch, so --batch-size becomes this x processes (sync) or x group size (mixed); replaces --batch-size.",
    )
    lr: float = option(0.1, check=positive, help="Initial learning rate. (default 0.1)")
    momentum: float = option(0.9, flag="", check=in_range(0, 1), help="SGD momentum.")
    weight_decay: float = option(5e-4, flag="", check=at_least(0), help="SGD weight decay.")
    milestones: list[int] | None = option(
        None,
        check=optional(_increasing),
        help="Epochs after which lr is multiplied by gamma (0.2), e.g. 60,120,160; "
        "'' for none. (default 30,60,80% of --epochs, rounded half up: "
        "60,120,160 of 200)",
    )
    gamma: float = option(
        0.2, flag="", check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]", help="lr factor at each milestone."
    )
    lr_schedule: str = option(
        "epochs",
        choices=("epochs", "progress"),
        help="Where the milestones fall: epochs (after epoch m) or progress (once the "
        "run has trained m/epochs of the samples it will train, estimated from its "
        "policy's plans; docs: policies, learning rate of pruned runs). (default epochs)",
    )
    lr_scale_pruned: bool | None = option(
        None,
        flag="--lr-scale-pruned/--no-lr-scale-pruned",
        help="Multiply a pruned epoch's lr by N / (samples it trains), as "
        "KAKURENBO does. (default: the policy's; on for kakurenbo only)",
    )
    warmup_epochs: float = option(
        1.0, flag="", check=at_least(0), help="Linear lr ramp over the first epochs (why: docs, train, the recipe)."
    )
    eval_batch_size: int = option(1000, flag="", check=between(1, MAX_BATCH), help="Batch size for evaluation.")


@dataclass
class RunConfig:
    seed: int = option(0, check=in_range(0, 2**63), help="Random seed. (default 0)")
    device: str = option("auto", check=_device, help="auto, cpu, cuda or cuda:N. (default auto)")
    compile: bool = option(False, flag="--compile/--no-compile", help="torch.compile the model.")
    compile_mode: str = option(
        "auto", flag="", choices=COMPILE_MODES, help="auto: CUDA graphs on GPU, inductor's default on CPU."
    )
    out: str | None = option(
        None,
        check=optional(lambda v: None if v.strip() else "must not be empty"),
        help="Run folder. (default results/runs/<time>-<model>-<dataset>)",
    )
    checkpoint_every: int = option(
        1, check=at_least(0), help="Epochs between checkpoints; 0: only at the end. (default 1)"
    )
    tensorboard: bool = option(
        False,
        flag="--tensorboard/--no-tensorboard",
        help="Also write each epoch's row (the metrics.csv columns) as TensorBoard scalars "
        "into the run folder; needs the extra: pip install 'fineprune[tensorboard]'.",
    )
    dist_mode: str = option(
        "sync",
        choices=("sync", "async", "mixed"),
        help="With several processes: sync (DDP), async or mixed (parameter servers on the first --num-ps ranks). (default sync)",
    )
    group_size: int = option(
        0,
        check=between(0, 4096),
        help="Mixed mode: workers that average gradients before one push; 0: the workers of one node (LOCAL_WORLD_SIZE), as the paper's GPUs of a node. (default 0)",
    )
    num_ps: int = option(
        1,
        check=between(1, 64),
        help="Async/mixed: parameter servers (ranks 0..K-1); the parameters are sharded over them. (default 1)",
    )
    ps_device: str = option(
        "cpu",
        choices=("cpu", "gpu"),
        help="Async/mixed on GPUs: where the parameter servers keep and step their shards: cpu (so N GPUs run N workers) or gpu (each server takes a GPU as a worker does). (default cpu)",
    )
    dist_timeout: int = option(
        1800,
        check=between(1, 7 * 86400),
        help="With several processes: seconds a process waits for the others (a collective, an RPC, an epoch's end) before the run fails. (default 1800)",
    )
    arm: str = option("", flag="", help="This run's name in a comparison (compare sets it; default: its policy).")
    plan: str = option(
        "", flag="", help="The digest of the judging plan in force when the run was made (compare sets it; '': none)."
    )

    def check(self) -> None:
        if self.tensorboard:  # before any data is loaded, not after the first epoch
            from ..training import scalars  # torch: not imported for --help

            scalars.require()

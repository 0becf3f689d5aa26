"""One config tree for every command: defaults < YAML file < CLI flags.

Each field is declared once (`settings.option`: default, help, flag, check). The defaults are
the paper's CIFAR-10 recipe (Section 5) and the schedule chosen in docs/policies/fine.md; the ones that
depend on the run's length (milestones, the pruning window and start) are the paper's shares of
--epochs, filled in by `resolve` once every layer is read, so a run's config.yaml holds numbers.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..pruning.config import PruneConfig
from ..pruning.registry import get as get_policy
from ..pruning.schedule import percent_of
from . import yamlvalues
from .files import read_regular_text
from .scriptconfig import ScriptConfig
from ..settings import apply_values, at_least, between, check_section, in_range, optional, option, positive

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
    from .. import models  # the zoo needs torch; checked when the config is, not at import

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

    def check(self) -> None:
        if self.tensorboard:  # before any data is loaded, not after the first epoch
            from . import scalars  # torch: not imported for --help

            scalars.require()


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    prune: PruneConfig = field(default_factory=PruneConfig)
    run: RunConfig = field(default_factory=RunConfig)
    script: ScriptConfig = field(default_factory=ScriptConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def policy(self) -> str:
        return self.prune.active_policy


SECTIONS = tuple(f.name for f in dataclasses.fields(Config))
SCRIPT_SECTIONS = ("train", "prune", "run", "script")  # what a script run takes from the tree


def apply_mapping(cfg: Any, data: Any, source: str) -> None:
    """Fill `cfg` from {section: {field: value}}; unknown sections and keys are errors."""
    sections = [f.name for f in dataclasses.fields(cfg)]
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of sections ({', '.join(sections)})")
    for name, values in data.items():
        if name not in sections:
            raise ConfigError(f"{source}: unknown section '{str(name)[:40]}' (valid: {', '.join(sections)})")
        apply_values(getattr(cfg, name), values, source, name)


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = read_regular_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yamlvalues.load(text)
    except yamlvalues.Repeated as exc:  # valid YAML, refused for what it would expand to
        raise ConfigError(f"{path}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = yamlvalues.problem_of(exc)
        what = f": {problem}" if problem else ""
        raise ConfigError(f"{path} is not valid YAML{f' at line {mark.line + 1}' if mark else ''}{what}") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections ({', '.join(SECTIONS)})")
    return data or {}


def split_experiment(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An experiment file = a run config + an optional `compare` section (the matrix) + an
    optional `judging` section (the judging plan, read by `analysis.judging`)."""
    data = dict(data)
    data.pop("judging", None)
    return data, data.pop("compare", None) or {}


def build_config(config_file: str | Path | None, overrides: dict[str, Any], base: Config | None = None) -> Config:
    """Defaults (or `base`), then the YAML file (its `compare` section ignored), then flags
    ('section.key' -> value; None = not given)."""
    cfg = base if base is not None else Config()
    origins = dict(getattr(cfg, "origins", {}))
    if config_file is not None:
        data, _ = split_experiment(load_yaml(config_file))
        apply_mapping(cfg, data, str(config_file))
        check_outputs_stay_inside(data, str(config_file))
        origins.update(
            {
                f"{sec}.{key}": str(config_file)
                for sec, values in data.items()
                if isinstance(values, dict)
                for key in values
            }
        )
    flags = nest(overrides)
    apply_mapping(cfg, flags, "command line")
    origins.update({f"{sec}.{key}": "command line" for sec, values in flags.items() for key in values})
    cfg.origins = origins  # not a setting: where each came from, for error lines (`given_as`)
    return resolve(cfg)


def given_as(cfg: Config, dotted: str, flag: str) -> str:
    """How an error names a setting: 'FILE: section.key' when the YAML file set it and no flag
    overrode it (the user typed no flag), else the flag."""
    origin = getattr(cfg, "origins", {}).get(dotted, "command line")
    return flag if origin == "command line" else f"{origin}: {dotted}"


def resolve(cfg: Config) -> Config:
    """Fill the defaults that are shares of the run's length (and whether it prunes) into
    `cfg`, in place; explicit values stay, so resolving twice changes nothing."""
    epochs = cfg.train.epochs
    length_known = isinstance(epochs, int) and 1 <= epochs <= MAX_EPOCHS
    if cfg.train.milestones is None and length_known:
        cfg.train.milestones = paper_milestones(epochs)
    cfg.prune.resolve(epochs if length_known else None)
    _drop_idle_settings(cfg)
    return cfg


def _drop_idle_settings(cfg: Config) -> None:
    """Settings that cannot act in this run back to their defaults: another policy's own
    settings, and the pruned-epoch lr scaling of a run that prunes nothing. Recorded as given
    they split report rows and blocked compare's reuse of runs they never changed."""
    from ..pruning.registry import list_policies

    active, defaults = cfg.policy, PruneConfig()
    checks = {f.name: f.metadata.get("check") for f in dataclasses.fields(PruneConfig)}
    for name in list_policies():
        if name != active:
            for key in get_policy(name).own_settings:
                value, check = getattr(cfg.prune, key), checks.get(key)
                problem = check(value) if check is not None and isinstance(value, (int, float)) else None
                if problem:  # not acted on, but a typo all the same
                    raise ConfigError(f"--{key.replace('_', '-')} {problem}, got {value}")
                setattr(cfg.prune, key, getattr(defaults, key))
    if active == "regular":
        cfg.train.lr_scale_pruned = None


def nest(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    nested: dict[str, dict[str, Any]] = {}
    for dotted, value in overrides.items():
        if value is not None:
            section, key = dotted.split(".")
            nested.setdefault(section, {})[key] = value
    return nested


def check_outputs_stay_inside(data: dict[str, Any], source: str) -> None:
    """A shared config file may not send output outside the working folder (flags may)."""
    out = (data.get("run") or {}).get("out") if isinstance(data.get("run"), dict) else None
    if out is None:
        return
    path, here = Path(str(out)), Path.cwd().resolve()
    # resolved too: a symlink inside the working folder may point anywhere
    inside = not path.is_absolute() and ".." not in path.parts and (here / path).resolve().is_relative_to(here)
    if not inside:
        raise ConfigError(
            f"{source}: run.out must be a relative path inside the working folder without "
            f"'..' or links out of it (got '{out}'); pass --out on the command line to write elsewhere"
        )


def config_from_dict(data: dict[str, Any], source: str = "config") -> Config:
    """A run folder's config.yaml; older ones also hold the compare matrix, which is dropped."""
    cfg = Config()
    run_part, _ = split_experiment(data) if isinstance(data, dict) else (data, {})
    apply_mapping(cfg, run_part, source)
    return resolve(cfg)


def validate(cfg: Config) -> Config:
    """Every field's check and each section's cross-field checks, one clear line each. A script
    run's model and dataset are names its runs are filed under, not the zoo's: not checked."""
    script = bool(cfg.script.command)
    if not cfg.model.name and not script:
        raise ConfigError("no model given: pass --model or set model.name in --config")
    if not cfg.data.dataset and not script:
        raise ConfigError("no dataset given: pass --dataset or set data.dataset in --config")
    resolve(cfg)  # a Config made in code; a bad --epochs leaves the shares unset, refused below
    for name in SCRIPT_SECTIONS if script else SECTIONS:
        check_section(getattr(cfg, name), f"{name}.")
    if cfg.policy != "regular":
        from ..pruning.policy import refuse_idle

        refuse_idle(get_policy(cfg.policy), cfg.prune, cfg.train.epochs)
    return cfg


def parse_int_list(text: str | None, option_name: str) -> list[int] | None:
    """'60,120,160' -> [60, 120, 160]; '' -> [] (no milestones)."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",")] if text.strip() else []
    except ValueError:
        raise ConfigError(f"{option_name} must be comma-separated integers, got '{text}'") from None

"""One config tree for every command: defaults < YAML file < CLI flags.

The defaults are the paper's CIFAR-10 recipe (Section 5) and the fine-pruning
schedule chosen in README.md ("Choices where the paper is ambiguous").
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .errors import ConfigError

if TYPE_CHECKING:
    from .schedule import PruneSchedule


@dataclass
class ModelConfig:
    name: str = ""                      # a name from `models.list_models()`
    widen: int | None = None            # WRN widen factor k (default 8)


@dataclass
class DataConfig:
    dataset: str = ""                   # one of data.DATASETS
    data_dir: str | None = None
    download: bool = False
    subset: int | None = None           # class-balanced training subset size
    test_subset: int | None = None      # class-balanced test subset size (quick checks)
    augment: str = "auto"               # auto | none | crop-flip
    label: str = ""                     # name shown in reports, e.g. "CIFAR-10 (JPEG q75)"


@dataclass
class TrainConfig:
    epochs: int = 200
    batch_size: int = 128
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    milestones: list[int] = field(default_factory=lambda: [60, 120, 160])
    gamma: float = 0.2                  # lr factor at each milestone
    warmup_epochs: float = 1.0          # linear lr ramp over the first steps (README: why)
    eval_batch_size: int = 1000


@dataclass
class PruneConfig:
    enabled: bool = False
    policy: str = "fine"                # fine (DroppingCount) | random (equal-budget control)
    window: int = 60                    # epochs per DroppingCount window (w)
    start: int = 30                     # starting point a_0 within a window
    attenuation: float = 2.0            # a_k = int(a_{k-1} / attenuation) per new window
    block: int = 2                      # PruningBlock (r in Formula 3)
    count: int = 1                      # PruningCount (c): pruning epochs per block
    prune_fraction: float = 0.3         # share of training samples left out of a pruning epoch
    tolerance: float = 0.0

    def schedule(self) -> "PruneSchedule":
        """The schedule these fields describe; raises ConfigError when they are invalid."""
        from .schedule import PruneSchedule

        return PruneSchedule(self.window, self.start, self.attenuation, self.block, self.count)


@dataclass
class RunConfig:
    seed: int = 0
    device: str = "auto"                # auto | cpu | cuda | cuda:N
    compile: bool = False
    compile_mode: str = "auto"          # auto (CUDA graphs on GPU) | default | reduce-overhead | max-autotune...
    out: str | None = None              # run folder; default results/runs/<time>-<model>-<dataset>
    checkpoint_every: int = 1           # epochs between checkpoints (0: only at the end)
    dist_mode: str = "sync"             # with several processes: sync (DDP) | async | mixed (parameter server)
    group_size: int = 2                 # mixed: workers that average gradients before one push


@dataclass
class CompareConfig:
    """The matrix `fineprune compare` runs; `train` ignores this section."""
    models: list[str] = field(default_factory=list)     # default: model.name
    datasets: list[str] = field(default_factory=list)   # default: data.dataset
    policies: list[str] = field(default_factory=lambda: ["regular", "fine", "random"])
    seeds: list[int] = field(default_factory=lambda: [0])
    out: str = "results/runs/compare"   # <out>/<model>-<dataset>/<policy>-seed<s>/


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    prune: PruneConfig = field(default_factory=PruneConfig)
    run: RunConfig = field(default_factory=RunConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check a YAML value against a field's type; YAML already gives native types."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], where) for v in value]
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif annotation is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    name = getattr(annotation, "__name__", str(annotation))
    raise ConfigError(f"{where}: expected {name}, got {value!r}")


def _section_types(section: Any) -> dict[str, Any]:
    return typing.get_type_hints(type(section))


def apply_mapping(cfg: Config, data: dict[str, Any], source: str) -> None:
    """Fill `cfg` from a nested mapping {section: {field: value}}; unknown keys are errors."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of sections ({', '.join(_sections())})")
    for section_name, values in data.items():
        if section_name not in _sections():
            raise ConfigError(
                f"{source}: unknown section '{section_name}' (valid: {', '.join(_sections())})"
            )
        section = getattr(cfg, section_name)
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section '{section_name}' must be a mapping")
        types = _section_types(section)
        for key, value in values.items():
            if key not in types:
                valid = ", ".join(types)
                raise ConfigError(f"{source}: unknown key '{section_name}.{key}' (valid: {valid})")
            setattr(section, key, _coerce(value, types[key], f"{source}: {section_name}.{key}"))


def _sections() -> list[str]:
    return [f.name for f in dataclasses.fields(Config)]


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path} is not valid YAML{at}") from None
    return {} if data is None else data


def build_config(config_file: str | Path | None, overrides: dict[str, Any],
                 base: Config | None = None) -> Config:
    """Defaults (or `base`), then the YAML file, then CLI overrides ('section.key' -> value,
    None = not given)."""
    cfg = base if base is not None else Config()
    if config_file is not None:
        data = load_yaml(config_file)
        apply_mapping(cfg, data, str(config_file))
        _check_outputs_stay_inside(data, str(config_file))
    nested: dict[str, dict[str, Any]] = {}
    for dotted, value in overrides.items():
        if value is not None:
            section, key = dotted.split(".")
            nested.setdefault(section, {})[key] = value
    apply_mapping(cfg, nested, "command line")
    return cfg


def _check_outputs_stay_inside(data: dict[str, Any], source: str) -> None:
    """A shared config file may not send output outside the working folder (flags may)."""
    for section in ("run", "compare"):
        out = (data.get(section) or {}).get("out")
        if out is None:
            continue
        path = Path(str(out))
        if path.is_absolute() or ".." in path.parts:
            raise ConfigError(f"{source}: {section}.out must be a relative path without '..' "
                              f"(got '{out}'); pass --out on the command line to write elsewhere")


def config_from_dict(data: dict[str, Any]) -> Config:
    cfg = Config()
    apply_mapping(cfg, data, "config")
    return cfg


def validate(cfg: Config) -> Config:
    """Every check a user can fail, with one clear line each."""
    import models

    from .data import DATASETS
    if not cfg.model.name:
        raise ConfigError("no model given: pass --model or set model.name in --config")
    if cfg.model.name not in models.list_models():
        raise ConfigError(
            f"unknown model '{cfg.model.name}'; choose one of: {', '.join(models.list_models())}"
        )
    if cfg.model.widen is not None and (cfg.model.widen < 1 or not cfg.model.name.startswith("wrn")):
        raise ConfigError("--widen takes a positive integer and applies to wrn models only")
    if not cfg.data.dataset:
        raise ConfigError("no dataset given: pass --dataset or set data.dataset in --config")
    if cfg.data.dataset not in DATASETS:
        raise ConfigError(f"unknown dataset '{cfg.data.dataset}'; choose one of: {', '.join(DATASETS)}")
    if cfg.data.augment not in ("auto", "none", "crop-flip"):
        raise ConfigError("augment must be one of: auto, none, crop-flip")
    for name in ("subset", "test_subset"):
        if getattr(cfg.data, name) is not None and getattr(cfg.data, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be a positive number of samples")
    t = cfg.train
    check_epochs(t.epochs)
    for name in ("batch_size", "eval_batch_size"):
        if getattr(t, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(t, name)}")
    if not t.lr > 0:
        raise ConfigError(f"--lr must be positive, got {t.lr}")
    if not 0 <= t.momentum < 1:
        raise ConfigError(f"momentum must be in [0, 1), got {t.momentum}")
    if t.weight_decay < 0:
        raise ConfigError(f"weight decay must be >= 0, got {t.weight_decay}")
    if t.warmup_epochs < 0:
        raise ConfigError(f"warmup_epochs must be >= 0, got {t.warmup_epochs}")
    if not 0 < t.gamma <= 1:
        raise ConfigError(f"gamma must be in (0, 1], got {t.gamma}")
    if any(m < 1 for m in t.milestones) or any(a >= b for a, b in zip(t.milestones, t.milestones[1:])):
        raise ConfigError(f"--milestones must be positive and strictly increasing, got {t.milestones}")
    p = cfg.prune
    if p.policy not in ("fine", "random"):
        raise ConfigError(f"unknown pruning policy '{p.policy}'; choose one of: fine, random")
    p.schedule()  # raises ConfigError
    if not 0 <= p.prune_fraction < 1:
        raise ConfigError(f"--prune-fraction must be in [0, 1), got {p.prune_fraction}")
    if p.tolerance < 0:
        raise ConfigError(f"--tolerance must be >= 0, got {p.tolerance}")
    modes = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    if cfg.run.compile_mode not in modes:
        raise ConfigError(f"compile_mode must be one of: {', '.join(modes)}")
    if cfg.run.dist_mode not in ("sync", "async", "mixed"):
        raise ConfigError(f"--dist-mode must be sync, async or mixed, got '{cfg.run.dist_mode}'")
    if cfg.run.group_size < 1:
        raise ConfigError(f"--group-size must be a positive integer, got {cfg.run.group_size}")
    if cfg.run.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {cfg.run.checkpoint_every}")
    dev = cfg.run.device
    if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got '{dev}'")
    return cfg


MAX_EPOCHS = 100_000  # schedules are walked epoch by epoch; a typo must not hang the tool


def check_epochs(epochs: int) -> None:
    if not 1 <= epochs <= MAX_EPOCHS:
        raise ConfigError(f"--epochs must be between 1 and {MAX_EPOCHS:,}, got {epochs}")


def parse_int_list(text: str | None, option: str) -> list[int] | None:
    """'60,120,160' -> [60, 120, 160]; '' -> [] (no milestones)."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"{option} must be comma-separated integers, got '{text}'") from None

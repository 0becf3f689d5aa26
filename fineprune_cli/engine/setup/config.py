"""One config tree for every command: defaults < YAML file < CLI flags.

The sections are declared in `sections` (model, data, train, run), `pruning.config` and
`scriptconfig`, each field once (`settings.option`: default, help, flag, check). The defaults are
the paper's CIFAR-10 recipe (Section 5) and the schedule chosen in docs/policies/fine.md; the ones that
depend on the run's length (milestones, the pruning window and start) are the paper's shares of
--epochs, filled in by `resolve` once every layer is read, so a run's config.yaml holds numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...errors import ConfigError
from ...pruning.config import PruneConfig
from ...pruning.registry import get as get_policy
from ...settings import apply_values, check_section
from ..records.files import read_regular_text
from . import yamlvalues
from .scriptconfig import ScriptConfig, runs_script
from .sections import MAX_EPOCHS, DataConfig, ModelConfig, RunConfig, TrainConfig, paper_milestones


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
    optional `judging` section (the judging plan, read by `analysis.decide.judging`)."""
    data = dict(data)
    data.pop("judging", None)
    return data, data.pop("compare", None) or {}


def build_config(
    config_file: str | Path | None, overrides: dict[str, Any], base: Config | None = None, drop_idle: bool = True
) -> Config:
    """Defaults (or `base`), then the YAML file (its `compare` section ignored), then flags
    ('section.key' -> value; None = not given). `drop_idle=False`: a comparison's settings, kept
    whole for its arms (each job drops those that cannot act in it)."""
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
    return resolve(cfg, drop_idle)


def given_as(cfg: Config, dotted: str, flag: str) -> str:
    """How an error names a setting: 'FILE: section.key' when the YAML file set it and no flag
    overrode it (the user typed no flag), else the flag."""
    origin = getattr(cfg, "origins", {}).get(dotted, "command line")
    return flag if origin == "command line" else f"{origin}: {dotted}"


def resolve(cfg: Config, drop_idle: bool = True) -> Config:
    """Fill the defaults that are shares of the run's length (and whether it prunes) into
    `cfg`, in place; explicit values stay, so resolving twice changes nothing. `drop_idle`:
    reset the settings that cannot act in this run (`_drop_idle_settings`)."""
    epochs = cfg.train.epochs
    length_known = isinstance(epochs, int) and 1 <= epochs <= MAX_EPOCHS
    if cfg.train.milestones is None and length_known:
        cfg.train.milestones = paper_milestones(epochs)
    cfg.prune.resolve(epochs if length_known else None)
    if drop_idle:
        _drop_idle_settings(cfg)
    return cfg


def _drop_idle_settings(cfg: Config) -> None:
    """Settings that cannot act in this run back to their defaults: another policy's own
    settings, and the pruned-epoch lr scaling and loss reweighting of a run that prunes nothing.
    Recorded as given they split report rows and blocked compare's reuse of runs they never changed."""
    from ...pruning.registry import list_policies

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
        cfg.prune.reweight = defaults.reweight  # weights only what a pruning policy left out


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
    script = runs_script(cfg)
    if not cfg.model.name and not script:
        raise ConfigError("no model given: pass --model or set model.name in --config")
    if not cfg.data.dataset and not script:
        raise ConfigError("no dataset given: pass --dataset or set data.dataset in --config")
    resolve(cfg)  # a Config made in code; a bad --epochs leaves the shares unset, refused below
    for name in SCRIPT_SECTIONS if script else SECTIONS:
        check_section(getattr(cfg, name), f"{name}.")
    if cfg.policy != "regular":
        from ...pruning.policy import refuse_idle

        refuse_idle(get_policy(cfg.policy), cfg.prune, cfg.train.epochs)
    if script and get_policy(cfg.policy).selects_batches:  # a script's loop would train whole batches
        raise ConfigError(
            f"--policy {cfg.policy} chooses rows inside each step of fineprune's trainer; a --script "
            "run trains its own steps: compare it without --script"
        )
    return cfg


def parse_int_list(text: str | None, option_name: str) -> list[int] | None:
    """'60,120,160' -> [60, 120, 160]; '' -> [] (no milestones)."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",")] if text.strip() else []
    except ValueError:
        raise ConfigError(f"{option_name} must be comma-separated integers, got '{text}'") from None

"""Which run a script is (`fineprune.start()`, run.py): compare's job, read from the file
FINEPRUNE_JOB names, or the one the script's own arguments describe; and the refusal of a script
that trains another run than compare told it (another seed, epochs, milestones or policy), in
words that say which placeholder to pass."""

from __future__ import annotations

import sys
from pathlib import Path

from ..arms import shorter_budget
from ..engine.records.record import default_run_dir
from ..engine.setup.config import Config, config_from_dict, load_yaml, validate
from ..errors import ConfigError
from ..pruning.config import PruneConfig
from .logged import ScriptError

JOB_ENV = "FINEPRUNE_JOB"
# a script that trains past {epochs} most often adds a cool-down after its schedule (timm's
# train.py trains --epochs + --cooldown-epochs): what to do, in words a user can follow
MORE_EPOCHS = (
    "the script trains more epochs than {epochs} gives it, as a cool-down added after its schedule does "
    "(timm's --cooldown-epochs); fold the cool-down into {epochs} (the script trains {epochs} epochs in all, its "
    "schedule {epochs} less the cool-down; with timm's train.py: --cooldown-epochs 0 and compare's --epochs the "
    "whole length), or drop it (--cooldown-epochs 0)"
)


def job_config(path: Path) -> Config:
    try:
        return validate(config_from_dict(load_yaml(path), str(path)))
    except ConfigError as exc:
        raise ScriptError(f"{JOB_ENV}={path}: {exc}") from None


def own_config(seed, epochs, milestones, policy, prune, model, dataset, out) -> Config:
    cfg = Config()
    cfg.model.name, cfg.data.dataset = model or Path(sys.argv[0]).stem or "script", dataset or "data"
    cfg.run.seed, cfg.train.epochs, cfg.train.milestones = seed, epochs, list(milestones or [])
    cfg.prune = prune or PruneConfig()
    cfg.prune.enabled, cfg.prune.policy = (policy or "regular") != "regular", policy or cfg.prune.policy
    cfg.run.out = str(out or default_run_dir(cfg.model.name, cfg.data.dataset))
    cfg.script.command = "(run on its own)"
    return validate(cfg)


def refuse_other_run(cfg: Config, seed: int, epochs: int, milestones: list[int] | None, policy: str | None) -> None:
    """compare told the script its run; a script training another one would be filed under the
    wrong seed or arm, so it stops here, saying which placeholder to pass."""
    told = {"seed": cfg.run.seed, "epochs": cfg.train.epochs, "policy": cfg.policy}
    given = {"seed": seed, "epochs": epochs, "policy": policy}
    if milestones is not None:  # a script without lr steps declares none
        told["milestones"] = ",".join(map(str, cfg.train.milestones or []))
        given["milestones"] = ",".join(map(str, milestones))
    for name, value in given.items():
        if name == "milestones" and value is not None and value != told[name]:
            raise ScriptError(_milestones_advice(str(told[name]), str(value), shorter_budget(cfg.run.arm) is not None))
        if value is not None and value != told[name]:
            more = f"; if it does, {MORE_EPOCHS}" if name == "epochs" and epochs > cfg.train.epochs else ""
            raise ScriptError(
                f"compare runs this script as {name} {told[name]}, but it trains {name} {value}: pass "
                f"{{{name}}} to it in --script (e.g. --{name} {{{name}}}) and use that value{more}"
            )


def _milestones_advice(told: str, trains: str, shorter: bool) -> str:
    """A script that steps its lr elsewhere, or not at all, is told what compare must be given:
    passing {milestones} to a cosine script (the advice once given) changes nothing it trains. A
    shorter arm's milestones are regular's compressed: only {milestones} brings them."""
    if not trains and not shorter:
        return (
            f"compare runs this script as milestones {told}, but it trains none (a schedule without "
            "steps, such as cosine): run compare with --milestones '' (and derive the schedule's length "
            "from {epochs})"
        )
    own = "" if shorter or not trains else f", or run compare with its own: --milestones {trains}"
    return (
        f"compare runs this script as milestones {told}, but it trains milestones {trains or 'none'}: pass "
        f"{{milestones}} to it in --script (e.g. --milestones {{milestones}}) and use that value{own}"
    )

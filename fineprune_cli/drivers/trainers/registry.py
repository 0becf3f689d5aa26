"""The trainers by name, and the choice of one for a config (from `engine.setup.scriptconfig.runs_script`,
the one place that reads it). A new trainer: one module, one line here and its setting."""

from __future__ import annotations

from ...engine.setup.config import Config
from ...engine.setup.scriptconfig import runs_script
from .builtin import Builtin
from .contract import Trainer
from .script import Script

TRAINERS: dict[str, Trainer] = {t.name: t for t in (Builtin(), Script())}


def trainer_for(cfg: Config) -> Trainer:
    return TRAINERS["script" if runs_script(cfg) else "builtin"]

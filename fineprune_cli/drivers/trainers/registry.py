"""The trainers by name (the shape of every axis: `fineprune_cli.registry`), and the choice of
one for a config: each trainer says whether a config is its own (`takes`); the default trains
what no other takes. A new trainer is one module of `trainers/kinds/`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...registry import Registry
from .contract import Trainer

if TYPE_CHECKING:
    from ...engine.setup.config import Config

DEFAULT = "builtin"
TRAINERS: Registry[Trainer] = Registry(__package__ + ".kinds", DEFAULT)


def trainer_for(cfg: Config) -> Trainer:
    taking = [t for name, t in TRAINERS.items() if name != DEFAULT and t.takes(cfg)]
    return taking[0] if taking else TRAINERS[DEFAULT]

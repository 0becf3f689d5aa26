"""A run's working parts from its config: the model (its first weights drawn from the run's
seed), the device-resident trainer on the loaded data, and the pruning policy."""

from __future__ import annotations

import torch

from ... import models
from ...pruning.policy import Policy
from ...pruning.policy import create as create_policy
from ..inputs.stream import load_data
from ..setup.config import Config, given_as
from . import world as worlds
from .device import resolve_device
from .trainer import Trainer
from .world import World


def build_model(cfg: Config, channels: int, classes: int) -> torch.nn.Module:
    """The run's model, its initial weights drawn from the run's seed (the same in every
    process that builds it)."""
    torch.manual_seed(cfg.run.seed)
    kwargs = {"widen": cfg.model.widen} if cfg.model.widen else {}
    return models.create(cfg.model.name, channels, classes, **kwargs)


def check_factory(cfg: Config, shape: tuple[int, int, int] | None = None) -> None:
    """A user's model (package.module:factory) built and given a tiny batch of the data's shape
    ((channels, size, classes); default: `datashape.shape_of`, no pixels read), as a run's start
    does (`trainer_and_policy`), before anything is written: the global RNG as it was."""
    if models.is_factory(cfg.model.name):
        from ..inputs.datashape import shape_of

        channels, size, classes = shape or shape_of(cfg.data)[2:]
        with torch.random.fork_rng(devices=[]):
            model = build_model(cfg, channels, classes)
        models.check_outputs(model, cfg.model.name, torch.zeros(2, channels, size, size), classes)


def trainer_and_policy(cfg: Config, world: World = worlds.SINGLE) -> tuple[Trainer, Policy]:
    """This process's device (and its place in the process group), the data loaded onto it,
    the trainer and the policy."""
    device = resolve_device(worlds.device_for(world, cfg.run.device), given_as(cfg, "run.device", "--device"))
    worlds.place(device)
    worlds.init(world, device, cfg.run.dist_timeout)
    data, channels, classes = load_data(
        cfg.data, cfg.run.seed, device, max(cfg.train.batch_size, cfg.train.eval_batch_size)
    )
    model = build_model(cfg, channels, classes)
    shapes = None
    if models.is_factory(cfg.model.name):  # a user's model: one forward of two test images first
        models.check_outputs(model, cfg.model.name, next(iter(data.test_batches(0, 2, 2))).float().cpu(), classes)
        shapes = models.shapes_hash(model)
    trainer = Trainer(model, data, cfg.train, device, cfg.run.seed, cfg.run.compile, cfg.run.compile_mode, world=world)
    trainer.channels, trainer.classes = channels, classes
    trainer.model_shapes = shapes  # a user's model: its factory's name says less than its shapes
    policy = create_policy(
        cfg.policy, data.num_train, cfg.prune, seed=cfg.run.seed + 1, device=device, epochs=cfg.train.epochs
    )
    return trainer, policy

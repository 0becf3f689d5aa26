"""The front door of a run: `train(cfg)` and `resume(run_dir)` are what the command line,
compare's runs (in this process or as tasks) and every process of a launched run call;
`launch` starts those processes (`train --nproc-per-node`).

They dispatch by the process this is: a lone process runs the engine's loop
(engine/training/session.py) and imports nothing of distributed/; a process that torchrun started
(or a task of a multi-task srun step) goes through the distributed checks first, then runs
the same loop as a DDP rank (`--dist-mode sync`) or its part of a parameter-server run
(async/mixed, distributed/paramserver.py).

`train` and `launch` validate the config they are given (`engine.setup.config.validate`): the
command line builds it and hands it over unchecked, and nothing below them checks it again.
(compare's `plan` also checks every job before the first one trains, so a bad arm stops the
matrix early; a resumed run's own config.yaml is checked where it is read, in `resumable`.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .engine.records.record import RunSummary, Status, read_summary
from .engine.setup.config import Config, validate
from .engine.training.session import resumable, resume_sync, train_sync
from .engine.training.world import World, from_env

# torchrun sets it in every process it starts, a lone one (--nproc-per-node 1) included
RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"


def train(cfg: Config, show_progress: bool = True, command: str | None = None, bar: Any = None) -> RunSummary | None:
    """Train a new run as `cfg` says. `command` (how it was launched) goes into the summary;
    `bar`: a caller's progress bar to advance per epoch. Returns the run's summary (None in a
    parameter-server process other than the chief, which records the run)."""
    world = from_env()
    validate(cfg)
    if not launched(world, os.environ):
        return train_sync(weak_scaling(cfg, 1), world, show_progress, command, bar)
    return _train_launched(cfg, world, show_progress, command, bar)


def resume(run_dir: Path, show_progress: bool = True, bar: Any = None) -> RunSummary | None:
    """Continue an interrupted run folder from its checkpoint, in the mode it was started in."""
    world = from_env()
    summary, cfg = resumable(run_dir)
    if world.active and cfg.run.dist_mode != "sync":
        from .distributed.paramserver import train_ps

        return train_ps(cfg, world, None, resume_dir=run_dir)
    return resume_sync(run_dir, summary, cfg, world, show_progress, bar)


def launch(
    argv: list[str],
    cfg: Config | None,
    nproc: int,
    nnodes: int | None,
    node_rank: int | None,
    endpoint: str | None,
    max_restarts: int,
) -> int:
    """`fineprune <argv>` (a `train`) again in nproc processes on this node through torchrun,
    the run's layout checked and its folder named here first (`cfg` None: a --resume, whose
    processes check their run folder); returns the launcher's exit code."""
    from .distributed.launch import check_parallel, naming_the_run, relaunch

    if cfg is not None:  # refuse bad settings here, not in every rank after loading the data
        size = nproc * (nnodes or 1)
        check_parallel(weak_scaling(validate(cfg), size, nproc), size, nproc)
        argv = naming_the_run(argv, cfg)
    return relaunch(argv, nproc, nnodes, node_rank, endpoint, max_restarts)


def launched(world: World, env: Mapping[str, str]) -> bool:
    """Whether this process is one of a launched run (torchrun's, or a multi-task srun step's)."""
    return world.active or RESTART_COUNT in env


def _train_launched(cfg: Config, world: World, show_progress: bool, command: str | None, bar: Any) -> RunSummary | None:
    from .distributed.launch import check_parallel, restarted
    from .distributed.layout import local_size

    per_node = local_size(os.environ, world.size)
    cfg = weak_scaling(cfg, world.size, per_node)
    check_parallel(cfg, world.size, per_node)
    again = restarted(cfg, os.environ, world.main)
    if again is not None:  # a restart after the last epoch's checkpoint finds the run complete
        done = read_summary(again)
        return done if done.status == Status.COMPLETE else resume(again, show_progress, bar)
    if world.active and cfg.run.dist_mode != "sync":
        from .distributed.paramserver import train_ps

        return train_ps(cfg, world, command)
    return train_sync(cfg, world, show_progress, command, bar)


def weak_scaling(cfg: Config, size: int, per_node: int | None = None) -> Config:
    """--batch-per-worker B: the batch a step of all ranks shares becomes B x ranks (sync); in
    async mode a worker's batch is B; in mixed mode each group's is B x its workers (recorded:
    the largest group's); one process trains on batches of B. Set before anything reads
    batch_size."""
    b = cfg.train.batch_per_worker
    if not b:
        return cfg
    if size < 2 or cfg.run.dist_mode == "async":
        cfg.train.batch_size = b
    elif cfg.run.dist_mode == "sync":
        cfg.train.batch_size = b * size
    else:
        from .distributed.layout import worker_groups

        groups = worker_groups(size, cfg.run.num_ps, per_node or size, cfg.run.group_size, "mixed")
        cfg.train.batch_size = b * max(len(g) for g in groups)
    return cfg

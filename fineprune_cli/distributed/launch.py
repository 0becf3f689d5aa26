"""Starting data-parallel runs: `--nproc-per-node` relaunches the command through torchrun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ..engine.config import Config
from ..errors import ConfigError

LAUNCH_FLAGS = ("--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-endpoint")


def relaunch(argv: list[str], nproc: int, nnodes: int | None, node_rank: int | None,
             endpoint: str | None) -> int:
    """Run `fineprune <argv>` in nproc processes through torch.distributed.run (torchrun)."""
    if "RANK" in os.environ:
        raise ConfigError("--nproc-per-node given inside a torchrun process: leave it out there")
    if nproc < 1 or (nnodes is not None and nnodes < 1):
        raise ConfigError("--nproc-per-node and --nnodes must be positive")
    nnodes = nnodes or 1
    if nnodes > 1 and (endpoint is None or node_rank is None):
        raise ConfigError("--nnodes > 1 needs --node-rank and --rdzv-endpoint host:port")
    launcher = ["--nproc-per-node", str(nproc), "--nnodes", str(nnodes)]
    launcher += (["--standalone"] if nnodes == 1 else
                 ["--node-rank", str(node_rank), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint])
    # "--": the launcher would otherwise take our flags (e.g. --start) for abbreviations of its own
    cmd = [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "fineprune_cli", "--",
           *without_launch_flags(argv)]
    return call_forwarding_signals(cmd)


def call_forwarding_signals(cmd: list[str]) -> int:
    """subprocess.call, but a SIGTERM to us (a scheduler ending the job, `kill`) goes on to the
    launcher, which stops its ranks; otherwise they would be orphaned and go on training.
    (Ctrl-C reaches the whole process group from the terminal by itself.)"""
    proc = subprocess.Popen(cmd)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + N


def check_parallel(cfg: Config, size: int, per_node: int | None = None) -> None:
    """Process-count and batch-size checks of a `size`-process run (`per_node` on each node),
    before any data is loaded: the batch (or a mixed group's batch) is split evenly over the
    processes that share it."""
    from .layout import worker_groups

    mode, batch = cfg.run.dist_mode, cfg.train.batch_size
    if size < 2:
        return
    if mode == "sync":
        if batch % size and not cfg.train.batch_per_worker:
            raise ConfigError(f"--batch-size {batch} must divide evenly over {size} processes")
        return
    groups = worker_groups(size, cfg.run.num_ps, per_node or size, cfg.run.group_size, mode)
    if mode == "mixed" and not cfg.train.batch_per_worker:
        odd = sorted({len(g) for g in groups if batch % len(g)})
        if odd:  # an uneven split would train the groups' members on batches of other sizes
            raise ConfigError(f"--batch-size {batch} must divide evenly over a mixed group of {odd[0]} "
                              f"workers (groups: {', '.join(str(len(g)) for g in groups)} workers; "
                              "--group-size 0 = the workers of a node)")


def weak_scaling(cfg: Config, size: int, per_node: int | None = None) -> Config:
    """--batch-per-worker B: the batch a step of all ranks shares becomes B x ranks (sync); in
    async mode a worker's batch is B; in mixed mode each group's is B x its workers (recorded:
    the largest group's). Set before anything reads batch_size."""
    from .layout import worker_groups

    b = cfg.train.batch_per_worker
    if not b:
        return cfg
    if size < 2 or cfg.run.dist_mode == "async":
        cfg.train.batch_size = b
    elif cfg.run.dist_mode == "sync":
        cfg.train.batch_size = b * size
    else:
        groups = worker_groups(size, cfg.run.num_ps, per_node or size, cfg.run.group_size, "mixed")
        cfg.train.batch_size = b * max(len(g) for g in groups)
    return cfg


def without_launch_flags(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in LAUNCH_FLAGS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def train(cfg, show_progress: bool = True, command: str | None = None):
    """One process of `fineprune train`: the engine's loop alone or as a DDP rank, or a
    parameter-server process (async/mixed) when launched that way."""
    from ..engine import session
    from ..engine.world import from_env
    from .layout import local_size
    from .paramserver import train_ps

    world = from_env()
    per_node = local_size(os.environ, world.size)
    cfg = weak_scaling(session.validate(cfg), world.size, per_node)
    check_parallel(cfg, world.size, per_node)
    if world.active and cfg.run.dist_mode != "sync":
        return train_ps(cfg, world, command)
    return session.train(cfg, show_progress=show_progress, command=command)


def resume(run_dir, show_progress: bool = True):
    """`train --resume`: the synchronous loop's resume, or a parameter-server run's."""
    from ..engine import session
    from ..engine.world import from_env
    from .paramserver import train_ps

    world = from_env()
    _, cfg = session.resumable(run_dir)
    if world.active and cfg.run.dist_mode != "sync":
        return train_ps(cfg, world, None, resume_dir=run_dir)
    return session.resume(run_dir, show_progress=show_progress)

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


def check_parallel(cfg: Config, size: int) -> None:
    """Batch-size checks of a `size`-process run, before any data is loaded: the batch (or a
    mixed group's batch) is split evenly over the processes that share it."""
    mode, batch = cfg.run.dist_mode, cfg.train.batch_size
    if size < 2:
        return
    if mode == "sync" and batch % size:
        raise ConfigError(f"--batch-size {batch} must divide evenly over {size} processes")
    if mode == "mixed":
        workers, group = size - 1, cfg.run.group_size
        sizes = {min(group, workers - first) for first in range(0, workers, group)}
        odd = [n for n in sorted(sizes) if batch % n]
        if odd:  # an uneven split would train the groups' members on batches of other sizes
            raise ConfigError(f"--batch-size {batch} must divide evenly over a mixed group of {odd[0]} "
                              f"workers ({workers} workers in groups of --group-size {group})")


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
    from .paramserver import train_ps

    world = from_env()
    check_parallel(session.validate(cfg), world.size)
    if world.active and cfg.run.dist_mode != "sync":
        return train_ps(cfg, world, command)
    return session.train(cfg, show_progress=show_progress, command=command)

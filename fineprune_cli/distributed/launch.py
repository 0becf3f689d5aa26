"""Starting data-parallel runs: `--nproc-per-node` relaunches the command through torchrun."""

from __future__ import annotations

import os
import subprocess
import sys

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
    return subprocess.call(cmd)


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
    if world.active and cfg.run.dist_mode != "sync":
        return train_ps(session.validate(cfg), world, command)
    return session.train(cfg, show_progress=show_progress, command=command)

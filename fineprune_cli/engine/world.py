"""Data-parallel training on torch.distributed (synchronous mode: DDP).

Every rank holds the whole dataset and computes the same keep-list each epoch. The kept
indices are shuffled with the shared seed; global batch s (batch_size samples) is split
evenly across ranks, so a step of all ranks together is one batch of the single-process
run. A short last global batch is cut to a multiple of the world size (at most world - 1
samples of an epoch are not trained), so no rank waits for a step the others never take.
DroppingCount compares each loss with the global batch mean; each rank counts its own
samples and the counts are summed across ranks before the pruned samples are chosen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .errors import ConfigError


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1


SINGLE = World()


def from_env(env: dict[str, str] | None = None) -> World:
    """torchrun's RANK/WORLD_SIZE/LOCAL_RANK, else Slurm's SLURM_PROCID/NTASKS/LOCALID."""
    env = dict(os.environ if env is None else env)
    keys = [("RANK", "WORLD_SIZE", "LOCAL_RANK"), ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")]
    for rank, size, local in keys:
        if size in env and int(env[size]) > 1:
            if rank == "SLURM_PROCID" and "MASTER_ADDR" not in env:
                raise ConfigError("under Slurm, set MASTER_ADDR and MASTER_PORT (see README: several GPUs and nodes)")
            return World(int(env[rank]), int(env[size]), int(env.get(local, 0)))
    return SINGLE


def init(world: World, device_type: str, init_method: str | None = None) -> None:
    if not world.active or dist.is_initialized():
        return
    backend = "nccl" if device_type == "cuda" else "gloo"
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group(backend, init_method=init_method or "env://", rank=world.rank,
                            world_size=world.size)


def device_for(world: World, name: str) -> str:
    """On CUDA each rank takes the GPU of its local rank."""
    if world.active and name in ("auto", "cuda") and torch.cuda.is_available():
        return f"cuda:{world.local_rank}"
    return name


def step_slices(order: torch.Tensor, batch_size: int, world: World) -> list[torch.Tensor]:
    """This rank's part of each global batch of `order` (identical on every rank)."""
    out = []
    for batch in order.split(batch_size):
        per_rank = batch.numel() // world.size
        if per_rank:
            out.append(batch[world.rank * per_rank:(world.rank + 1) * per_rank])
    return out


def all_sum(tensor: torch.Tensor, world: World) -> torch.Tensor:
    """Sum over ranks (a new tensor; the input is left alone). No host sync on its own."""
    if not world.active:
        return tensor
    out = tensor.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def shard_range(n: int, world: World) -> tuple[int, int]:
    """Contiguous part of n items for this rank (evaluation)."""
    per = -(-n // world.size)
    return min(world.rank * per, n), min((world.rank + 1) * per, n)


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
           *_without_launch_flags(argv)]
    return subprocess.call(cmd)


def _without_launch_flags(argv: list[str]) -> list[str]:
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


def shutdown(finished: bool) -> None:
    """Leave the process group; after a normal finish wait for every rank first, so no rank
    exits while another still talks to it (gloo aborts the process otherwise)."""
    if not dist.is_initialized():
        return
    if finished:
        dist.barrier()
    dist.destroy_process_group()

"""Which process this is, and the collectives the engine needs (synchronous mode: DDP).

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
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping

import torch
import torch.distributed as dist

from ...errors import ConfigError
from ..records.files import quiet_stderr


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    nodes: int = 1  # the machines its processes run on (torchrun's --nnodes, an srun step's nodes)

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1


SINGLE = World()
STEP_SIZE = "SLURM_STEP_NUM_TASKS"


def alone(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a child process that is to run on its own, not as a task of this process's
    srun step (its other variables, the job's and MASTER_*, stay)."""
    return {k: v for k, v in env.items() if k != STEP_SIZE}


def from_env(env: Mapping[str, str] | None = None) -> World:
    """torchrun's RANK/WORLD_SIZE/LOCAL_RANK, else those of a task of a multi-task srun step.

    The step's size is SLURM_STEP_NUM_TASKS, which srun alone sets, for each task of a step
    ("Number of processes in the step"), not SLURM_NTASKS: sbatch and salloc set that one, with
    SLURM_PROCID 0, for the allocation's shell too (srun(1) and sbatch(1), OUTPUT ENVIRONMENT
    VARIABLES, SchedMD/slurm doc/man/man1), so a process started there without srun would take
    itself for rank 0 and wait for peers. (A task's children inherit the step's variables:
    `alone` drops them for one that is to run on its own.)"""
    env = dict(os.environ if env is None else env)
    keys = [
        ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_WORLD_SIZE"),
        ("SLURM_PROCID", STEP_SIZE, "SLURM_LOCALID", "SLURM_STEP_NUM_NODES"),
    ]
    for rank, size, local, nodes in keys:
        if size in env and env_int(env, size, 1) > 1:
            if rank == "SLURM_PROCID" and "MASTER_ADDR" not in env:
                raise ConfigError("under Slurm, set MASTER_ADDR and MASTER_PORT (see docs/howto/distributed.md)")
            if "MASTER_PORT" in env:
                env_int(env, "MASTER_PORT", 1, 65535)
            n = int(env[size])
            return World(
                env_int(env, rank, 0, n - 1), n, env_int(env, local, 0, default=0), env_int(env, nodes, 1, n, 1)
            )
        high = env_int(env, size, 1) - 1 if size in env else None  # RANK=1 WORLD_SIZE=1: not rank 0 alone
        for key in (rank, local):  # a lone RANK=-1 or LOCAL_RANK=x is a mistake too
            if key in env:
                env_int(env, key, 0, high)
    return SINGLE


def env_int(env: dict[str, str], key: str, low: int, high: int | None = None, default: int | None = None) -> int:
    """An environment variable as an integer in [low, high]; one clear line otherwise."""
    text = env.get(key)
    if text is None and default is not None:
        return default
    try:
        value = int(text) if text is not None and text.isascii() else int("?")
    except ValueError:
        raise ConfigError(f"{key}={text!r}: must be an integer" if text is not None else f"{key} is unset") from None
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{key}={value}: must be {bounds}")
    return value


def init(world: World, device: torch.device, timeout_s: float, init_method: str | None = None) -> None:
    """Join the process group (nccl on CUDA, gloo on CPU, and gloo where ranks share a GPU, which
    NCCL refuses: 'Duplicate GPU detected'). A collective that waits longer than `timeout_s` for
    another rank fails the run instead of hanging it. Under Slurm there is no RANK/WORLD_SIZE in
    the environment for env:// to read: this rank's place is given explicitly."""
    if not world.active or dist.is_initialized():
        return
    timeout = timedelta(seconds=timeout_s)
    if init_method is None and "MASTER_ADDR" not in os.environ:
        raise ConfigError(
            f"{world.size} processes need MASTER_ADDR and MASTER_PORT to meet (torchrun sets them; "
            "see docs/howto/distributed.md)"
        )
    try:
        with quiet_stderr():  # c10d logs each failed try with a 30-line C++ stack
            store = None if init_method else group_store(world, timeout)
            # every rank of a run has one device type, so all of them post or none does
            shared = store is not None and device.type == "cuda" and shared_gpu(store, world, gpu_id(device))
            backend = "nccl" if device.type == "cuda" and not shared else "gloo"
            dist.init_process_group(
                backend, init_method=init_method, store=store, rank=world.rank, world_size=world.size, timeout=timeout
            )
    except (dist.DistError, TimeoutError, ValueError) as exc:  # the rendezvous or a peer unreachable
        where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT')}"
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigError(
            f"rank {world.rank} of {world.size} could not join the process group at {where} "
            f"within {timeout_s:g} s: {reason}"
        ) from None


def gpu_id(device: torch.device | str) -> str:
    """The physical GPU behind a device ('' for none): its UUID, the same whatever
    CUDA_VISIBLE_DEVICES numbers it in each process."""
    device = torch.device(device)
    if device.type != "cuda":
        return ""
    return str(
        torch.cuda.get_device_properties(device.index if device.index is not None else torch.cuda.current_device()).uuid
    )


def shared_gpu(store: dist.Store, world: World, gpu: str) -> bool:
    """Whether any two ranks hold one GPU (each posts its `gpu_id` to the group's store and
    reads the others'): then collectives on the device go through gloo, as on a one-GPU machine
    running several ranks."""
    store.set(f"fineprune/gpu/{world.rank}", gpu)
    ids = [store.get(f"fineprune/gpu/{r}").decode() for r in range(world.size)]
    held = [i for i in ids if i]
    return len(set(held)) < len(held)


def group_store(world: World, timeout: timedelta) -> dist.Store:
    """The store a group meets through: env:// (MASTER_ADDR:MASTER_PORT), or `restart_store`'s
    in a rank that torchrun restarted."""
    os.environ.setdefault("MASTER_PORT", "29500")
    return (
        restart_store(os.environ, timeout)
        or next(dist.rendezvous("env://", rank=world.rank, world_size=world.size, timeout=timeout))[0]
    )


def restart_store(env: Mapping[str, str], timeout: timedelta) -> dist.Store | None:
    """The store a rank that torchrun restarted joins through: the agent's (MASTER_ADDR:PORT,
    which it serves to every attempt of a run) under a prefix of this attempt. The group's keys
    carry no attempt, so a restarted rank could read an address a dead rank left there, and
    fail to connect or wait on it (seen with torch 2.14 and gloo). None on a first start, or
    where rank 0 hosts the store (it died with that rank)."""
    attempt = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt in ("", "0") or env.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    agent = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timeout)
    return dist.PrefixStore(f"fineprune/attempt-{attempt}", agent)


def device_for(world: World, name: str) -> str:
    """On CUDA each rank takes the GPU `cuda_index` gives it."""
    if world.active and name in ("auto", "cuda") and torch.cuda.is_available():
        return f"cuda:{cuda_index(world.local_rank, torch.cuda.device_count(), os.environ)}"
    return name


def cuda_index(local_rank: int, device_count: int, env: Mapping[str, str]) -> int:
    """The GPU of a rank: its local rank among the node's GPUs, or 0 when the process sees one
    GPU only (srun --gpus-per-task 1 gives each task its own GPU, numbered 0 inside it)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if device_count == 1 or (visible is not None and len([v for v in visible.split(",") if v.strip()]) == 1):
        return 0
    if local_rank >= device_count:
        raise ConfigError(
            f"local rank {local_rank} needs GPU {local_rank}, but this process sees "
            f"{device_count}: start at most {device_count} processes per node"
        )
    return local_rank


def place(device: torch.device) -> None:
    """Make the run's GPU the current one: CUDA events, streams and NCCL calls that name no
    device go to the current one, which is GPU 0 on every rank unless set. A bare 'cuda' means
    the current one already."""
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)


def step_slices(order: torch.Tensor, batch_size: int, world: World) -> list[torch.Tensor]:
    """This rank's part of each global batch of `order` (identical on every rank)."""
    out = []
    for batch in order.split(batch_size):
        per_rank = batch.numel() // world.size
        if per_rank:
            out.append(batch[world.rank * per_rank : (world.rank + 1) * per_rank])
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


def shutdown(finished: bool) -> None:
    """Leave the process group; after a normal finish wait for every rank first, so no rank
    exits while another still talks to it (gloo aborts the process otherwise)."""
    if not dist.is_initialized():
        return
    if finished:
        dist.barrier()
    dist.destroy_process_group()

"""Who does what in a parameter-server run, as pure functions of the world's shape.

Ranks 0 .. K-1 are the K parameter servers (`--num-ps`); server 0 also runs the epochs
(keep-lists, evaluation, records). The other ranks are workers. In mixed mode a group is the
workers of one node (torchrun's LOCAL_WORLD_SIZE, Slurm's tasks per node), as the GPUs of a
node in Campos et al. (2017), or `--group-size` consecutive workers inside one node; a group
never straddles nodes. Ranks are numbered node by node (torchrun and Slurm's block
distribution both do), so rank // local_size is the node.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import torch

from ..engine.training.world import World
from ..errors import ConfigError


def local_size(env: Mapping[str, str], size: int) -> int:
    """Processes per node: LOCAL_WORLD_SIZE (torchrun), else the srun step's tasks per node
    (e.g. '4(x2)' = 4 on each of 2 nodes; not the allocation's SLURM_TASKS_PER_NODE, which a
    step may use part of), else all on one node."""
    for key in ("LOCAL_WORLD_SIZE", "SLURM_STEP_TASKS_PER_NODE"):
        match = re.match(r"\s*(\d+)", env.get(key, ""))
        if match and int(match.group(1)) > 0:
            return min(int(match.group(1)), size)
    return size


def worker_groups(size: int, num_ps: int, per_node: int, group_size: int, mode: str) -> list[list[int]]:
    """The worker ranks that push together: one each in async mode; in mixed mode the
    workers of a node, split into runs of `group_size` (0: the whole node)."""
    if size <= num_ps:
        raise ConfigError(
            f"--dist-mode {mode} with --num-ps {num_ps} needs more than {num_ps} processes "
            f"(the servers and at least one worker); got {size}"
        )
    workers = list(range(num_ps, size))
    if mode != "mixed":
        return [[w] for w in workers]
    groups = []
    for node in range(-(-size // per_node)):
        members = [w for w in workers if w // per_node == node]
        step = group_size or len(members) or 1
        groups += [members[i : i + step] for i in range(0, len(members), step)]
    return groups


def gpu_placement(world: World, per_node: int, num_ps: int, ps_device: str) -> World | None:
    """How a process of a server run picks its GPU: None for a server kept on the CPU
    (`--ps-device cpu`); else the world whose local rank numbers only the GPU-holding processes
    of its node (with the servers on the CPU, node 0's first worker takes GPU 0, so N GPUs
    run N workers)."""
    if ps_device == "gpu":
        return world
    if world.rank < num_ps:
        return None
    first = world.rank // per_node * per_node  # the node's first rank
    servers_here = max(0, min(num_ps, first + per_node) - first)
    return World(world.rank, world.size, max(0, world.local_rank - servers_here), world.nodes)


def assign_shards(sizes: Sequence[int], num_ps: int) -> list[int]:
    """The server of each parameter tensor: largest first onto the least-loaded server, so K
    servers hold about 1/K of the parameters each (a tensor is never split)."""
    load, owner = [0] * num_ps, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = min(range(num_ps), key=lambda k: (load[k], k))
        owner[i], load[k] = k, load[k] + sizes[i]
    return owner


class Shards:
    """The model's parameters by server, flattened in server order: a push is one buffer per
    server, a group's all-reduce one buffer per step, never one message per tensor."""

    def __init__(self, params: Sequence[torch.Tensor], num_ps: int):
        self.owner = assign_shards([p.numel() for p in params], num_ps)
        self.members = [[i for i, o in enumerate(self.owner) if o == k] for k in range(num_ps)]
        self.order = [i for m in self.members for i in m]
        sizes = [sum(params[i].numel() for i in m) for m in self.members]
        self.bounds = [(sum(sizes[:k]), sum(sizes[: k + 1])) for k in range(num_ps)]

    def part(self, flat: torch.Tensor, k: int) -> torch.Tensor:
        lo, hi = self.bounds[k]
        return flat[lo:hi]

    def flatten(self, tensors: Sequence[torch.Tensor], k: int | None = None) -> torch.Tensor:
        """Server k's tensors (all servers' in server order when k is None) in one buffer."""
        return flatten([tensors[i] for i in (self.order if k is None else self.members[k])])

    def load(self, params: Sequence[torch.Tensor], flat: torch.Tensor, k: int | None = None) -> None:
        load_flat([params[i] for i in (self.order if k is None else self.members[k])], flat)


def flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().flatten().float() for t in tensors]) if tensors else torch.zeros(0)


def load_flat(tensors: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    at = 0
    with torch.no_grad():
        for t in tensors:
            t.copy_(flat[at : at + t.numel()].view(t.shape))  # copy_ casts and moves to t's device
            at += t.numel()

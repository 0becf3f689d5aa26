"""A worker of an async/mixed run: fetch the epoch's keep-list and the weights, train its
share of the kept samples, push gradients, report its counts (distributed/paramserver.py
says who is a worker; `ServerCalls` is how it reaches the servers, so this module knows
nothing of RPC).

Mixed groups average on the device (NCCL subgroups on GPU, gloo on CPU): a step's gradients
are one flat tensor that never leaves the GPU except once, through one pinned buffer, for the
leader's pushes; the fresh weights come back to the leader and go to its group on the device.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..engine.setup.config import Config
from ..engine.training import checkpoint
from ..engine.training.trainer import predicted
from ..engine.training.world import World, step_slices
from .layout import Shards, flatten, load_flat


class ServerCalls(Protocol):
    """What a worker asks of the servers (each call waits for its answer, bounded)."""

    def first_epoch(self) -> int: ...
    def begin_epoch(self, epoch: int) -> tuple[Any, ...]: ...
    def pull(self, k: int) -> tuple[torch.Tensor, int]: ...
    def push(
        self, parts: list[torch.Tensor], versions: list[int], epoch: int, lr: float | None = None
    ) -> list[tuple[torch.Tensor, int]]: ...
    def end_epoch(
        self, epoch: int, counts: list[torch.Tensor], loss_sum: float, samples: int, buffers: torch.Tensor, stop: bool
    ) -> None: ...


class HostBuffer:
    """One pinned host buffer, reused, for the leader's copy of a step's gradients off the GPU
    (RPC carries CPU tensors only); on the CPU the tensor itself, no copy."""

    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = None

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "cpu":
            return t
        if self.buffer is None or self.buffer.shape != t.shape or self.buffer.dtype != t.dtype:
            self.buffer = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        self.buffer.copy_(t, non_blocking=True)
        torch.cuda.current_stream(t.device).synchronize()
        return self.buffer


def work(
    cfg: Config,
    trainer: Any,
    policy: Any,
    world: World,
    groups: list[list[int]],
    subgroups: list[Any],
    shards: Shards,
    servers: ServerCalls,
) -> None:
    """A worker's whole run: fetch keep-list and weights, train its share, push, report."""
    index = next(i for i, g in enumerate(groups) if world.rank in g)
    members, group = groups[index], subgroups[index]
    me = World(members.index(world.rank), len(members))
    leads = world.rank == members[0]
    batch = cfg.train.batch_per_worker * len(members) if cfg.train.batch_per_worker else cfg.train.batch_size
    params, host = list(trainer.model.parameters()), HostBuffer()
    versions = [0] * cfg.run.num_ps
    with checkpoint.StopRequest() as asked:
        epoch = servers.first_epoch()
        while epoch <= cfg.train.epochs:
            keep, weights, _, buffers, lr, halt = servers.begin_epoch(epoch)
            if halt:
                return
            for k in range(cfg.run.num_ps):
                flat, versions[k] = servers.pull(k)
                shards.load(params, flat, k)
            load_flat(list(trainer.model.buffers()), buffers)
            gen = torch.Generator().manual_seed(cfg.run.seed * 100_003 + epoch)
            order = keep[torch.randperm(keep.numel(), generator=gen)][index :: len(groups)]
            loss_sum, seen = torch.zeros((), dtype=torch.float64, device=trainer.device), 0
            for idx in step_slices(order, batch, me):
                total, fresh = train_step(
                    trainer, policy, idx, weights, shards, members, group, leads, versions, (epoch, lr), servers, host
                )
                shards.load(params, fresh[: -len(versions)])
                if leads:  # only the leader pushes; the others need no host read per step
                    versions[:] = [int(v) for v in fresh[-len(versions) :].tolist()]
                loss_sum, seen = loss_sum + total[0], seen + idx.numel() * len(members)
            pending = policy.take_pending()
            for t in pending if len(members) > 1 else []:
                dist.all_reduce(t, group=group)
            if leads:
                servers.end_epoch(
                    epoch,
                    [t.cpu() for t in pending],
                    loss_sum.item(),
                    seen,
                    flatten(list(trainer.model.buffers())).cpu(),
                    asked.requested is not None,
                )
            epoch += 1


def train_step(
    trainer: Any,
    policy: Any,
    idx: torch.Tensor,
    weights: torch.Tensor | None,
    shards: Shards,
    members: list[int],
    group: Any,
    leads: bool,
    versions: list[int],
    epoch_lr: tuple[int, Any],
    servers: ServerCalls,
    host: HostBuffer,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of a worker (`epoch_lr`: the epoch and its lr from the chief, for the
    servers): gradients, the group's average, the leader's pushes; returns
    (loss sum and samples of the group's batch, the fresh weights of every shard + versions),
    both on the worker's device."""
    device = trainer.device
    dev_idx = idx.to(device)
    losses, seen = worker_step(trainer, dev_idx, weights, policy.observes_predictions)
    params = list(trainer.model.parameters())
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    total = torch.stack([losses.detach().sum().float(), torch.full((), float(idx.numel()), device=device)])
    flat = torch.cat([shards.flatten(grads), total])  # stays on the device
    if len(members) > 1:
        dist.all_reduce(flat, group=group)
        flat[:-2] /= len(members)
    total = flat[-2:]
    if policy.observes:
        policy.observe(dev_idx, losses.detach(), total[0] / total[1], *seen)
    num_ps = len(versions)
    if leads:
        sent = host.copy(flat)  # the one copy off the device
        replies = servers.push([shards.part(sent, k).clone() for k in range(num_ps)], versions, *epoch_lr)
        fresh = torch.cat([w for w, _ in replies] + [torch.tensor([float(v) for _, v in replies])])
        fresh = fresh.to(device)
    else:
        fresh = torch.empty(shards.bounds[-1][1] + num_ps, device=device)
    if len(members) > 1:  # the leader hands the fresh weights to its group
        dist.broadcast(fresh, src=members[0], group=group)
    return total, fresh


def worker_step(
    trainer: Any, idx: torch.Tensor, weights: torch.Tensor | None = None, predictions: bool = False
) -> tuple[torch.Tensor, tuple]:
    """Forward and backward of one batch through the trainer's forward (compiled with
    --compile, as the synchronous loop's), under its autocast (bf16 data on CUDA);
    `weights`: the plan's per-sample loss weights (InfoBatch), as the synchronous loop uses.
    Returns the per-sample losses and, with `predictions`, (correct, confidence) (else ())."""
    trainer.model.train()
    x = next(iter(trainer.data.batches([idx], trainer.generator)))  # device-resident or streamed
    x = x.contiguous(memory_format=trainer.memory_format)
    with trainer.autocast():
        logits = trainer.forward(x)
        losses = F.cross_entropy(logits, trainer.data.train_y[idx], reduction="none")
    scaled = losses if weights is None else losses * weights[idx.cpu()].to(losses.device, losses.dtype)
    trainer.model.zero_grad(set_to_none=True)
    (scaled.sum() / idx.numel()).backward()
    return losses, predicted(logits, trainer.data.train_y[idx]) if predictions else ()

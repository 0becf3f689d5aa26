"""Asynchronous and mixed parameter-server training on torch.distributed.rpc.

As in Campos et al. (2017): ranks 0 .. K-1 are parameter servers (`--num-ps K`), each holding
a shard of the parameters; the other ranks are workers (distributed/layout.py says which).
- async: every worker computes gradients on its own batches and pushes each server its part;
  a server applies each push at once and sends back its fresh shard, so a worker's gradient
  may be stale (server version - the version the worker computed on; recorded per update).
- mixed: workers form groups (the workers of a node, or `--group-size`); a group averages its
  members' gradients synchronously (one flat all_reduce per step) and its leader pushes them.
Fine-pruning: workers count DroppingCount on their own samples against their (group) batch
mean and send the counts at the end of each epoch; server 0 (the chief) sums them, chooses
the next epoch's keep-list, evaluates, records and checkpoints (distributed/chief.py).
Epochs are aligned: a worker starts epoch e once the chief has closed epoch e - 1.
A message is one flat buffer per server (CPU memory), never one per tensor.
"""

from __future__ import annotations

import copy
import os
import socket
import threading
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
import torch.nn.functional as F

from ..engine import checkpoint, world as worlds
from ..engine.config import Config
from ..engine.record import RunSummary
from ..engine.session import build
from ..engine.world import World, step_slices
from .layout import Shards, flatten, load_flat, local_size, worker_groups
from .server import Chief, PeerLost, Server

_SERVER: "Server | None" = None
_READY = threading.Event()  # set once this server is built: workers may call earlier
_WAIT_S = [1800.0]


def _server() -> Server:
    if not _READY.wait(_WAIT_S[0]):
        raise PeerLost("the parameter server was not ready within --dist-timeout")
    return _SERVER


# what runs on a server when a worker (or the chief) calls it
def _push(grads, version, epoch):
    return _server().push(grads, version, epoch)


def _pull():
    return _server().pull()


def _first_epoch():
    return _server().first_epoch


def _begin_epoch(epoch):
    return _server().begin_epoch(epoch)


def _end_epoch(epoch, counts, loss_sum, samples, buffers, stop):
    _server().end_epoch(epoch, counts, loss_sum, samples, buffers, stop)


def _shard_state():
    return _server().state_dict()


def _load_shard(state):
    _server().load_state_dict(state)


def _finish():
    _server().finish()


_PEER_CALLS = {"state": _shard_state, "load": _load_shard, "finish": _finish}


def call(k: int, fn: Any, *args: Any) -> Any:
    """A call to server k; a server that is gone or silent past the RPC timeout ends the
    caller with one line, not a TensorPipe traceback."""
    return wait(send(k, fn, *args), k)


def send(k: int, fn: Any, *args: Any) -> Any:
    """rpc_async to server k: sending to a dead server can fail at once (a broken pipe), not
    only in the future's wait."""
    try:
        return rpc.rpc_async(f"ps{k}", fn, args=args)
    except RuntimeError as exc:
        raise _lost(k, exc) from None


def wait(future: Any, k: int) -> Any:
    try:
        return future.wait()
    except RuntimeError as exc:
        raise _lost(k, exc) from None


def _lost(k: int, exc: BaseException) -> PeerLost:
    return PeerLost(f"lost parameter server {k}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _group_lost(exc: BaseException) -> PeerLost:
    """The store lives on rank 0, the chief server: a store error means the chief is gone
    (a worker still building its groups when the chief died ended in a traceback)."""
    if isinstance(exc, dist.DistNetworkError):
        return PeerLost(f"lost parameter server 0, which holds the process group's store: {_first_line(exc)}")
    return PeerLost(f"lost a process of the group: {_first_line(exc)}")


def start(world: World, cfg: Config) -> list[list[int]]:
    """Join the gloo group and the RPC framework; returns the worker groups. Collectives and
    RPCs fail after --dist-timeout (RPC's own default, 60 s, is shorter than an evaluation on
    the chief while the workers wait for the next epoch)."""
    import os

    groups = worker_groups(world.size, cfg.run.num_ps, local_size(os.environ, world.size),
                           cfg.run.group_size, cfg.run.dist_mode)
    # torch 2.14 warns about its own object collectives on subgroups; nothing for us to change
    warnings.filterwarnings("ignore", message="You are using a Backend")
    worlds.join(world, "gloo", cfg.run.dist_timeout)
    addr_port = [None]
    if world.main:
        with socket.socket() as s:
            s.bind(("", 0))
            addr_port = [(socket.gethostname(), s.getsockname()[1])]
    dist.broadcast_object_list(addr_port, src=0)
    host, port = addr_port[0]
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://{host}:{port}",
                                              num_worker_threads=max(16, 4 * world.size),
                                              rpc_timeout=cfg.run.dist_timeout)
    name = f"ps{world.rank}" if world.rank < cfg.run.num_ps else f"worker{world.rank}"
    rpc.init_rpc(name, rank=world.rank, world_size=world.size, rpc_backend_options=options)
    _WAIT_S[0] = cfg.run.dist_timeout
    return groups


def stop(finished: bool = True) -> None:
    """Leave RPC and the group: after a normal finish wait for every process's outstanding
    calls; after a failure do not (the peers may be gone: it would wait for them). After a
    failure the teardown itself may fail (the store lived on a dead rank: 'Broken pipe'); that
    must not replace the error that says why the run ended."""
    try:
        rpc.shutdown(graceful=finished)
        if dist.is_initialized():
            dist.destroy_process_group()
    except RuntimeError:
        if finished:
            raise


def publish(server: Server) -> Server:
    global _SERVER
    _SERVER = server
    _READY.set()
    return server


def build_on_own_device(cfg: Config, world: World) -> tuple[Any, Any]:
    """Trainer and policy on this process's device: its local rank's GPU (or the one GPU a
    process sees), not GPU 0 for all; no DDP (the servers average, not backward)."""
    placed = copy.deepcopy(cfg)
    placed.run.device = worlds.device_for(world, cfg.run.device)
    return build(placed)


def train_ps(cfg: Config, world: World, command: str | None, resume_dir: Path | None = None) -> RunSummary | None:
    """One process of an async/mixed run: the chief serves, records and checkpoints; other
    servers serve their shard; the others work. Returns the summary on the chief."""
    from .chief import Peers, run_chief

    finished = False
    try:
        groups = start(world, cfg)
        trainer, policy = build_on_own_device(cfg, world)
        shards = Shards(list(trainer.model.parameters()), cfg.run.num_ps)
        subgroups = [dist.new_group(g) for g in groups]  # collective: every rank creates every group
        if world.main:
            peers = Peers(cfg.run.num_ps, lambda k, what, *args: call(k, _PEER_CALLS[what], *args))
            summary = run_chief(cfg, trainer, policy, world, len(groups), shards, command, resume_dir,
                                publish, peers)
        elif world.rank < cfg.run.num_ps:
            summary = None
            with checkpoint.StopRequest():  # the chief decides when to stop; signals reach it too
                publish(Server(trainer, shards, world.rank, cfg.run.dist_timeout)).wait_finished()
        else:
            summary = None
            work(cfg, trainer, policy, world, groups, subgroups, shards)
        finished = True
        return summary
    except (checkpoint.Interrupted, checkpoint.Diverged):
        finished = True  # an orderly stop: the chief released every process first
        raise
    except dist.DistError as exc:   # outside an RPC: in setup (new_group) or a group's collective
        raise _group_lost(exc) from None
    finally:
        stop(finished)


def work(cfg: Config, trainer: Any, policy: Any, world: World, groups: list[list[int]],
         subgroups: list[Any], shards: Shards) -> None:
    """A worker's whole run: fetch keep-list and weights, train its share, push, report."""
    index = next(i for i, g in enumerate(groups) if world.rank in g)
    members, group = groups[index], subgroups[index]
    me, leader = World(members.index(world.rank), len(members)), members[0]
    batch = cfg.train.batch_per_worker * len(members) if cfg.train.batch_per_worker else cfg.train.batch_size
    params, servers = list(trainer.model.parameters()), range(cfg.run.num_ps)
    versions = [0] * cfg.run.num_ps
    with checkpoint.StopRequest() as asked:
        epoch = call(0, _first_epoch)
        while epoch <= cfg.train.epochs:
            keep, weights, _, buffers, halt = call(0, _begin_epoch, epoch)
            if halt:
                return
            for k in servers:
                flat, versions[k] = call(k, _pull)
                shards.load(params, flat, k)
            load_flat(list(trainer.model.buffers()), buffers)
            gen = torch.Generator().manual_seed(cfg.run.seed * 100_003 + epoch)
            order = keep[torch.randperm(keep.numel(), generator=gen)][index::len(groups)]
            loss_sum, seen = 0.0, 0
            for idx in step_slices(order, batch, me):
                total, fresh = _train_step(trainer, policy, idx, weights, shards, members, group,
                                           world.rank == leader, versions, epoch)
                shards.load(params, fresh[:-len(versions)])
                versions[:] = [int(v) for v in fresh[-len(versions):]]
                loss_sum, seen = loss_sum + float(total[0]), seen + int(total[1])
            pending = policy.take_pending()
            for t in pending if len(members) > 1 else []:
                dist.all_reduce(t, group=group)
            if world.rank == leader:
                # RPC carries CPU tensors only (no TensorPipe device maps are set)
                call(0, _end_epoch, epoch, [t.cpu() for t in pending], loss_sum, seen,
                     flatten(list(trainer.model.buffers())).cpu(), asked.requested is not None)
            epoch += 1


def _train_step(trainer: Any, policy: Any, idx: torch.Tensor, weights: torch.Tensor | None, shards: Shards,
                members: list[int], group: Any, leads: bool, versions: list[int],
                epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of a worker: gradients, the group's average, the leader's pushes; returns
    (loss sum and samples of the group's batch, the fresh weights of every shard + versions)."""
    dev_idx = idx.to(trainer.device)
    losses = worker_step(trainer, dev_idx, weights)
    params = list(trainer.model.parameters())
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    total = torch.stack([losses.detach().sum().float(), torch.full((), float(idx.numel()), device=losses.device)])
    flat = torch.cat([shards.flatten(grads), total.float()]).cpu()   # one copy off the device
    if len(members) > 1:
        dist.all_reduce(flat, group=group)
        flat[:-2] /= len(members)
    total = flat[-2:]
    if policy.observes:
        policy.observe(dev_idx, losses.detach(), (total[0] / total[1]).to(losses.device))
    num_ps = len(versions)
    if leads:
        futures = [send(k, _push, shards.part(flat, k).clone(), versions[k], epoch) for k in range(num_ps)]
        replies = [wait(f, k) for k, f in enumerate(futures)]
        fresh = torch.cat([w for w, _ in replies] + [torch.tensor([float(v) for _, v in replies])])
    else:
        fresh = torch.empty(shards.bounds[-1][1] + num_ps)
    if len(members) > 1:  # the leader hands the fresh weights to its group
        dist.broadcast(fresh, src=members[0], group=group)
    return total, fresh


def worker_step(trainer: Any, idx: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Forward and backward of one batch, under the trainer's autocast (bf16 data on CUDA);
    `weights`: the plan's per-sample loss weights (InfoBatch), as the synchronous loop uses."""
    trainer.model.train()
    x = next(iter(trainer.data.batches([idx], trainer.generator)))   # device-resident or streamed
    x = x.contiguous(memory_format=trainer.memory_format)
    with trainer.autocast():
        losses = F.cross_entropy(trainer.model(x), trainer.data.train_y[idx], reduction="none")
    scaled = losses if weights is None else losses * weights[idx.cpu()].to(losses.device, losses.dtype)
    trainer.model.zero_grad(set_to_none=True)
    (scaled.sum() / idx.numel()).backward()
    return losses

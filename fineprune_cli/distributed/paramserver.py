"""Asynchronous and mixed parameter-server training on torch.distributed.rpc.

As in Campos et al. (2017): rank 0 is the parameter server (PS); the other ranks are workers.
- async: every worker computes gradients on its own batches and pushes them; the PS applies
  each push at once and sends back fresh weights, so a worker's gradient may be stale (PS
  version - the version the worker computed on; recorded per update).
- mixed: workers form groups (`run.group_size`, e.g. the GPUs of one node); a group averages
  its members' gradients synchronously (all_reduce in a subgroup) and its leader pushes them.
Fine-pruning: workers count DroppingCount on their own samples against their (group) batch
mean and send the counts at the end of each epoch; the PS sums them and chooses the next
epoch's keep-list, which all workers fetch. Epochs are aligned: a worker starts epoch e once
the PS has closed (evaluated and recorded) epoch e - 1. Tensors travel through CPU memory.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
import torch.nn.functional as F

from pathlib import Path

from ..engine.config import Config
from ..engine.record import EpochRow, RunRecord, RunSummary, Status, default_run_dir
from ..engine.session import Totals, build, new_summary, summarize
from ..engine.trainer import scheduled_lr
from ..engine.world import SINGLE, World, join, step_slices
from ..errors import ConfigError
from .server import PeerLost, Server

_SERVER: "Server | None" = None
_READY = threading.Event()  # set once the PS has built its model: workers may call earlier


def _server() -> Server:
    _READY.wait()
    return _SERVER


def _push(grads, buffers, version):
    return _server().push(grads, buffers, version)


def _begin_epoch(epoch):
    return _server().begin_epoch(epoch)


def _end_epoch(epoch, counts, loss_sum, samples):
    _server().end_epoch(epoch, counts, loss_sum, samples)


def _call(fn: Any, *args: Any) -> Any:
    """A worker's call to the server; a server that is gone or silent past the RPC timeout
    ends the worker with one line, not a TensorPipe traceback."""
    try:
        return rpc.rpc_sync("ps", fn, args=args)
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise PeerLost(f"lost the parameter server: {first}") from None


def start(world: World, mode: str, group_size: int, timeout_s: float) -> list[list[int]]:
    """Join the gloo group and the RPC framework; returns the worker groups (mixed) or singletons.
    Collectives and RPCs fail after `timeout_s` (RPC's own default, 60 s, is shorter than an
    evaluation on the server while the workers wait for the next epoch)."""
    # torch 2.14 warns about its own object collectives on subgroups; nothing for us to change
    warnings.filterwarnings("ignore", message="You are using a Backend")
    join(world, "gloo", timeout_s)
    addr_port = [None]
    if world.main:
        with socket.socket() as s:
            s.bind(("", 0))
            addr_port = [(socket.gethostname(), s.getsockname()[1])]
    dist.broadcast_object_list(addr_port, src=0)
    host, port = addr_port[0]
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://{host}:{port}",
                                              num_worker_threads=max(16, 4 * world.size),
                                              rpc_timeout=timeout_s)
    rpc.init_rpc("ps" if world.main else f"worker{world.rank}", rank=world.rank,
                 world_size=world.size, rpc_backend_options=options)
    workers = list(range(1, world.size))
    size = group_size if mode == "mixed" else 1
    return [workers[i:i + size] for i in range(0, len(workers), size)]


def stop(finished: bool = True) -> None:
    """Leave RPC and the group: after a normal finish wait for every process's outstanding
    calls; after a failure do not (the peers may be gone: it would wait for them)."""
    rpc.shutdown(graceful=finished)
    if dist.is_initialized():
        dist.destroy_process_group()


def serve(trainer: Any, policy: Any, pushers: int, timeout_s: float) -> Server:
    global _SERVER
    _SERVER = Server(trainer, policy, pushers, timeout_s)
    _READY.set()
    return _SERVER


def work(cfg: Config, trainer: Any, policy: Any, world: World, groups: list[list[int]]) -> None:
    """A worker's whole run: fetch keep-list and weights, train its share, push, report."""
    subgroups = [dist.new_group(g) for g in groups]  # every rank creates every group, in order
    index = next(i for i, g in enumerate(groups) if world.rank in g)
    members, group = groups[index], subgroups[index]
    me = World(members.index(world.rank), len(members))
    leader = members[0]
    for epoch in range(1, cfg.train.epochs + 1):
        keep, _, weights, version = _call(_begin_epoch, epoch)
        _load(trainer, weights)
        gen = torch.Generator().manual_seed(cfg.run.seed * 100_003 + epoch)
        order = keep[torch.randperm(keep.numel(), generator=gen)][index::len(groups)]
        loss_sum, seen = 0.0, 0
        for idx in step_slices(order, cfg.train.batch_size, me):
            losses = _step(trainer, idx.to(trainer.device))
            total = torch.stack([losses.sum().detach(), torch.tensor(float(idx.numel()))])
            grads = [p.grad.detach().cpu() for p in trainer.model.parameters()]
            if len(members) > 1:  # one flat all_reduce per step, not one per tensor
                flat = torch.cat([g.flatten() for g in grads] + [total])
                dist.all_reduce(flat, group=group)
                grads = _unflatten(flat[:-2] / len(members), grads)
                total = flat[-2:]
            if policy.observes:
                policy.observe(idx, losses.detach().cpu(), total[0] / total[1])
            state = list(trainer.model.state_dict().values())
            if world.rank == leader:
                buffers = [b.detach().cpu() for b in trainer.model.buffers()]
                new, version = _call(_push, grads, buffers, version)
                flat = torch.cat([w.flatten().float() for w in new] + [torch.tensor([float(version)])])
            else:
                flat = torch.empty(sum(t.numel() for t in state) + 1)
            if len(members) > 1:  # the leader hands the fresh weights to its group
                dist.broadcast(flat, src=leader, group=group)
            version = int(flat[-1])
            _load(trainer, _unflatten(flat[:-1], state))
            loss_sum, seen = loss_sum + float(total[0]), seen + int(total[1])
        pending = policy.take_pending()
        for t in pending if len(members) > 1 else []:
            dist.all_reduce(t, group=group)
        if world.rank == leader:
            _call(_end_epoch, epoch, pending, loss_sum, seen)


def _step(trainer: Any, idx: torch.Tensor) -> torch.Tensor:
    trainer.model.train()
    x = next(iter(trainer.data.batches([idx], trainer.generator)))   # device-resident or streamed
    losses = F.cross_entropy(trainer.model(x), trainer.data.train_y[idx], reduction="none")
    trainer.model.zero_grad(set_to_none=True)
    (losses.sum() / idx.numel()).backward()
    return losses


def _unflatten(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    out, i = [], 0
    for t in like:
        out.append(flat[i:i + t.numel()].view(t.shape).to(t.dtype))
        i += t.numel()
    return out


def _load(trainer: Any, weights: list[torch.Tensor]) -> None:
    state = trainer.model.state_dict()
    with torch.no_grad():
        for t, w in zip(state.values(), weights):
            t.copy_(w)


def train_ps(cfg: Config, world: World, command: str | None) -> RunSummary:
    """One process of an async/mixed run: rank 0 serves and records, the others work."""
    if world.size < 2:
        raise ConfigError(f"--dist-mode {cfg.run.dist_mode} needs at least 2 processes (a server and a worker)")
    groups = start(world, cfg.run.dist_mode, cfg.run.group_size, cfg.run.dist_timeout)
    finished = False
    try:
        trainer, policy = build(cfg, SINGLE)
        if not world.main:
            work(cfg, trainer, policy, world, groups)
            finished = True
            return None
        for g in groups:
            dist.new_group(g)  # collective: the workers create these too
        summary = _serve_epochs(cfg, trainer, policy, world, groups, command)
        finished = True
        return summary
    finally:
        stop(finished)


def _serve_epochs(cfg: Config, trainer: Any, policy: Any, world: World, groups: list[list[int]],
                  command: str | None) -> RunSummary:
    path = Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset)
    record = RunRecord(path, fresh=True)
    record.write_config(cfg.to_dict())
    summary = new_summary(cfg, trainer.device, record.path, trainer.data.num_train, world.size, command)
    summary.extra.update(dist_mode=cfg.run.dist_mode, workers=world.size - 1, groups=len(groups))
    record.write_summary(summary)  # 'incomplete' from the start, as in the sync mode
    server = serve(trainer, policy, len(groups), cfg.run.dist_timeout)
    totals = Totals()
    for epoch in range(1, cfg.train.epochs + 1):
        loss_sum, samples = server.wait_epoch(epoch)
        t1 = time.perf_counter()
        t0 = server.started[epoch]  # workers' start-up is not training time
        test_loss, test_acc = trainer.evaluate()
        totals.train_s += t1 - t0
        totals.eval_s += time.perf_counter() - t1
        totals.rows.append(EpochRow(
            epoch=epoch, lr=scheduled_lr(cfg.train, epoch), samples=samples,
            train_seconds=round(t1 - t0, 4), train_loss=loss_sum / max(samples, 1),
            test_loss=test_loss, test_accuracy=test_acc, pruned=int(server.keep[epoch].pruned),
            overhead_seconds=0.0))
        window = policy.snapshot_due(epoch, cfg.train.epochs)
        if window is not None and policy.scores is not None:
            record.save_scores(window, policy.scores, policy.score_name)
        summarize(summary, totals)
        st = server.staleness
        summary.extra.update(updates=len(st), staleness_mean=round(sum(st) / max(len(st), 1), 3),
                             staleness_max=max(st, default=0))
        record.write_metrics(totals.rows)
        record.write_summary(summary)
        server.close_epoch(epoch)
    summary.status, summary.finished = Status.COMPLETE, time.strftime("%Y-%m-%dT%H:%M:%S")
    record.write_summary(summary)
    record.close()
    return summary

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
A message is one flat buffer per server (CPU memory), never one per tensor; RPC meets through
the process group's store. Workers: distributed/worker.py; servers: server.py; the chief: chief.py.
"""

from __future__ import annotations

import copy
import os
import threading
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc

from ..engine.records.record import RunSummary
from ..engine.setup.config import Config
from ..engine.training import checkpoint
from ..engine.training import world as worlds
from ..engine.training.build import build_model, trainer_and_policy
from ..engine.training.checkpoint import to_device
from ..engine.training.lrschedule import warmup_length
from ..engine.training.world import World
from .layout import Shards, gpu_placement, local_size, worker_groups
from .server import ModelHost, PeerLost, Server, group_lost, server_lost
from .worker import work

_SERVER: "Server | None" = None
_READY = threading.Event()  # set once this server is built: workers may call earlier
_WAIT_S = [1800.0]


def _server() -> Server:
    if not _READY.wait(_WAIT_S[0]):
        raise PeerLost("the parameter server was not ready within --dist-timeout")
    return _SERVER


# what runs on a server when a worker (or the chief) calls it
def _push(grads, version, epoch, lr=None):
    return _server().push(grads, version, epoch, lr)


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
    try:  # RPC carries CPU tensors only (no device maps are set): a CUDA state would fail it
        return rpc.rpc_async(f"ps{k}", fn, args=to_device(args, "cpu"))
    except RuntimeError as exc:
        raise server_lost(k, exc) from None


def wait(future: Any, k: int) -> Any:
    try:
        return future.wait()
    except RuntimeError as exc:
        raise server_lost(k, exc) from None


def start(world: World, cfg: Config) -> list[list[int]]:
    """Join the gloo group and the RPC framework; returns the worker groups. Collectives and
    RPCs fail after --dist-timeout (RPC's own default, 60 s, is shorter than an evaluation on
    the chief while the workers wait for the next epoch). RPC meets through the group's own
    store, so no second port is picked (a port found free, closed and bound again later could
    be taken in between)."""
    groups = worker_groups(
        world.size, cfg.run.num_ps, local_size(os.environ, world.size), cfg.run.group_size, cfg.run.dist_mode
    )
    # torch 2.14 warns about its own object collectives on subgroups; nothing for us to change
    warnings.filterwarnings("ignore", message="You are using a Backend")
    # imported before joining, not in the build after it: the optimizer imports torch._dynamo
    # lazily (~4 s on a loaded 2-core machine), and a server waiting in the first collective
    # for the chief's build timed out on CI
    import torch._dynamo  # noqa: F401

    timeout = timedelta(seconds=cfg.run.dist_timeout)
    _STORE[:] = [worlds.group_store(world, timeout)]  # a restarted rank's: none of a dead attempt's keys
    dist.init_process_group("gloo", store=_STORE[0], rank=world.rank, world_size=world.size, timeout=timeout)
    if STORE_SCHEME not in _registered:
        dist.register_rendezvous_handler(STORE_SCHEME, _group_store)
        _registered.add(STORE_SCHEME)
    # TCP (libuv) for RPC's messages: TensorPipe's default shared-memory transport polls without
    # sleeping, ~40% of a core in every process for the whole run, idle waits included (tensors
    # still go through its channels, same-host copies among them)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"{STORE_SCHEME}://",
        num_worker_threads=max(16, 4 * world.size),
        rpc_timeout=cfg.run.dist_timeout,
        _transports=["uv"],
    )
    name = f"ps{world.rank}" if world.rank < cfg.run.num_ps else f"worker{world.rank}"
    rpc.init_rpc(name, rank=world.rank, world_size=world.size, rpc_backend_options=options)
    _WAIT_S[0] = cfg.run.dist_timeout
    return groups


STORE_SCHEME = "fineprune-group-store"
_STORE: list[Any] = []  # the process group's store, which RPC shares (kept alive here)
_registered: set[str] = set()


def _group_store(url: str, **kwargs: Any) -> Any:
    """A rendezvous handler that hands RPC the store of the group already joined (RPC keys
    it under a prefix of its own)."""
    query = dict(pair.split("=") for pair in url.partition("?")[2].split("&") if "=" in pair)
    yield _STORE[0], int(query["rank"]), int(query["world_size"])


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


class RpcServers:
    """A worker's calls to the servers (worker.ServerCalls) over RPC."""

    def first_epoch(self) -> int:
        return call(0, _first_epoch)

    def begin_epoch(self, epoch: int) -> tuple[Any, ...]:
        return call(0, _begin_epoch, epoch)

    def pull(self, k: int) -> tuple[torch.Tensor, int]:
        return call(k, _pull)

    def push(
        self, parts: list[torch.Tensor], versions: list[int], epoch: int, lr: float | None = None
    ) -> list[tuple[torch.Tensor, int]]:
        futures = [send(k, _push, part, versions[k], epoch, lr) for k, part in enumerate(parts)]
        return [wait(f, k) for k, f in enumerate(futures)]

    def end_epoch(
        self, epoch: int, counts: list[torch.Tensor], loss_sum: float, samples: int, buffers: torch.Tensor, stop: bool
    ) -> None:
        call(0, _end_epoch, epoch, counts, loss_sum, samples, buffers, stop)


def own_device(cfg: Config, world: World) -> str:
    """This process's device: a server's is the CPU under --ps-device cpu; a worker takes its
    node's next GPU (its local rank among the GPU-holding processes), not GPU 0 for all."""
    placed = gpu_placement(world, local_size(os.environ, world.size), cfg.run.num_ps, cfg.run.ps_device)
    return "cpu" if placed is None else worlds.device_for(placed, cfg.run.device)


def group_backend(cfg: Config, cuda: bool | None = None, shared: bool = False) -> str:
    """The mixed groups' backend, the same on every rank: NCCL when the workers hold GPUs of
    their own (the average stays on the device), else gloo (on the CPU, or where workers share
    a GPU, which NCCL refuses; gloo reduces CUDA tensors through the host)."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    on_gpu = cuda and (cfg.run.device in ("auto", "cuda") or cfg.run.device.startswith("cuda:"))
    return "nccl" if on_gpu and not shared and cfg.run.dist_mode == "mixed" else "gloo"


def shares_a_gpu(cfg: Config, world: World) -> bool:
    """Whether two processes of this run hold one GPU (after `start`: through its store; every
    process of a GPU job posts, servers on the CPU too, so none waits for a missing answer)."""
    if not torch.cuda.is_available():
        return False
    return worlds.shared_gpu(_STORE[0], world, worlds.gpu_id(own_device(cfg, world)))


def build_on_own_device(cfg: Config, world: World) -> tuple[Any, Any]:
    """Trainer and policy (the chief and the workers) on this process's device; no DDP (the
    servers average, not backward)."""
    placed = copy.deepcopy(cfg)
    placed.run.device = own_device(cfg, world)
    if world.rank < cfg.run.num_ps:
        placed.run.compile = False  # the chief only evaluates, once an epoch
    return trainer_and_policy(placed)


def share_sizes(trainer: Any | None) -> tuple[int, int, int]:
    """(channels, classes, training samples) from the chief, which loaded the data, to the
    servers that do not (a collective: every rank calls it)."""
    sizes = [None]
    if trainer is not None and dist.get_rank() == 0:
        sizes = [(trainer.channels, trainer.classes, trainer.data.num_train)]
    dist.broadcast_object_list(sizes, src=0)
    return sizes[0]


def model_host(cfg: Config, world: World, sizes: tuple[int, int, int]) -> ModelHost:
    """A server other than the chief: the model (initialised as the chief's) on its device."""
    channels, classes, num_train = sizes
    device = torch.device(own_device(cfg, world))
    worlds.place(device)
    model = build_model(cfg, channels, classes).to(device)
    return ModelHost(model, cfg.train, warmup_length(cfg.train, num_train))


def train_ps(cfg: Config, world: World, command: str | None, resume_dir: Path | None = None) -> RunSummary | None:
    """One process of an async/mixed run: the chief serves, records and checkpoints; other
    servers serve their shard (without loading the data); the others work. Returns the
    summary on the chief."""
    from .chief import Peers, run_chief

    finished = False
    try:
        groups = start(world, cfg)
        backend = group_backend(cfg, shared=shares_a_gpu(cfg, world))
        serves_only = 0 < world.rank < cfg.run.num_ps
        if backend == "nccl" and world.rank >= cfg.run.num_ps:
            worlds.place(torch.device(own_device(cfg, world)))  # NCCL binds the current GPU
        subgroups = [dist.new_group(g, backend=backend) for g in groups]  # every rank creates every group
        trainer, policy = (None, None) if serves_only else build_on_own_device(cfg, world)
        sizes = share_sizes(trainer)
        host = model_host(cfg, world, sizes) if serves_only else trainer
        shards = Shards(list(host.model.parameters()), cfg.run.num_ps)
        if world.main:
            peers = Peers(cfg.run.num_ps, lambda k, what, *args: call(k, _PEER_CALLS[what], *args))
            summary = run_chief(cfg, trainer, policy, world, len(groups), shards, command, resume_dir, publish, peers)
        elif serves_only:
            summary = None
            with checkpoint.StopRequest():  # the chief decides when to stop; signals reach it too
                publish(Server(host, shards, world.rank, cfg.run.dist_timeout)).wait_finished()
        else:
            summary = None
            work(cfg, trainer, policy, world, groups, subgroups, shards, RpcServers())
        finished = True
        return summary
    except (checkpoint.Interrupted, checkpoint.Diverged):
        finished = True  # an orderly stop: the chief released every process first
        raise
    except RuntimeError as exc:  # outside an RPC: in setup (new_group) or a group's collective
        lost = group_lost(exc, cfg.run.dist_timeout)
        if lost is None:
            raise
        raise lost from None
    finally:
        stop(finished)

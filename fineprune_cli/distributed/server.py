"""The parameter servers' state. RPC handler threads call into it; a server's main thread
waits. `Server` holds one shard of the parameters and steps its optimizer on each push;
`Chief` (server 0) also runs the epochs: keep-lists, the barrier between epochs, the counts
the workers send. Every wait is bounded, so a dead process ends the run with a clear message."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..engine.setup.config import TrainConfig
from ..engine.training.checkpoint import to_device
from ..engine.training.lrschedule import lr_at
from ..errors import FinepruneError
from .layout import Shards, flatten, load_flat


class PeerLost(FinepruneError):
    """A worker or the server fell silent for longer than --dist-timeout: the run stops."""

    exit_code = 1


def server_lost(k: int, exc: BaseException) -> PeerLost:
    return PeerLost(f"lost parameter server {k}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# what gloo's TCP transport says, in a plain RuntimeError (not a DistError), when a peer is gone
_GLOO_PEER_GONE = ("Connection closed by peer", "Connection reset by peer")
# and when a collective waited past the group's timeout
_GLOO_TIMED_OUT = "Timed out waiting"


def group_lost(exc: BaseException, timeout_s: float) -> PeerLost | None:
    """The store lives on rank 0, the chief server: a store error means the chief is gone
    (a worker still building its groups when the chief died ended in a traceback). None: not
    a peer's fault (a bug, which keeps its traceback)."""
    if isinstance(exc, dist.DistNetworkError):
        return PeerLost(f"lost parameter server 0, which holds the process group's store: {_first_line(exc)}")
    if _GLOO_TIMED_OUT in str(exc):
        return PeerLost(
            f"waited {timeout_s:g} s (--dist-timeout) for the other processes: one died, hangs or is still "
            f"setting up: {_first_line(exc)}"
        )
    if isinstance(exc, dist.DistError) or any(m in str(exc) for m in _GLOO_PEER_GONE):
        return PeerLost(f"lost a process of the group: {_first_line(exc)}")
    return None


@dataclass
class ModelHost:
    """What a server other than the chief needs of a trainer: the model (for its shard), the
    training settings and the warm-up length. It loads no data (the chief sends the sizes)."""

    model: torch.nn.Module
    cfg: TrainConfig
    warmup_steps: int


class Server:
    """Shard `k` of the model's parameters and an SGD optimizer over it alone (the same
    hyperparameters as the single-process run: K servers make the same updates as one).
    `trainer`: a Trainer (the chief) or a ModelHost. What it hands out is on the CPU, wherever
    its shard lives: RPC carries CPU tensors only (no TensorPipe device maps are set)."""

    def __init__(self, trainer: Any, shards: Shards, k: int = 0, timeout_s: float = 1800.0):
        self.trainer, self.shards, self.k, self.timeout_s = trainer, shards, k, timeout_s
        params = list(trainer.model.parameters())
        self.params = [params[i] for i in shards.members[k]]
        c = trainer.cfg
        self.optimizer = torch.optim.SGD(
            self.params or [torch.zeros(1, requires_grad=True)],
            lr=c.lr,
            momentum=c.momentum,
            weight_decay=c.weight_decay,
        )
        self.cond = threading.Condition()
        self.version, self.steps = 0, 0
        self.stale = {"sum": 0, "count": 0, "max": 0}  # versions a push's weights were behind
        self.heard = time.monotonic()  # the last call from any process
        self.finished = False

    def push(self, grads: torch.Tensor, version: int, epoch: int, lr: float | None = None) -> tuple[torch.Tensor, int]:
        """Apply one (group's) gradient; returns this shard's fresh weights and version. `lr`:
        the epoch's lr before warm-up, as the chief set it (default: the milestone schedule)."""
        t = self.trainer
        with self.cond:
            self.heard = time.monotonic()
            behind = self.version - version
            self.stale = {
                "sum": self.stale["sum"] + behind,
                "count": self.stale["count"] + 1,
                "max": max(self.stale["max"], behind),
            }
            for group in self.optimizer.param_groups:
                group["lr"] = lr_at(t.cfg, epoch, self.steps, t.warmup_steps, lr)
            at = 0
            for p in self.params:
                p.grad = grads[at : at + p.numel()].view(p.shape).to(p.device, p.dtype)
                at += p.numel()
            self.optimizer.step()
            self.steps += 1
            self.version += 1
            return self._weights(), self.version

    def pull(self) -> tuple[torch.Tensor, int]:
        with self.cond:
            self.heard = time.monotonic()
            return self._weights(), self.version

    def _weights(self) -> torch.Tensor:
        return flatten(self.params).cpu()  # one copy off the device per message

    def state_dict(self) -> dict[str, Any]:
        with self.cond:
            self.heard = time.monotonic()
            return {
                "weights": self._weights(),
                "optimizer": to_device(self.optimizer.state_dict(), "cpu"),
                "version": self.version,
                "steps": self.steps,
                "stale": dict(self.stale),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self.cond:
            self.heard = time.monotonic()
            load_flat(self.params, state["weights"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.version, self.steps, self.stale = state["version"], state["steps"], dict(state["stale"])

    def finish(self) -> None:
        with self.cond:
            self.finished = True
            self.cond.notify_all()

    def wait_finished(self) -> None:
        """A server other than the chief: serve until the chief says the run is over, or
        until nobody has called for --dist-timeout (the chief or every worker died)."""
        with self.cond:
            while not self.finished:
                left = self.heard + self.timeout_s - time.monotonic()
                if left <= 0:
                    raise PeerLost(
                        f"parameter server {self.k}: no call for {self.timeout_s:g} s "
                        "(--dist-timeout): the chief server or the workers died; run stopped"
                    )
                self.cond.wait(left)


class Chief(Server):
    """Server 0: also the epochs. A worker starts epoch e once epoch e - 1 is closed
    (evaluated and recorded); `stopping` tells the workers to return instead."""

    def __init__(
        self, trainer: Any, shards: Shards, policy: Any, pushers: int, timeout_s: float = 1800.0, first_epoch: int = 1
    ):
        super().__init__(trainer, shards, 0, timeout_s)
        self.policy, self.pushers, self.first_epoch = policy, pushers, first_epoch
        self.closed, self.stopping = first_epoch - 1, False
        self.plans: dict[int, Any] = {}
        self.lrs: dict[int, float] = {}  # each epoch's lr before warm-up (lr_for)
        self.lr_for: Any = None  # (epoch, plan) -> that lr; set by the run (None: the milestones)
        self.started: dict[int, float] = {}  # when the first worker began each epoch
        self.ended: dict[int, list[tuple[Any, ...]]] = {}

    def begin_epoch(
        self, epoch: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, bool, torch.Tensor, float | None, bool]:
        """(kept indices, their weights or None, pruned?, batch-norm buffers, the epoch's lr, stop?)"""
        with self.cond:
            self.heard = time.monotonic()
            if not self.cond.wait_for(lambda: self.closed >= epoch - 1, self.timeout_s):
                raise PeerLost(
                    f"the server did not close epoch {epoch - 1} within --dist-timeout "
                    f"{self.timeout_s:g} s (a worker died or hangs, or the server did)"
                )
            buffers = flatten(list(self.trainer.model.buffers())).cpu()
            if self.stopping:
                return torch.zeros(0, dtype=torch.long), None, False, buffers, None, True
            self.started.setdefault(epoch, time.perf_counter())
            if epoch not in self.plans:
                self.plans[epoch] = plan = self.policy.plan(epoch)
                self.lrs[epoch] = self.lr_for(epoch, plan) if self.lr_for is not None else None
            plan = self.plans[epoch]
            weights = None if plan.weights is None else plan.weights.cpu()
            return plan.indices.cpu(), weights, bool(plan.pruned), buffers, self.lrs[epoch], False

    def end_epoch(
        self,
        epoch: int,
        pending: list[torch.Tensor],
        loss_sum: float,
        samples: int,
        buffers: torch.Tensor,
        stop: bool = False,
    ) -> None:
        with self.cond:
            self.heard = time.monotonic()
            # batch-norm statistics: the last group to end the epoch wins, as a push did before
            load_flat(list(self.trainer.model.buffers()), buffers)
            self.ended.setdefault(epoch, []).append((pending, loss_sum, samples, stop))
            self.cond.notify_all()

    def wait_epoch(self, epoch: int) -> tuple[float, int, bool]:
        """Main thread: wait for every pusher's end of `epoch`; fold in the sum of what the
        workers observed, as a data-parallel sync would. Returns (loss sum, samples, whether
        a worker was asked to stop)."""
        with self.cond:
            while len(self.ended.get(epoch, [])) < self.pushers:
                # a dead worker never ends its epoch; the live ones then wait for the next
                # one and fall silent too: silence, not the epoch's length, is the sign
                left = self.heard + self.timeout_s - time.monotonic()
                if left <= 0:
                    raise PeerLost(
                        f"epoch {epoch}: {len(self.ended.get(epoch, []))} of {self.pushers} workers "
                        f"(groups) ended it and none has called for {self.timeout_s:g} s "
                        "(--dist-timeout): a worker died or hangs; run stopped"
                    )
                self.cond.wait(left)
            parts = self.ended.pop(epoch)
        pending = [p[0] for p in parts if p[0]]
        if pending:
            self.policy.fold([sum(ts).to(self.trainer.device) for ts in zip(*pending)])
        return sum(p[1] for p in parts), sum(p[2] for p in parts), any(p[3] for p in parts)

    def close_epoch(self, epoch: int, stop: bool = False) -> None:
        with self.cond:
            self.closed, self.stopping = epoch, self.stopping or stop
            self.heard = time.monotonic()  # the workers waited for us (evaluation): not silence
            self.cond.notify_all()

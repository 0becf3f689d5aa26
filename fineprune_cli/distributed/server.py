"""The parameter server's state: the model the workers push to, each epoch's keep-list, and
the epoch barrier. RPC handler threads call into it; the PS's main thread closes epochs.
Every wait is bounded, so a dead process ends the run with a clear message."""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

from ..engine.trainer import lr_at
from ..errors import FinepruneError


class PeerLost(FinepruneError):
    """A worker or the server fell silent for longer than --dist-timeout: the run stops."""

    exit_code = 1


class Server:
    """The PS's state; RPC handler threads call into it, the PS's main thread closes epochs.
    Every wait is bounded by `timeout_s`, so a dead process ends the run instead of hanging it."""

    def __init__(self, trainer: Any, policy: Any, pushers: int, timeout_s: float = 1800.0):
        self.trainer, self.policy, self.pushers = trainer, policy, pushers
        self.timeout_s = timeout_s
        self.heard = time.monotonic()  # the last call from any worker
        self.epoch = 1
        self.cond = threading.Condition()
        self.version, self.staleness, self.closed = 0, [], 0
        self.keep: dict[int, torch.Tensor] = {}
        self.started: dict[int, float] = {}  # when the first worker began each epoch
        self.ended: dict[int, list[tuple[torch.Tensor | None, float, int]]] = {}

    def weights(self) -> list[torch.Tensor]:
        return [t.detach().cpu().clone() for t in self.trainer.model.state_dict().values()]

    def push(self, grads: list[torch.Tensor], buffers: list[torch.Tensor], version: int):
        t = self.trainer
        with self.cond:
            self.heard = time.monotonic()
            self.staleness.append(self.version - version)
            t.set_lr(lr_at(t.cfg, self.epoch, t.steps, t.warmup_steps))
            for p, g in zip(t.model.parameters(), grads):
                p.grad = g.to(p.device)
            t.optimizer.step()
            t.steps += 1
            for b, new in zip(t.model.buffers(), buffers):  # batch-norm statistics: last push wins
                b.copy_(new)
            self.version += 1
            return self.weights(), self.version

    def begin_epoch(self, epoch: int):
        with self.cond:
            self.heard = time.monotonic()
            if not self.cond.wait_for(lambda: self.closed >= epoch - 1, self.timeout_s):
                raise PeerLost(f"the server did not close epoch {epoch - 1} within --dist-timeout "
                               f"{self.timeout_s:g} s (a worker died or hangs, or the server did)")
            self.started.setdefault(epoch, time.perf_counter())
            if epoch not in self.keep:
                self.keep[epoch] = self.policy.plan(epoch)
                self.epoch = epoch
            plan = self.keep[epoch]
            return plan.indices.cpu(), plan.pruned, self.weights(), self.version

    def end_epoch(self, epoch: int, pending: list[torch.Tensor], loss_sum: float, samples: int) -> None:
        with self.cond:
            self.heard = time.monotonic()
            self.ended.setdefault(epoch, []).append((pending, loss_sum, samples))
            self.cond.notify_all()

    def wait_epoch(self, epoch: int) -> tuple[float, int]:
        """Main thread: wait for every pusher's end of `epoch`; fold in the sum of what the
        workers observed, as a data-parallel sync would."""
        with self.cond:
            while len(self.ended.get(epoch, [])) < self.pushers:
                # a dead worker never ends its epoch; the live ones then wait for the next
                # one and fall silent too: silence, not the epoch's length, is the sign
                left = self.heard + self.timeout_s - time.monotonic()
                if left <= 0:
                    raise PeerLost(
                        f"epoch {epoch}: {len(self.ended.get(epoch, []))} of {self.pushers} workers "
                        f"(groups) ended it and none has called for {self.timeout_s:g} s "
                        "(--dist-timeout): a worker died or hangs; run stopped")
                self.cond.wait(left)
            parts = self.ended.pop(epoch)
        pending = [p[0] for p in parts if p[0]]
        if pending:
            self.policy.fold([sum(ts).to(self.trainer.device) for ts in zip(*pending)])
        return sum(p[1] for p in parts), sum(p[2] for p in parts)

    def close_epoch(self, epoch: int) -> None:
        with self.cond:
            self.closed = epoch
            self.heard = time.monotonic()  # the workers waited for us (evaluation): not silence
            self.cond.notify_all()

"""The end of an epoch, one for every loop: the single-process and data-parallel loop
(loop.py) and the parameter-server chief (distributed/chief.py) hand it what they measured,
and it writes the row, brings the totals and summary up to date, tests for divergence, saves
the score snapshot, writes the metrics, checkpoints when due and stops on a request with the
command that resumes the run. A change to what an epoch's end records is made here once."""

from __future__ import annotations

import math
import shlex
import time
from dataclasses import dataclass
from typing import Any, Callable

from ...pruning.policy import Policy
from ..records.fingerprint import fingerprint
from ..records.record import EpochRow, RunRecord, RunSummary, Status, finite
from ..setup.config import Config
from . import checkpoint
from .totals import Totals, mark_diverged, summarize
from .world import World


@dataclass(frozen=True)
class Measured:
    """One epoch as its loop measured it."""

    epoch: int
    lr: float
    samples: int
    loss_sum: float  # the training loss summed over the epoch's samples
    pruned: bool
    started: float  # time.perf_counter() when the epoch's training began
    trained: float  # ... when it ended (a policy's forward-only pass included), before evaluation
    test_loss: float
    test_accuracy: float
    policy_s: float | None = None  # the run's time inside the policy so far; None: not timed
    cpu_s: float | None = None  # the process's CPU seconds from `started` to `trained`; None: not timed (a GPU run)


def resume_command(record: RunRecord, world: World) -> str:
    """The command that continues the run, with as many processes as it was started with (on
    several machines: as many on each, the machine's own rank and the group's endpoint to fill in)."""
    words = ["fineprune", "train", "--resume", str(record.path)]
    if world.nodes > 1:
        words += ["--nproc-per-node", str(world.size // world.nodes), "--nnodes", str(world.nodes)]
        rest = " --node-rank NODE_RANK --rdzv-endpoint HOST:PORT"
        return f"continue with, on each of its {world.nodes} machines: {shlex.join(words)}{rest}"
    if world.active:
        words += ["--nproc-per-node", str(world.size)]
    return f"continue with: {shlex.join(words)}"


def _nothing() -> None:
    return None


@dataclass
class EpochEnd:
    """What the end of an epoch needs of a run, and the loop's own parts: `state` is what a
    checkpoint holds besides the policy, the totals and the fingerprint; `agree` turns this
    process's wish to stop into the run's decision (the ranks agree; a worker asked);
    `others` says who else can ask; `release` lets the other processes go before the run ends
    early; `bar`, if any, advances once per epoch."""

    cfg: Config
    record: RunRecord
    summary: RunSummary
    totals: Totals
    policy: Policy
    world: World
    stop: checkpoint.StopRequest
    state: Callable[[], dict[str, Any]]
    agree: Callable[[bool], bool] = bool
    others: str = "another rank"
    release: Callable[[], None] = _nothing
    bar: Any = None

    def close(self, m: Measured) -> None:
        """Record epoch `m`; raises Diverged on a non-finite loss, Stopped on a stop request."""
        totals, record, summary, n = self.totals, self.record, self.summary, self.cfg.train.epochs
        row = EpochRow(
            epoch=m.epoch,
            lr=m.lr,
            samples=m.samples,
            train_seconds=round(m.trained - m.started, 4),
            train_loss=m.loss_sum / max(m.samples, 1),
            test_loss=m.test_loss,
            test_accuracy=m.test_accuracy,
            pruned=int(m.pruned),
            overhead_seconds=0.0 if m.policy_s is None else round(m.policy_s - totals.overhead_s, 5),
            cpu_seconds=math.nan if m.cpu_s is None else round(m.cpu_s, 4),
        )
        totals.rows.append(row)
        totals.train_s += m.trained - m.started
        totals.eval_s += time.perf_counter() - m.trained
        if m.policy_s is not None:
            totals.overhead_s = m.policy_s
        if not (finite(row.train_loss) and finite(row.test_loss)):
            diverged = mark_diverged(record, summary, totals, row)
            self.release()
            raise diverged
        window = self.policy.snapshot_due(m.epoch, n)
        if window is not None and self.policy.scores is not None:
            record.save_scores(window, self.policy.scores, self.policy.score_name)
        summarize(summary, totals)
        record.write_metrics(totals.rows)
        if self.bar is not None:
            self.bar.advance(f"acc {m.test_accuracy:.2f}%")
        stopping = self.agree(self.stop.requested is not None)
        every = self.cfg.run.checkpoint_every
        if stopping or m.epoch == n or (every and m.epoch % every == 0):
            self._checkpoint()
        record.write_summary(summary)
        if stopping and m.epoch < n:
            summary.status = Status.INTERRUPTED
            record.write_summary(summary)
            self.release()
            raise checkpoint.Stopped(
                f"{self.stop.requested or f'a signal to {self.others}'}: stopped after epoch {m.epoch} of {n}; "
                f"{resume_command(record, self.world)}"
            )

    def _checkpoint(self) -> None:
        if not self.world.main:  # every rank holds the same state: one writes it
            return
        state = {
            **self.state(),
            "policy": self.policy.state_dict(),
            "totals": self.totals.state_dict(),
            "fingerprint": fingerprint(self.cfg.to_dict(), self.summary.data),
        }
        checkpoint.save(self.record.path, state)

"""The one training loop of single-process and data-parallel (DDP) runs, epoch after epoch,
and how a run ends: complete, interrupted (resumable), diverged, or stopped by a full disk or
out of memory with its records whole."""

from __future__ import annotations

import shlex
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from .. import console
from ..pruning.policy import Policy
from . import checkpoint, world as worlds
from .config import Config
from .device import Stopwatch, synchronize
from .fingerprint import fingerprint
from .lrschedule import lr_schedule
from .record import CHECKPOINT, EpochRow, RunRecord, RunSummary, Status, finite
from .scalars import ScalarLog
from .totals import Totals, mark_diverged, summarize
from .trainer import Trainer
from .world import World


@dataclass
class Session:
    """One run being trained in this process: its config, record, working parts and figures."""

    cfg: Config
    record: RunRecord
    trainer: Trainer
    policy: Policy
    summary: RunSummary
    totals: Totals
    world: World = worlds.SINGLE


def run_session(s: Session, show_progress: bool, bar: Any) -> RunSummary:
    """`fit` to the run's last epoch, then the record made complete; a full disk, an out-of-memory
    error or a second Ctrl-C end in one line that says what is kept and how to go on."""
    finished = False
    try:
        s.record.scalars = ScalarLog.open(s.cfg.run.tensorboard and s.world.main, s.record.path, len(s.totals.rows))
        with checkpoint.StopRequest() as stop:
            own_bar = console.progress(
                s.cfg.train.epochs, f"{s.cfg.model.name} on {s.cfg.data.dataset}", show_progress and s.world.main
            )
            with nullcontext(bar) if bar is not None else own_bar as epoch_bar:
                fit(s, stop, epoch_bar)
        s.summary.status = Status.COMPLETE
        s.summary.finished = time.strftime("%Y-%m-%dT%H:%M:%S")
        s.record.write_summary(s.summary)
        finished = True
        return s.summary
    except OSError as exc:  # every record is written atomically, so what is there stays whole
        raise checkpoint.StorageFull(
            f"cannot write {exc.filename or s.record.path}: {exc.strerror or exc}; the records already "
            f"written are whole; make room, then {_resume_hint(s)}"
        ) from None
    except (MemoryError, RuntimeError) as exc:  # CUDA: torch.OutOfMemoryError; CPU: the allocator's RuntimeError
        if not isinstance(exc, (MemoryError, torch.OutOfMemoryError)) and "can't allocate memory" not in str(exc):
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise checkpoint.OutOfMemory(
            f"out of memory while training ({reason.split('. ')[-1][:160]}): lower --batch-size or "
            f"--image-size; the records written so far in {s.record.path} are whole"
        ) from None
    except KeyboardInterrupt:  # a second Ctrl-C: the epochs since the last checkpoint are lost
        if s.world.main and (s.record.path / CHECKPOINT).exists():
            hint = f"{_resume_hint(s)} (from its last checkpoint)"
        else:
            hint = f"no epoch was checkpointed yet: delete {shlex.quote(str(s.record.path))} and train again"
        raise checkpoint.Interrupted(f"interrupted again before the epoch's checkpoint; {hint}") from None
    finally:
        worlds.shutdown(finished)


def _resume_hint(s: Session) -> str:
    return f"continue with: fineprune train --resume {shlex.quote(str(s.record.path))}"


def fit(s: Session, stop: checkpoint.StopRequest, bar: Any) -> None:
    """The epochs from the first not yet done to the last: plan -> train -> sync -> evaluate ->
    row -> snapshot -> checkpoint -> stop test."""
    trainer, policy, totals, n = s.trainer, s.policy, s.totals, s.cfg.train.epochs
    schedule = lr_schedule(s.cfg.train, policy, trainer.data.num_train)
    watch = Stopwatch(trainer.device, totals.overhead_s)
    observe = _timed(policy.observe, watch) if policy.observes else None
    reduce = (lambda t: worlds.all_sum(t, s.world)) if s.world.active else None
    console.resumed(bar, len(totals.rows))
    for epoch in range(len(totals.rows) + 1, n + 1):
        synchronize(trainer.device)
        t0 = time.perf_counter()
        with watch.section():
            plan = policy.plan(epoch)
        lr = schedule.at(epoch, plan.samples, [r.samples for r in totals.rows]).value(s.cfg.train)
        first = trainer.steps
        with console.step_view(
            bar, trainer.steps_in(plan.samples), lambda first=first: trainer.steps - first, f"epoch {epoch}"
        ):
            loss_sum = trainer.train_epoch(epoch, plan, observe, lr, policy.observes_predictions)
        _refresh(trainer, policy, epoch, totals)
        with watch.section():
            policy.sync(reduce)
        synchronize(trainer.device)
        t1 = time.perf_counter()
        test_loss, test_acc = trainer.evaluate()
        overhead = watch.seconds()
        row = EpochRow(
            epoch=epoch,
            lr=lr,
            samples=plan.samples,
            train_seconds=round(t1 - t0, 4),
            train_loss=loss_sum.item() / plan.samples,
            test_loss=test_loss,
            test_accuracy=test_acc,
            pruned=int(plan.pruned),
            overhead_seconds=round(overhead - totals.overhead_s, 5),
        )
        totals.rows.append(row)
        totals.train_s += t1 - t0
        totals.eval_s += time.perf_counter() - t1
        totals.overhead_s = overhead
        if not (finite(row.train_loss) and finite(row.test_loss)):
            _diverged(s, row)
        window = policy.snapshot_due(epoch, n)
        if window is not None and policy.scores is not None:
            s.record.save_scores(window, policy.scores, policy.score_name)
        summarize(s.summary, totals)
        s.record.write_metrics(totals.rows)
        bar.advance(f"acc {test_acc:.2f}%")
        stopping = _any_rank(stop.requested is not None, s.world, trainer.device)
        every = s.cfg.run.checkpoint_every
        if stopping or epoch == n or (every and epoch % every == 0):
            _checkpoint(s)
        s.record.write_summary(s.summary)
        if stopping and epoch < n:
            _interrupted(s, stop, epoch)


def _refresh(trainer: Trainer, policy: Policy, epoch: int, totals: Totals) -> None:
    """The forward-only pass the policy asks for after the epoch's training, timed apart."""
    indices = policy.refresh(epoch)
    if indices is None:
        return
    synchronize(trainer.device)
    t0 = time.perf_counter()
    trainer.refresh(indices, policy.observe)
    synchronize(trainer.device)
    totals.refresh_s += time.perf_counter() - t0


def _timed(observe: Any, watch: Stopwatch) -> Any:
    def timed(*args: Any) -> None:
        with watch.section():
            observe(*args)

    return timed


def _any_rank(flag: bool, world: World, device: torch.device) -> bool:
    """Ranks stop together: one small all_reduce per epoch when data-parallel."""
    if not world.active:
        return flag
    return bool(worlds.all_sum(torch.tensor([int(flag)], device=device), world).item())


def _checkpoint(s: Session) -> None:
    state = {
        "trainer": s.trainer.state_dict(),
        "policy": s.policy.state_dict(),
        "totals": s.totals.state_dict(),
        "fingerprint": fingerprint(s.cfg.to_dict(), s.summary.data),
    }
    if s.world.main:
        checkpoint.save(s.record.path, state)


def _interrupted(s: Session, stop: checkpoint.StopRequest, epoch: int) -> None:
    s.summary.status = Status.INTERRUPTED
    s.record.write_summary(s.summary)
    raise checkpoint.Stopped(
        f"{stop.requested or 'a signal to another rank'}: stopped after epoch {epoch} of "
        f"{s.cfg.train.epochs}; {_resume_hint(s)}"
    )


def _diverged(s: Session, row: EpochRow) -> None:
    raise mark_diverged(s.record, s.summary, s.totals, row)

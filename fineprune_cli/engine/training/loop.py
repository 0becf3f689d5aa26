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

from ... import console
from ...pruning.policy import Policy
from ..records.record import CHECKPOINT, RunRecord, RunSummary, Status
from ..setup.config import Config
from . import checkpoint
from . import world as worlds
from .device import Stopwatch, synchronize
from .epochend import EpochEnd, Measured, resume_command
from .lrschedule import lr_schedule
from .scalars import ScalarLog
from .totals import Totals
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
            f"written are whole; make room, then {resume_command(s.record, s.world)}"
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
            hint = f"{resume_command(s.record, s.world)} (from its last checkpoint)"
        else:
            hint = f"no epoch was checkpointed yet: delete {shlex.quote(str(s.record.path))} and train again"
        raise checkpoint.Interrupted(f"interrupted again before the epoch's checkpoint; {hint}") from None
    finally:
        worlds.shutdown(finished)


def fit(s: Session, stop: checkpoint.StopRequest, bar: Any) -> None:
    """The epochs from the first not yet done to the last: plan -> train -> sync -> evaluate,
    then the epoch's end (epochend.py: row, snapshot, checkpoint, stop test)."""
    trainer, policy, totals, n = s.trainer, s.policy, s.totals, s.cfg.train.epochs
    schedule = lr_schedule(s.cfg.train, policy, trainer.data.num_train)
    watch = Stopwatch(trainer.device, totals.overhead_s)
    observe = _timed(policy.observe, watch) if policy.observes else None
    reduce = (lambda t: worlds.all_sum(t, s.world)) if s.world.active else None
    end = EpochEnd(
        s.cfg,
        s.record,
        s.summary,
        totals,
        policy,
        s.world,
        stop,
        state=lambda: {"trainer": trainer.state_dict()},
        agree=lambda asked: _any_rank(asked, s.world, trainer.device),
        bar=bar,
    )
    console.resumed(bar, len(totals.rows))
    for epoch in range(len(totals.rows) + 1, n + 1):
        synchronize(trainer.device)
        t0, c0 = time.perf_counter(), time.process_time()
        with watch.section():
            plan = policy.plan(epoch)
        lr = schedule.at(epoch, plan.samples, [r.samples for r in totals.rows]).value(s.cfg.train)
        first = trainer.steps
        with console.step_view(
            bar, trainer.steps_in(plan.samples), lambda first=first: trainer.steps - first, f"epoch {epoch}"
        ):
            select = policy if policy.selects_batches else None
            loss_sum = trainer.train_epoch(epoch, plan, observe, lr, policy.observes_predictions, select)
        _refresh(trainer, policy, epoch, totals)
        with watch.section():
            policy.sync(reduce)
        synchronize(trainer.device)
        t1 = time.perf_counter()
        # on a CPU the process's CPU time holds a pruned epoch's share where other work stretches the
        # clock; a GPU's time is the device's
        cpu = time.process_time() - c0 if trainer.device.type == "cpu" else None
        test_loss, test_acc = trainer.evaluate()
        # a selective step's left-out rows went forward but not backward: not trained, as pruned samples
        samples, pruned = plan.samples - trainer.skipped, plan.pruned or trainer.skipped > 0
        end.close(
            Measured(epoch, lr, samples, loss_sum.item(), pruned, t0, t1, test_loss, test_acc, watch.seconds(), cpu)
        )


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

"""`fineprune train` as plain functions: a config in, a recorded run out.

`build` makes the trainer and the policy; `fit` is the one training loop of single-process
and data-parallel (DDP) runs: plan -> train -> sync -> evaluate -> row -> snapshot ->
checkpoint -> stop test, epoch after epoch.
"""

from __future__ import annotations

import shlex
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import console, models
from ..errors import ConfigError
from ..pruning.policy import Policy, create as create_policy
from . import checkpoint, world as worlds
from .config import Config, config_from_dict, given_as, validate
from .device import Stopwatch, describe_device, load_average, machine_signature, resolve_device, synchronize
from .fingerprint import data_changes, fingerprint
from .record import (CHECKPOINT, EpochRow, RunRecord, RunSummary, Status, default_run_dir,
                     finite, git_commit, load_run_config, read_summary)
from .scalars import ScalarLog
from .stream import data_identity, load_data
from .lrschedule import lr_schedule
from .trainer import Trainer
from .world import World


@dataclass
class Totals:
    """What a run has done so far; a checkpoint stores it, a resumed run starts from it."""
    rows: list[EpochRow] = field(default_factory=list)
    train_s: float = 0.0
    eval_s: float = 0.0
    overhead_s: float = 0.0
    refresh_s: float = 0.0  # forward-only passes a policy asked for (kakurenbo), part of train_s

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [vars(r) for r in self.rows], "train_s": self.train_s,
                "eval_s": self.eval_s, "overhead_s": self.overhead_s, "refresh_s": self.refresh_s}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Totals":
        return cls([EpochRow(**r) for r in state["rows"]], state["train_s"], state["eval_s"],
                   state["overhead_s"], state.get("refresh_s", 0.0))  # absent from older checkpoints


def best3(accuracies: list[float]) -> float:
    """Mean of the three best test accuracies, as in the paper's Table 2."""
    top = sorted(accuracies, reverse=True)[:3]
    return sum(top) / len(top) if top else float("nan")


def summarize(summary: RunSummary, totals: Totals) -> None:
    """Bring the summary's figures up to the rows done so far."""
    rows = totals.rows
    seen = sum(r.samples for r in rows)
    summary.epochs_completed = len(rows)
    summary.train_seconds = round(totals.train_s, 3)
    summary.eval_seconds = round(totals.eval_s, 3)
    summary.overhead_seconds = round(totals.overhead_s, 4)
    summary.final_accuracy = rows[-1].test_accuracy if rows else float("nan")
    summary.final_test_loss = rows[-1].test_loss if rows else None
    summary.best3_accuracy = best3([r.test_accuracy for r in rows])
    summary.samples_seen = seen
    summary.samples_skipped = len(rows) * summary.num_train - seen
    summary.pruning_epochs = [r.epoch for r in rows if r.pruned]
    if totals.refresh_s:
        summary.extra["refresh_seconds"] = round(totals.refresh_s, 3)


def new_summary(cfg: Config, device: torch.device, path: Path, num_train: int,
                world_size: int = 1, command: str | None = None) -> RunSummary:
    schedule = {k: v for k, v in vars(cfg.prune).items() if k not in ("enabled", "policy")}
    return RunSummary(
        model=cfg.model.name, dataset=cfg.data.dataset, epochs=cfg.train.epochs, seed=cfg.run.seed,
        policy=cfg.policy, arm=cfg.run.arm, dataset_label=cfg.data.label or cfg.data.dataset,
        num_train=num_train,
        device=describe_device(device), run_dir=str(path), torch=torch.__version__,
        git_commit=git_commit(), started=time.strftime("%Y-%m-%dT%H:%M:%S"), command=command,
        world_size=world_size, schedule=schedule if cfg.policy != "regular" else {},
        data=data_identity(cfg.data), machine=machine_signature(device), load_average=load_average())


def build_model(cfg: Config, channels: int, classes: int) -> torch.nn.Module:
    """The run's model, its initial weights drawn from the run's seed (the same in every
    process that builds it)."""
    torch.manual_seed(cfg.run.seed)
    kwargs = {"widen": cfg.model.widen} if cfg.model.widen else {}
    return models.create(cfg.model.name, channels, classes, **kwargs)


def build(cfg: Config, world: World = worlds.SINGLE) -> tuple[Trainer, Policy]:
    device = resolve_device(worlds.device_for(world, cfg.run.device), given_as(cfg, "run.device", "--device"))
    worlds.place(device)
    worlds.init(world, device, cfg.run.dist_timeout)
    data, channels, classes = load_data(cfg.data, cfg.run.seed, device,
                                        max(cfg.train.batch_size, cfg.train.eval_batch_size))
    model = build_model(cfg, channels, classes)
    trainer = Trainer(model, data, cfg.train, device, cfg.run.seed, cfg.run.compile,
                      cfg.run.compile_mode, world=world)
    trainer.channels, trainer.classes = channels, classes
    policy = create_policy(cfg.policy, data.num_train, cfg.prune, seed=cfg.run.seed + 1,
                           device=device, epochs=cfg.train.epochs)
    return trainer, policy


@dataclass
class Session:
    cfg: Config
    record: RunRecord
    trainer: Trainer
    policy: Policy
    summary: RunSummary
    totals: Totals
    world: World = worlds.SINGLE


def train(cfg: Config, show_progress: bool = True, command: str | None = None,
          bar: Any = None) -> RunSummary:
    """Train as `cfg` says (one process, or one rank of a DDP run). `command` (how it was
    launched) goes into the summary; `bar`: a caller's progress bar to advance per epoch."""
    validate(cfg)
    world = worlds.from_env()
    path = Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset)
    record = RunRecord(path, write=world.main, fresh=world.main, open_now=False)
    try:
        trainer, policy = build(cfg, world)
        record.open()
        record.write_config(cfg.to_dict())
        summary = new_summary(cfg, trainer.device, record.path, trainer.data.num_train, world.size, command)
        record.write_summary(summary)
        return run(Session(cfg, record, trainer, policy, summary, Totals(), world), show_progress, bar)
    finally:
        record.close()


def resume(run_dir: Path, show_progress: bool = True, bar: Any = None) -> RunSummary:
    """Continue an interrupted run from its checkpoint, as if it had never stopped."""
    summary, cfg = resumable(run_dir)
    world = worlds.from_env()
    record = RunRecord(Path(run_dir), write=world.main)
    try:
        return _resume(cfg, record, summary, world, show_progress, bar)
    finally:
        record.close()


def resumable(run_dir: Path) -> tuple[RunSummary, Config]:
    """The summary and config of a run folder that can be continued; else one clear error."""
    summary = read_summary(run_dir)
    if summary.status == Status.COMPLETE:
        raise ConfigError(f"{run_dir} is already complete")
    if summary.status == Status.DIVERGED:
        raise ConfigError(f"{run_dir} diverged at epoch {summary.diverged_epoch}: resuming it would "
                          "diverge again; train it anew with a lower --lr or a longer warm-up")
    cfg = validate(config_from_dict(load_run_config(run_dir), f"{run_dir}/config.yaml"))
    cfg.run.out = str(run_dir)
    changed = data_changes(summary.data, data_identity(cfg.data), str(cfg.data.data_dir))
    if changed:  # the checkpoint's counts and weights belong to other samples or labels
        raise ConfigError(f"{run_dir}: {changed}; resume refused")
    return summary, cfg


def _resume(cfg: Config, record: RunRecord, summary: RunSummary, world: World, show_progress: bool,
            bar: Any) -> RunSummary:
    trainer, policy = build(cfg, world)
    state = checkpoint.load(record.path, trainer.device)
    if state.get("fingerprint") != fingerprint(cfg.to_dict(), summary.data):
        raise checkpoint.StaleCheckpoint(f"{record.path}: the checkpoint was made with other settings than its "
                                         "config.yaml (a run started over it, or the file was edited); resume refused")
    try:
        trainer.load_state_dict(state["trainer"])
        policy.load_state_dict(state["policy"])
        checkpoint.restore_rng(state)
        totals = Totals.from_state(state["totals"])
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
        raise ConfigError(f"{record.path}/{CHECKPOINT} does not fit this run "
                          f"({type(exc).__name__}); train it again") from None
    summary.status = Status.INCOMPLETE
    summary.resumed_after_epochs.append(len(totals.rows))
    here = machine_signature(trainer.device)
    if summary.machine and summary.machine != here:  # its time is a sum over two machines
        summary.machine = {"mixed": [summary.machine, here]}
    record.write_metrics(totals.rows)  # epochs after the checkpoint are trained again
    return run(Session(cfg, record, trainer, policy, summary, totals, world), show_progress, bar)


def run(s: Session, show_progress: bool, bar: Any) -> RunSummary:
    finished = False
    try:
        s.record.scalars = ScalarLog.open(s.cfg.run.tensorboard and s.world.main, s.record.path,
                                          len(s.totals.rows))
        with checkpoint.StopRequest() as stop:
            own_bar = console.progress(s.cfg.train.epochs, f"{s.cfg.model.name} on {s.cfg.data.dataset}",
                                       show_progress and s.world.main)
            with (nullcontext(bar) if bar is not None else own_bar) as epoch_bar:
                fit(s, stop, epoch_bar)
        s.summary.status = Status.COMPLETE
        s.summary.finished = time.strftime("%Y-%m-%dT%H:%M:%S")
        s.record.write_summary(s.summary)
        finished = True
        return s.summary
    except OSError as exc:  # every record is written atomically, so what is there stays whole
        raise checkpoint.StorageFull(
            f"cannot write {exc.filename or s.record.path}: {exc.strerror or exc}; the records already "
            f"written are whole; make room, then {_resume_hint(s)}") from None
    except (MemoryError, RuntimeError) as exc:  # CUDA: torch.OutOfMemoryError; CPU: the allocator's RuntimeError
        if not isinstance(exc, (MemoryError, torch.OutOfMemoryError)) and "can't allocate memory" not in str(exc):
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise checkpoint.OutOfMemory(
            f"out of memory while training ({reason.split('. ')[-1][:160]}): lower --batch-size or "
            f"--image-size; the records written so far in {s.record.path} are whole") from None
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
        with console.step_view(bar, trainer.steps_in(plan.samples), lambda first=first: trainer.steps - first,
                               f"epoch {epoch}"):
            loss_sum = trainer.train_epoch(epoch, plan, observe, lr, policy.observes_predictions)
        _refresh(trainer, policy, epoch, totals)
        with watch.section():
            policy.sync(reduce)
        synchronize(trainer.device)
        t1 = time.perf_counter()
        test_loss, test_acc = trainer.evaluate()
        overhead = watch.seconds()
        row = EpochRow(epoch=epoch, lr=lr, samples=plan.samples,
                       train_seconds=round(t1 - t0, 4), train_loss=loss_sum.item() / plan.samples,
                       test_loss=test_loss, test_accuracy=test_acc, pruned=int(plan.pruned),
                       overhead_seconds=round(overhead - totals.overhead_s, 5))
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
    state = {"trainer": s.trainer.state_dict(), "policy": s.policy.state_dict(),
             "totals": s.totals.state_dict(), "fingerprint": fingerprint(s.cfg.to_dict(), s.summary.data)}
    if s.world.main:
        checkpoint.save(s.record.path, state)


def _interrupted(s: Session, stop: checkpoint.StopRequest, epoch: int) -> None:
    s.summary.status = Status.INTERRUPTED
    s.record.write_summary(s.summary)
    raise checkpoint.Stopped(
        f"{stop.requested or 'a signal to another rank'}: stopped after epoch {epoch} of "
        f"{s.cfg.train.epochs}; {_resume_hint(s)}")


def _diverged(s: Session, row: EpochRow) -> None:
    raise mark_diverged(s.record, s.summary, s.totals, row)


def mark_diverged(record: RunRecord, summary: RunSummary, totals: Totals, row: EpochRow) -> checkpoint.Diverged:
    """Record the run as diverged at `row`'s epoch; returns the error to raise."""
    summarize(summary, totals)
    summary.status, summary.diverged_epoch = Status.DIVERGED, row.epoch
    record.write_metrics(totals.rows)
    record.write_summary(summary)
    return checkpoint.Diverged(
        f"training diverged at epoch {row.epoch}: train loss {row.train_loss}, test loss "
        f"{row.test_loss}; the record is kept in {record.path} with status 'diverged' "
        "(try a lower --lr or a longer train.warmup_epochs)")

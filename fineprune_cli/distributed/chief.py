"""The chief parameter server's run (rank 0 of an async/mixed run): it waits for each epoch's
end, evaluates the whole model and hands the epoch to the end the synchronous loop uses too
(engine/training/epochend.py: the record, the checkpoint, the stop on a signal or on divergence), then
releases the workers; it resumes from its checkpoint.

A checkpoint holds the whole model (batch-norm buffers included), each server's shard with
its optimizer state and update count, the policy, the totals and the RNG. Workers hold no
state across epochs (their order is seeded per epoch), so a resumed run needs only this."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ..engine.records.fingerprint import matches
from ..engine.records.record import RunRecord, RunSummary, Status, default_run_dir, read_summary
from ..engine.setup.config import Config
from ..engine.training import checkpoint
from ..engine.training.device import synchronize
from ..engine.training.epochend import EpochEnd, Measured
from ..engine.training.lrschedule import lr_schedule
from ..engine.training.scalars import ScalarLog
from ..engine.training.totals import Totals, trainer_summary
from ..engine.training.world import World
from ..errors import ConfigError
from .layout import Shards
from .server import Chief


class Peers:
    """The chief's calls to the other servers (`call(k, what, *args)`, what = 'state' |
    'load' | 'finish'), given by the RPC layer so this module knows nothing of RPC."""

    def __init__(self, num_ps: int, call: Callable[..., Any]):
        self.others, self.call = range(1, num_ps), call

    def states(self) -> list[dict[str, Any]]:
        return [self.call(k, "state") for k in self.others]

    def load(self, states: list[dict[str, Any]]) -> None:
        for k, state in zip(self.others, states):
            self.call(k, "load", state)

    def finish(self) -> None:
        for k in self.others:
            self.call(k, "finish")


def open_record(
    cfg: Config, trainer: Any, world: World, command: str | None, resume_dir: Path | None
) -> tuple[RunRecord, RunSummary, dict[str, Any] | None]:
    if resume_dir is None:
        path = Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset)
        record = RunRecord(path, fresh=True)
        record.write_config(cfg.to_dict())
        summary = trainer_summary(cfg, trainer, record.path, world.size, command)
        return record, summary, None
    summary = read_summary(resume_dir)  # the front door's `resumable` checked it can go on
    record = RunRecord(Path(resume_dir))
    state = checkpoint.load(record.path, trainer.device)
    if not matches(state.get("fingerprint"), cfg.to_dict(), summary.data):
        raise checkpoint.StaleCheckpoint(
            f"{record.path}: the checkpoint was made with other settings than its config.yaml; resume refused"
        )
    summary.status = Status.INCOMPLETE
    summary.resumed_after_epochs.append(len(state["totals"]["rows"]))
    return record, summary, state


def run_chief(
    cfg: Config,
    trainer: Any,
    policy: Any,
    world: World,
    pushers: int,
    shards: Shards,
    command: str | None,
    resume_dir: Path | None,
    publish: Callable[[Chief], Any],
    peers: Peers,
) -> RunSummary:
    record, summary, state = open_record(cfg, trainer, world, command, resume_dir)
    try:
        totals = Totals.from_state(state["totals"]) if state else Totals()
        chief = Chief(trainer, shards, policy, pushers, cfg.run.dist_timeout, len(totals.rows) + 1)
        schedule = lr_schedule(cfg.train, policy, trainer.data.num_train)
        chief.lr_for = lambda epoch, plan: schedule.at(epoch, plan.samples, [r.samples for r in totals.rows]).value(
            cfg.train
        )
        if state:  # before publishing: the workers' first call waits until the chief is ready
            restore(state, chief, policy, peers)
        summary.extra.update(
            dist_mode=cfg.run.dist_mode, workers=world.size - cfg.run.num_ps, groups=pushers, servers=cfg.run.num_ps
        )
        record.write_metrics(totals.rows)
        record.scalars = ScalarLog.open(cfg.run.tensorboard, record.path, len(totals.rows))
        record.write_summary(summary)  # 'incomplete' from the start, as in the sync mode
        publish(chief)
        with checkpoint.StopRequest() as stop:
            for epoch in range(chief.first_epoch, cfg.train.epochs + 1):
                serve_epoch(cfg, chief, peers, record, summary, totals, epoch, stop, world)
        peers.finish()
        summary.status, summary.finished = Status.COMPLETE, time.strftime("%Y-%m-%dT%H:%M:%S")
        record.write_summary(summary)
        return summary
    finally:
        record.close()


def restore(state: dict[str, Any], chief: Chief, policy: Any, peers: Peers) -> None:
    try:
        chief.trainer.model.load_state_dict(state["model"])
        chief.load_state_dict(state["servers"][0])
        peers.load(state["servers"][1:])
        policy.load_state_dict(state["policy"])
        checkpoint.restore_rng(state)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        raise ConfigError(f"the checkpoint does not fit this run ({type(exc).__name__}); train it again") from None


def serve_epoch(
    cfg: Config,
    chief: Chief,
    peers: Peers,
    record: RunRecord,
    summary: RunSummary,
    totals: Totals,
    epoch: int,
    stop: checkpoint.StopRequest,
    world: World,
) -> None:
    trainer = chief.trainer
    loss_sum, samples, asked = chief.wait_epoch(epoch)
    t1 = time.perf_counter()
    t0 = chief.started[epoch]  # workers' start-up is not training time
    states = [chief.state_dict(), *peers.states()]
    params = list(trainer.model.parameters())
    for k, other in enumerate(states[1:], start=1):  # the whole model, for evaluation
        chief.shards.load(params, other["weights"], k)
    refresh_s = _refresh(chief, epoch)
    totals.refresh_s += refresh_s
    t1 += refresh_s  # the policy's forward-only pass is training time, timed apart
    test_loss, test_acc = trainer.evaluate()
    stale = states[0]["stale"]
    summary.extra.update(
        updates=stale["count"],
        staleness_mean=round(stale["sum"] / max(stale["count"], 1), 3),
        staleness_max=stale["max"],
    )
    end = EpochEnd(
        cfg,
        record,
        summary,
        totals,
        chief.policy,
        world,
        stop,
        state=lambda: {"model": trainer.model.state_dict(), "servers": states},
        agree=lambda wish: wish or asked,
        others="a worker",
        release=lambda: _end_all(chief, peers, epoch),
    )
    plan = chief.plans.pop(epoch)
    end.close(Measured(epoch, chief.lrs.pop(epoch), samples, loss_sum, plan.pruned, t0, t1, test_loss, test_acc))
    chief.close_epoch(epoch)


def _refresh(chief: Chief, epoch: int) -> float:
    """The chief runs the forward-only pass a policy asks for (kakurenbo's hidden samples) on
    the whole model, and folds it in as a sync would; returns its seconds."""
    indices = chief.policy.refresh(epoch)
    if indices is None:
        return 0.0
    start = time.perf_counter()
    chief.trainer.refresh(indices, chief.policy.observe)
    chief.policy.sync(None)
    synchronize(chief.trainer.device)
    return time.perf_counter() - start


def _end_all(chief: Chief, peers: Peers, epoch: int) -> None:
    """Release the workers (their next epoch returns 'stop') and the other servers."""
    chief.close_epoch(epoch, stop=True)
    peers.finish()

"""Starting and continuing a run of the synchronous loop (one process, or one rank of a
data-parallel run): its record opened, its parts built, then loop.py's `run_session`.

`fineprune_cli.runner` calls these; it chooses them over a parameter-server run. The config
reaches them validated: by the runner's `train`, or, for a run folder's own config.yaml, by
`resumable`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import console
from ...errors import ConfigError
from ...pruning.policy import random_equal_note
from ..inputs.stream import data_identity
from ..records.fingerprint import data_changes, matches
from ..records.record import CHECKPOINT, RunRecord, RunSummary, Status, default_run_dir, load_run_config, read_summary
from ..setup.config import Config, config_from_dict, validate
from . import checkpoint
from .build import trainer_and_policy
from .device import machine_signature
from .loop import Session, run_session
from .totals import Totals, trainer_summary
from .world import World


def train_sync(
    cfg: Config, world: World, show_progress: bool = True, command: str | None = None, bar: Any = None
) -> RunSummary:
    """Train a new run as `cfg` says. `command` (how it was launched) goes into the summary;
    `bar`: a caller's progress bar to advance per epoch. A run whose policy is its random control
    in every pruning epoch is named once its data is loaded, so a refusal stays one line
    (`pruning.policy.random_equal_note`; a caller with its own bar, compare, names its arms)."""
    path = Path(cfg.run.out) if cfg.run.out else default_run_dir(cfg.model.name, cfg.data.dataset)
    record = RunRecord(path, write=world.main, fresh=world.main, open_now=False)
    try:
        trainer, policy = trainer_and_policy(cfg, world)
        note = random_equal_note(cfg.policy, cfg.prune, cfg.train.epochs) if bar is None and world.main else None
        if note:
            console.info(note)
        record.open()
        record.write_config(cfg.to_dict())
        summary = trainer_summary(cfg, trainer, record.path, world.size, command)
        record.write_summary(summary)
        return run_session(Session(cfg, record, trainer, policy, summary, Totals(), world), show_progress, bar)
    finally:
        record.close()


def resumable(run_dir: Path) -> tuple[RunSummary, Config]:
    """The summary and (validated) config of a run folder that can be continued; else one
    clear error."""
    summary = read_summary(run_dir)
    if summary.status == Status.COMPLETE:
        raise ConfigError(f"{run_dir} is already complete")
    if summary.status == Status.DIVERGED:
        raise ConfigError(
            f"{run_dir} diverged at epoch {summary.diverged_epoch}: resuming it would "
            "diverge again; train it anew with a lower --lr or a longer warm-up"
        )
    cfg = validate(config_from_dict(load_run_config(run_dir), f"{run_dir}/config.yaml"))
    cfg.run.out = str(run_dir)
    changed = data_changes(summary.data, data_identity(cfg.data, summary.data), str(cfg.data.data_dir))
    if changed:  # the checkpoint's counts and weights belong to other samples or labels
        raise ConfigError(f"{run_dir}: {changed}; resume refused")
    return summary, cfg


def resume_sync(
    run_dir: Path, summary: RunSummary, cfg: Config, world: World, show_progress: bool = True, bar: Any = None
) -> RunSummary:
    """Continue an interrupted run (`summary`, `cfg`: what `resumable` read from it) from its
    checkpoint, as if it had never stopped."""
    record = RunRecord(Path(run_dir), write=world.main)
    try:
        trainer, policy = trainer_and_policy(cfg, world)
        state = checkpoint.load(record.path, trainer.device)
        if not matches(state.get("fingerprint"), cfg.to_dict(), summary.data):
            raise checkpoint.StaleCheckpoint(
                f"{record.path}: the checkpoint was made with other settings than its "
                "config.yaml (a run started over it, or the file was edited); "
                "resume refused"
            )
        totals = _restore(state, trainer, policy, record)
        summary.status = Status.INCOMPLETE
        summary.resumed_after_epochs.append(len(totals.rows))
        here = machine_signature(trainer.device)
        if summary.machine and summary.machine != here:  # its time is a sum over two machines
            summary.machine = {"mixed": [summary.machine, here]}
        record.write_metrics(totals.rows)  # epochs after the checkpoint are trained again
        return run_session(Session(cfg, record, trainer, policy, summary, totals, world), show_progress, bar)
    finally:
        record.close()


def _restore(state: dict[str, Any], trainer: Any, policy: Any, record: RunRecord) -> Totals:
    """The trainer, policy and RNG as the checkpoint left them; returns its totals."""
    try:
        trainer.load_state_dict(state["trainer"])
        policy.load_state_dict(state["policy"])
        checkpoint.restore_rng(state)
        return Totals.from_state(state["totals"])
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
        raise ConfigError(
            f"{record.path}/{CHECKPOINT} does not fit this run ({type(exc).__name__}); train it again"
        ) from None

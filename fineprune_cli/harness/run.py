"""A script's side of `compare --script`: `fineprune.start()` tells a training script which run it
is, and the `ScriptRun` it returns records each epoch into an ordinary run folder.

Under `compare` the job's config arrives through FINEPRUNE_JOB (and the run folder through
FINEPRUNE_RUN_DIR); run on its own, a script is the run its arguments say (`policy` regular unless
given). Either way the script declares what it trains: its seed, epochs and lr milestones (checked
against what compare told it, so a script that ignores a shorter arm's schedule or the seed is
refused at once, not averaged in), its data's identity and any recipe settings (recorded, so runs
with other data or another recipe never pair in a report).
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.records.files import atomic_write_bytes
from ..engine.records.record import CHECKPOINT, EpochRow, RunRecord, RunSummary, Status, default_run_dir
from ..engine.setup.config import Config
from ..engine.setup.scriptconfig import PLACEHOLDERS, used_by_script
from ..engine.training.checkpoint import data_bytes, load_data
from ..engine.training.device import device_kind
from ..engine.training.totals import Totals, mark_diverged, new_summary, summarize
from ..errors import ConfigError
from ..lazytorch import torch
from ..pruning.config import PruneConfig
from ..pruning.policy import Policy, create
from ..pruning.registry import get as get_policy
from . import logged
from .job import JOB_ENV, MORE_EPOCHS, job_config, own_config, refuse_other_run
from .logged import ScriptError
from .version import script_version

if TYPE_CHECKING:
    from ..pruning.sampler import PruningSampler

RUN_DIR_ENV = "FINEPRUNE_RUN_DIR"
COMMAND_ENV = "FINEPRUNE_COMMAND"  # the compare command that runs the script: it makes each run again


def start(
    *,
    num_train: int,
    seed: int,
    epochs: int,
    milestones: list[int] | None = None,
    policy: str | None = None,
    prune: PruneConfig | None = None,
    model: str | None = None,
    dataset: str | None = None,
    data: dict[str, str] | None = None,
    recipe: dict[str, Any] | None = None,
    classes: int | None = None,
    num_test: int | None = None,
    device: str | torch.device = "cpu",
    out: str | Path | None = None,
) -> "ScriptRun":
    """The run this script is: compare's job when run by `compare --script`, else the one its
    arguments describe. `seed`, `epochs`, `milestones`: what the script will train (checked against
    compare's job); `policy` and `prune`: when run on its own (compare hands its own). `recipe`:
    the settings two runs must share to be compared (its seed, epochs... keys are left out: they
    are the run's own); `classes`, `num_test`: let a report name a run at chance level and check
    that accuracies are whole test images."""
    job = os.environ.get(JOB_ENV)
    cfg = job_config(Path(job)) if job else own_config(seed, epochs, milestones, policy, prune, model, dataset, out)
    if job:
        refuse_other_run(cfg, seed, epochs, milestones, policy)
        cfg.run.out = os.environ.get(RUN_DIR_ENV) or cfg.run.out
    # the run's own values are recorded as such; in the recipe they would set the arms apart
    cfg.script.recipe = {k: v for k, v in (recipe or {}).items() if k not in PLACEHOLDERS}
    # "cpu" as given: torch.device would import torch, which a script that only records never needs
    run = ScriptRun(cfg, num_train, device if device == "cpu" else torch.device(device), data or {}, model, dataset)
    run.summary.classes, run.summary.num_test = classes or 0, num_test or 0
    return run


class ScriptRun:
    """One run of a script: its settings (`seed`, `epochs`, `milestones`, `policy`), a sampler
    that prunes by its policy, `log()` once per epoch, `finish()` at the end."""

    def __init__(self, cfg: Config, num_train: int, device: torch.device | str, data: dict, model, dataset):
        if not isinstance(num_train, int) or num_train < 1:
            raise ScriptError(f"num_train must be a positive number of training samples, got {num_train!r}")
        self.cfg, self.num_train, self._device = cfg, num_train, device
        self.path = Path(cfg.run.out or default_run_dir(cfg.model.name, cfg.data.dataset))
        # a folder holding a run is refused, unless that run left a checkpoint this one may resume
        self.record = RunRecord(self.path, fresh=not (self.path / CHECKPOINT).exists())
        self.record.write_config(used_by_script(cfg.to_dict()))
        self.totals = Totals()
        self.summary = self._summary(data, model or cfg.model.name, dataset or cfg.data.dataset)
        kind = get_policy(cfg.policy)
        if kind.selects_batches:  # the script's steps, not a sampler's plan, would have to select
            raise ScriptError(f"policy {cfg.policy} chooses rows inside each training step: a script run cannot use it")
        # a pruning policy is made now, its settings meeting num_train at once (its sampler needs
        # torch anyway); regular's tensors wait for a sampler, which a script may never ask for
        self._policy: Policy | None = None if kind.name == "regular" else self._made_policy()
        self._sampler: PruningSampler | None = None
        self._since, self._cpu_since = time.perf_counter(), time.process_time()

    seed = property(lambda self: self.cfg.run.seed)
    epochs = property(lambda self: self.cfg.train.epochs)
    milestones = property(lambda self: list(self.cfg.train.milestones or []))
    out = property(lambda self: self.path)
    device = property(lambda self: torch.device(self._device))

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            self._policy = self._made_policy()
        return self._policy

    def _made_policy(self) -> Policy:
        cfg = self.cfg
        return create(cfg.policy, self.num_train, cfg.prune, cfg.run.seed, "cpu", cfg.train.epochs)

    @property
    def first_epoch(self) -> int:
        """The 0-based epoch to train next: 0, or after `resume()` the one after the saved epoch."""
        return len(self.totals.rows)

    def sampler(self, seed: int | None = None) -> PruningSampler:
        """A sampler over the run's policy (regular: every sample, shuffled): give it to the
        DataLoader, call `set_epoch(e)` each epoch and backpropagate `sampler.loss(idx, losses)`."""
        from ..pruning.sampler import PruningSampler  # here: its DataLoader base classes import torch

        self._sampler = PruningSampler(self.policy, self.seed if seed is None else seed)
        return self._sampler

    def log(
        self,
        *,
        train_loss: float,
        test_accuracy: float,
        test_loss: float = math.nan,
        lr: float = 0.0,
        samples: int | None = None,
        train_seconds: float | None = None,
        epoch: int | None = None,
    ) -> None:
        """Record the epoch just trained (test_accuracy in percent); written at once, atomically.
        A figure outside its meaning is refused (`harness.logged`); a loss no longer finite
        records the run as diverged, after which `diverged` is True and later epochs are not
        recorded (stop training: it would stay diverged)."""
        now, cpu, number = time.perf_counter(), time.process_time(), len(self.totals.rows) + 1
        if self.diverged:
            return
        if epoch is not None and epoch != number:
            raise ScriptError(f"epoch {epoch} recorded where epoch {number} comes next: record epochs in order")
        if number > self.epochs:
            raise ScriptError(f"epoch {number} recorded, but this run trains {self.epochs} epochs: {MORE_EPOCHS}")
        drew = (s := self._sampler) is not None and (s.consumed or s.seen > 0)  # iterated, or given losses
        logged.drawn(get_policy(self.cfg.policy).name, drew, number)
        plan = s.plan if s is not None else None
        count = samples if samples is not None else self._trained()
        pruned = plan.pruned if plan is not None and samples is None else count < self.num_train
        seconds = train_seconds if train_seconds is not None else now - self._since
        train, lost = logged.loss("train_loss", train_loss)
        test, lost_test = logged.loss("test_loss", test_loss, measured=False)
        row = EpochRow(number, logged.lr(lr), logged.samples(count, self.num_train), round(logged.seconds(seconds), 4),
                       train, test, logged.accuracy(test_accuracy, self.summary.num_test), int(pruned),
                       0.0, self._cpu(cpu))  # fmt: skip
        # the rest of the epoch (its test pass, its records) is the user's clock time too
        rest = max(0.0, now - self._since - row.train_seconds)
        self.totals.rows.append(row)
        self.totals.train_s += row.train_seconds
        self.totals.eval_s += rest
        self._since, self._cpu_since = now, cpu
        if lost or lost_test:  # as the built-in trainer records a run whose loss is no longer finite
            mark_diverged(self.record, self.summary, self.totals, row)
            return
        self._write()

    def _trained(self) -> int:
        """The samples the epoch trained, as its sampler saw them: those whose losses reached
        `sampler.loss()` (a loader with drop_last=True, as timm's train loader has, trains up to a
        batch less one fewer than the plan), at most the plan; the plan where the loop passed it
        no loss (a regular run need not); every sample without a sampler."""
        s = self._sampler
        if s is None or s.plan is None:
            return self.num_train
        return min(s.seen, s.plan.samples) if s.seen else s.plan.samples

    def _cpu(self, now: float) -> float:
        """The script process's CPU seconds since its last record (its whole epoch: the harness cannot
        tell its training from its test pass), on a CPU run; a GPU run's time is the device's (NaN)."""
        return round(now - self._cpu_since, 4) if device_kind(self._device) == "cpu" else math.nan

    @property
    def diverged(self) -> bool:
        """The run's loss stopped being finite: it is recorded as diverged and logs no more epochs."""
        return self.summary.status == Status.DIVERGED

    def save(self, state: Any) -> None:
        """Keep `state` (model, optimizer, sampler.state_dict(), ...) for `resume()` after the
        epoch just logged: tensors, numbers, strings, and lists, tuples, dicts and sets of them
        (what `resume()` loads back without running code); anything else is refused here."""
        saved = {"epoch": self.first_epoch, "state": state, "totals": self.totals.state_dict()}
        try:
            data = data_bytes(saved, "run.save()")
        except ConfigError as exc:
            raise ScriptError(str(exc)) from None
        atomic_write_bytes(self.path / CHECKPOINT, data)

    def resume(self) -> Any:
        """The state saved by `save()` in an interrupted attempt of this run (its epochs kept),
        or None: train from epoch 0. A script that never calls it trains the run anew."""
        file = self.path / CHECKPOINT
        if not file.exists():
            return None
        try:  # a run folder is data: a planted pickle here must not run (engine.training.checkpoint.load_data)
            saved = load_data(file)
            self.totals = Totals.from_state(saved["totals"])
            self.summary.resumed_after_epochs.append(int(saved["epoch"]))
        except ConfigError as exc:
            raise ScriptError(f"run.resume(): {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise ScriptError(
                f"run.resume(): {file} is not a checkpoint run.save() wrote ({type(exc).__name__})"
            ) from None
        self._write()
        return saved["state"]

    def finish(self) -> RunSummary:
        """The run is complete: every epoch it was told recorded (or it diverged: kept so)."""
        if self.diverged:
            self.close()
            return self.summary
        done = len(self.totals.rows)
        if done != self.epochs:
            self.close()
            raise ScriptError(f"the script trained {done} of the {self.epochs} epochs this run trains")
        self.summary.status, self.summary.finished = Status.COMPLETE, time.strftime("%Y-%m-%dT%H:%M:%S")
        self._write()
        (self.path / CHECKPOINT).unlink(missing_ok=True)
        self.close()
        return self.summary

    def close(self) -> None:
        self.record.close()

    def __enter__(self) -> "ScriptRun":
        return self

    def __exit__(self, kind, *_: Any) -> None:
        if kind is None and self.summary.status not in (Status.COMPLETE, Status.DIVERGED):
            self.finish()
        self.close()

    def _summary(self, data: dict, model: str, dataset: str) -> RunSummary:
        command = shlex.join([sys.executable, *sys.argv])
        summary = new_summary(self.cfg, self._device, self.path, self.num_train, command=command, data=data)
        summary.model, summary.dataset, summary.dataset_label = model, dataset, dataset
        summary.extra["script_version"] = script_version(sys.argv[0])
        if os.environ.get(COMMAND_ENV):
            summary.extra["compare_command"] = os.environ[COMMAND_ENV]
        return summary

    def _write(self) -> None:
        summarize(self.summary, self.totals)
        self.record.write_metrics(self.totals.rows)
        self.record.write_summary(self.summary)

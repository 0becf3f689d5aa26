"""`fineprune compare`: the same training under regular, fine and random policies.

Every (model, dataset, policy, seed) is one ordinary run folder under
`<compare.out>/<model>-<dataset>/<policy>-seed<seed>/`. A folder whose summary says
"complete" and whose settings match is reused, so an interrupted matrix continues where
it stopped; an incomplete one is trained again from epoch 1.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import console
from .config import Config, config_from_dict, validate
from .errors import ConfigError
from .checkpoint import CHECKPOINT, Diverged
from .records import CONFIG, SUMMARY, load_run_config, read_summary

POLICIES = ("regular", "fine", "random")


@dataclass(frozen=True)
class Job:
    model: str
    dataset: str
    policy: str
    seed: int

    def run_dir(self, out: str | Path) -> Path:
        return Path(out) / f"{self.model}-{self.dataset}" / f"{self.policy}-seed{self.seed}"

    def __str__(self) -> str:
        return f"{self.model} on {self.dataset}, {self.policy}, seed {self.seed}"


def plan(cfg: Config) -> list[Job]:
    """The matrix in run order: seeds outermost, so a cut-short matrix has whole seeds."""
    c = cfg.compare
    model_names = c.models or ([cfg.model.name] if cfg.model.name else [])
    dataset_names = c.datasets or ([cfg.data.dataset] if cfg.data.dataset else [])
    if not model_names:
        raise ConfigError("no model given: pass --model or list compare.models in --config")
    if not dataset_names:
        raise ConfigError("no dataset given: pass --dataset or list compare.datasets in --config")
    bad = [p for p in c.policies if p not in POLICIES]
    if bad or not c.policies:
        raise ConfigError(f"unknown policy '{bad[0] if bad else ''}'; choose from: {', '.join(POLICIES)}")
    if not c.seeds:
        raise ConfigError("--seeds must list at least one seed")
    jobs = [Job(m, d, p, s) for s in c.seeds for m in model_names for d in dataset_names
            for p in c.policies]
    for job in jobs:  # fail on a bad model or dataset before any training starts
        validate(job_config(cfg, job))
    return jobs


def job_config(cfg: Config, job: Job) -> Config:
    job_cfg = copy.deepcopy(cfg)
    job_cfg.model.name = job.model
    job_cfg.data.dataset = job.dataset
    job_cfg.run.seed = job.seed
    job_cfg.prune.enabled = job.policy != "regular"
    if job.policy != "regular":
        job_cfg.prune.policy = job.policy
    job_cfg.run.out = str(job.run_dir(cfg.compare.out))
    return job_cfg


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """The settings that decide a run's result; where it is written and the matrix do not."""
    config = copy.deepcopy(config)
    config.pop("compare", None)
    config.get("run", {}).pop("out", None)
    config.get("run", {}).pop("checkpoint_every", None)
    config.get("data", {}).pop("label", None)
    if not config.get("prune", {}).get("enabled", False):
        config.pop("prune", None)
    return config


def _differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            diffs += _differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            diffs.append(f"{prefix}{key}: {vb!r} there, {va!r} now")
    return diffs


def existing_state(job_cfg: Config) -> str:
    """'new', 'incomplete', 'complete' or 'diverged' for the job's folder; a complete run made
    with other settings is an error."""
    path = Path(job_cfg.run.out)
    if not (path / SUMMARY).exists():
        return "new"
    try:
        summary = read_summary(path)
        saved = load_run_config(path)
    except ConfigError:
        return "incomplete"
    if summary.get("status") == "diverged":
        return "diverged"  # deterministic: training it again would diverge again
    if summary.get("status") != "complete":
        return "incomplete"
    try:  # fields added since the run was made read as their defaults
        saved = config_from_dict(saved).to_dict()
    except ConfigError as exc:
        raise ConfigError(f"{path} holds a run whose config this version cannot read ({exc}); "
                          "use another --out or delete that folder") from None
    diffs = _differences(_comparable(job_cfg.to_dict()), _comparable(saved))
    if diffs:
        raise ConfigError(f"{path} holds a complete run with other settings ({diffs[0]}); "
                          "use another --out or delete that folder")
    return "complete"


def run_matrix(cfg: Config, show_progress: bool = True, command: str | None = None) -> list[Path]:
    """Train every job not yet finished; returns the run folders in plan order."""
    jobs = plan(cfg)
    states = {job: existing_state(job_config(cfg, job)) for job in jobs}
    todo = [job for job in jobs if states[job] in ("new", "incomplete")]
    if len(todo) < len(jobs):
        console.info(f"{len(jobs) - len(todo)} of {len(jobs)} runs already finished in "
                     f"{cfg.compare.out}; skipping them")
    with console.progress(len(todo) * cfg.train.epochs, f"compare ({len(todo)} runs)",
                          show_progress) as bar:
        for job in todo:
            job_cfg = job_config(cfg, job)
            labelled = _Labelled(bar, str(job))
            path = Path(job_cfg.run.out)
            if states[job] == "incomplete" and (path / CHECKPOINT).exists():
                console.info(f"{job}: resuming from its checkpoint")
                _resume_or_note(path, labelled)
                continue
            if states[job] == "incomplete":
                console.info(f"{job}: an earlier attempt left no checkpoint; training it again")
                _clear(path)
            _train_or_note(job_cfg, command, labelled)
    return [job.run_dir(cfg.compare.out) for job in jobs]


def _train_or_note(job_cfg: Config, command: str | None, bar: Any) -> None:
    from .runner import train

    try:
        train(job_cfg, show_progress=False, command=command, bar=bar)
    except Diverged as exc:  # one diverged run must not stop the matrix
        console.info(f"{bar.label}: {exc}")


def _resume_or_note(path: Path, bar: Any) -> None:
    from .runner import resume

    try:
        resume(path, show_progress=False, bar=bar)
    except Diverged as exc:
        console.info(f"{bar.label}: {exc}")


class _Labelled:
    """Advance the matrix's bar per epoch, saying which run is training."""

    def __init__(self, bar: Any, label: str):
        self.bar, self.label = bar, label

    def advance(self, status: str = "") -> None:
        self.bar.advance(f"{self.label}: {status}")


def _clear(path: Path) -> None:
    """Remove a run folder we wrote (it has our config or summary), nothing else."""
    if (path / SUMMARY).exists() or (path / CONFIG).exists():
        shutil.rmtree(path)

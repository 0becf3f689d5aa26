"""fineprune's own trainer (engine/): runs named by the zoo's models and datasets, the data
identified before training, the schedule its own; an interrupted run resumes from its checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .... import console
from ....engine.records.record import CHECKPOINT, CONFIG, SUMMARY, held
from ....engine.setup.config import Config
from ....errors import ConfigError
from ...job import Job
from ..contract import HELD
from ..registry import TRAINERS


class Builtin:
    name = "builtin"
    help = "fineprune's own trainer (the engine), on the zoo's models and datasets"

    def takes(self, cfg: Config) -> bool:
        return True  # the default: it trains whatever no other trainer takes

    def names(self, cfg: Config, models: list[str], datasets: list[str]) -> tuple[list[str], list[str]]:
        return models, datasets

    def refuse(self, configs: list[tuple[Job, Config]]) -> None:
        """Each user's model (package.module:factory) called and given a tiny batch of its data's
        shape (`engine.training.build.check_factory`) before the plan is written: not a failure at its first run."""
        from ....engine.training.build import check_factory
        from ....models import is_factory

        checked = set()
        for job, job_cfg in configs:
            if is_factory(job.model) and (job.model, job.dataset) not in checked:
                checked.add((job.model, job.dataset))
                check_factory(job_cfg)

    def data_identity(self, job_cfg: Config) -> dict[str, str]:
        from ....engine.inputs.stream import data_identity

        return data_identity(job_cfg.data)

    def recorded_data(self, job_cfg: Config, known: dict[str, str] | None, recorded: dict[str, str]) -> Any:
        from ....engine.inputs.dataid import is_content
        from ....engine.inputs.stream import data_identity

        if known is None or (recorded and is_content(known) != is_content(recorded)):  # recorded before content ids
            return data_identity(job_cfg.data, recorded)
        return known

    def schedule_check(self, jobs: list[Job], out: str | Path) -> None:
        return None  # the shorter arms are made by compressing its own schedule

    def train(self, job_cfg: Config, state: str, command: str | None, bar: Any) -> None:
        _train(job_cfg, state, command, bar)


def _train(job_cfg: Config, state: str, command: str | None, bar: Any) -> None:
    """An incomplete run resumes from its checkpoint where it can."""
    path = Path(job_cfg.run.out)
    if state == "incomplete":
        if not (path / CHECKPOINT).exists():
            console.info(f"{bar.label}: an earlier attempt left no checkpoint; training it again")
        elif _resume_or_note(path, bar):
            return
        if held(path):  # taken meanwhile by another compare: it is that process's run now
            console.info(f"{bar.label}: {HELD}")
            return
        _clear(path)
    _train_or_note(job_cfg, command, bar)


def _train_or_note(job_cfg: Config, command: str | None, bar: Any) -> None:
    from ....engine.training.checkpoint import Diverged
    from ....runner import train

    try:
        train(job_cfg, show_progress=False, command=command, bar=bar)
    except Diverged as exc:  # one diverged run must not stop the matrix
        console.info(f"{bar.label}: {exc}")


def _resume_or_note(path: Path, bar: Any) -> bool:
    """Resume; False when the checkpoint can never be continued (an older format, or made with
    other settings), so the run is trained again. Any other failure stops the matrix and keeps
    the folder: a CUDA resume once failed this way on every run, and each was deleted."""
    from ....engine.training.checkpoint import Diverged, StaleCheckpoint
    from ....runner import resume

    console.info(f"{bar.label}: resuming from its checkpoint")
    try:
        resume(path, show_progress=False, bar=bar)
    except Diverged as exc:
        console.info(f"{bar.label}: {exc}")
    except StaleCheckpoint as exc:
        console.info(f"{bar.label}: {exc}; training it again")
        return False
    except ConfigError as exc:
        raise ConfigError(
            f"{bar.label}: {exc}; compare keeps {path} as it is (delete it to train the run anew)"
        ) from None
    return True


def _clear(path: Path) -> None:
    """Remove a run folder we wrote (it has our config or summary), nothing else."""
    if (path / SUMMARY).exists() or (path / CONFIG).exists():
        shutil.rmtree(path)


TRAINERS.register(Builtin())

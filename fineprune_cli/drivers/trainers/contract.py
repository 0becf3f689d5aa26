"""What a compare asks of whoever trains its runs. Each method answers one question compare
used to answer with `if script:` where it stood; an implementation answers all of them
(one module each in `kinds/`: builtin.py, script.py), and registry.py finds them and chooses one
from the config.

- `name`, `help`: the registry's key and a line on what it trains.
- `takes(cfg)`: whether the config is this trainer's (the default's answer is not asked). The implementations sit
below compare, so they are handed the job configs rather than the matrix.

- `names(cfg, models, datasets)`: the model and dataset names its runs are filed under.
- `refuse(configs)`: what would fail every run, refused in one line before the plan is written
  (`configs`: each job with its config).
- `data_identity(job_cfg)`: the data a run trains on, as compare can know it before training
  ({} where only the run itself can say).
- `recorded_data(job_cfg, known, recorded)`: what a finished run's recorded data is compared with
  when it is reused.
- `schedule_check(jobs, out)`: a check of each run's schedule as it ends, or None where the
  schedule is fineprune's own (`CompressionCheck`: do the shorter arms compress the regular one?).
- `train(job_cfg, state, command, bar)`: train one run whose folder is 'new' or 'incomplete'.
The dry run's plan and time of each trainer: `dryrun.DRY_PLANS`, under the trainer's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import FinepruneError

if TYPE_CHECKING:
    from ...engine.setup.config import Config
    from ..job import Job
    from .compressioncheck import CompressionCheck

HELD = "its folder is being written by another fineprune process: left to it (compare again once it has finished)"


class RunFailed(FinepruneError):
    """One run failed in a way that leaves the others to train (a user's script that exited
    non-zero): the matrix names it and goes on, and fails at its end. Any other error stops it."""

    exit_code = 1


class Trainer(Protocol):
    name: str
    help: str

    def takes(self, cfg: Config) -> bool: ...

    def names(self, cfg: Config, models: list[str], datasets: list[str]) -> tuple[list[str], list[str]]: ...

    def refuse(self, configs: list[tuple[Job, Config]]) -> None: ...

    def data_identity(self, job_cfg: Config) -> dict[str, str]: ...

    def recorded_data(self, job_cfg: Config, known: dict[str, str] | None, recorded: dict[str, str]) -> Any: ...

    def schedule_check(self, jobs: list[Job], out: str | Path) -> CompressionCheck | None: ...

    def train(self, job_cfg: Config, state: str, command: str | None, bar: Any) -> None: ...

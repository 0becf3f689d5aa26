"""The user's own training command (`compare --script`, drivers/trainers/scriptjob.py): runs named after
the script, the data known only once a run declares it, the schedule checked as each run ends."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....engine.setup.config import Config
from ....engine.setup.scriptconfig import runs_script
from ....errors import ConfigError
from ...job import Job
from ..registry import TRAINERS

if TYPE_CHECKING:  # it reads run records (torch): not imported for --help
    from ..compressioncheck import CompressionCheck


class Script:
    name = "script"
    help = "the user's own training command (compare --script)"

    def takes(self, cfg: Config) -> bool:
        return runs_script(cfg)

    def names(self, cfg: Config, models: list[str], datasets: list[str]) -> tuple[list[str], list[str]]:
        """A script trains one model on one dataset: their names file its runs (default: the
        script's file name, and 'data')."""
        from ..scriptjob import script_name

        if len(models) > 1 or len(datasets) > 1:
            raise ConfigError("--script trains one model on one dataset: give --model and --dataset one name each")
        return models or [script_name(cfg.script.command)], datasets or ["data"]

    def refuse(self, configs: list[tuple[Job, Config]]) -> None:
        """A command that cannot run would fail every run alike; its --model only names its runs."""
        from ..scriptjob import probe

        if configs:
            probe(configs[0][1])

    def data_identity(self, job_cfg: Config) -> dict[str, str]:
        return {}  # the script declares its data as it runs

    def recorded_data(self, job_cfg: Config, known: dict[str, str] | None, recorded: dict[str, str]) -> Any:
        return recorded  # compare cannot read the script's data: the run's own record stands

    def schedule_check(self, jobs: list[Job], out: str | Path) -> CompressionCheck:
        from ..compressioncheck import CompressionCheck

        return CompressionCheck(jobs, str(out))  # the user's own schedule: do the shorter arms compress it?

    def train(self, job_cfg: Config, state: str, command: str | None, bar: Any) -> None:
        from ..scriptjob import clear_attempt, run_script

        if state == "incomplete":
            clear_attempt(Path(job_cfg.run.out))
        run_script(job_cfg, bar, command)


TRAINERS.register(Script())

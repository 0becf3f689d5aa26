"""`--executor slurm`: each run one task of a Slurm job array, submitted through submitit
(`executors/slurmjobs.py`; the calls to sbatch, squeue and sacct in `slurmcalls.py`), with its own settings
section, compare.slurm: the fields below by their flags or YAML keys, and any other name in that
mapping one of submitit's own sbatch settings (both in `executors/slurmsettings.py`)."""

from __future__ import annotations

import shutil
from typing import Any

from ....errors import ConfigError
from ..contract import Executor, Kind, Matrix
from ..registry import EXECUTORS
from ..slurmsettings import SlurmConfig, read


class Slurm(Kind):
    name = "slurm"
    help = "each run a task of a Slurm job array, through submitit; its settings in compare.slurm"
    settings = SlurmConfig
    stops_on_refusal = False  # its runs go on on the cluster; they are checked once all ended
    read = staticmethod(read)

    @staticmethod
    def own(c: Matrix) -> SlurmConfig:
        return c.executor_settings if isinstance(c.executor_settings, SlurmConfig) else SlurmConfig()

    def make(self, cfg: Any, c: Matrix) -> Executor:
        for command in ("sbatch", "srun"):  # submitit's job script runs each task through srun
            if shutil.which(command) is None:
                raise ConfigError(f"--executor slurm needs Slurm's {command} on the PATH, and there is none here")
        from ..slurmjobs import SlurmRunner

        return SlurmRunner(self.own(c), c.out)

    def pace(self, cfg: Any, c: Matrix) -> tuple[int, int | None]:
        return 0, self.own(c).cpus_per_task or None

    def detached(self, c: Matrix) -> bool:
        return self.own(c).detach


EXECUTORS.register(Slurm())

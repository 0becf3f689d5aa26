"""`--executor local`: this machine, `--jobs` runs at once, each its own process pinned to its
slot's cores (`executors/local.py`). The default executor."""

from __future__ import annotations

from typing import Any

from .. import local
from ..contract import Kind, Matrix, Placement
from ..registry import EXECUTORS


class Local(Kind):
    name = "local"
    help = "this machine, --jobs at once"

    def make(self, cfg: Any, c: Matrix) -> local.LocalExecutor:
        return local.local_executor(cfg, c)

    def refuse(self, cfg: Any, c: Matrix) -> None:
        local.local_executor(cfg, c)

    def in_process(self, c: Matrix) -> bool:
        return c.jobs == 1 and c.threads == 0

    def pace(self, cfg: Any, c: Matrix) -> tuple[int, int | None]:
        if self.in_process(c):
            return 1, None
        executor = local.local_executor(cfg, c)
        return len(executor.slots), executor.threads

    def placement(self, cfg: Any, c: Matrix) -> Placement:
        """The first slot's threads and cores: a run times as the runs of --jobs and --threads will."""
        if self.in_process(c):  # compare trains in its own process: torch's threads, compare's cores
            return Placement({})
        executor = local.local_executor(cfg, c)
        slot = executor.slots[0]
        return Placement(slot.variables(executor.threads, len(executor.slots)), slot.cores)


EXECUTORS.register(Local())

"""The child entry point: one run of a `compare` matrix in a process of its own, `python -m
fineprune_cli.drivers.executors.child <job.yaml>` (the local executor) or `run(<job.yaml>)` (a
Slurm task, through submitit; any executor's process).

The task reads its folder's state itself: a new folder trains, an incomplete one resumes from
its checkpoint, a complete or diverged one is left as it is. So starting a task again (a
requeued Slurm task, a later `compare`) continues the run instead of training it twice.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ... import console
from ...engine.records.jobenv import THREADS
from ...errors import FinepruneError


class Label:
    """What `reuse.train_job` reports through when nobody watches the epochs (the parent
    reads them from the run folder)."""

    def __init__(self, label: str):
        self.label = label

    def advance(self, *args: Any, **kwargs: Any) -> None:
        pass


def run(config: str | Path, command: str | None = None) -> None:
    """Train, resume or leave the job whose config compare wrote to `config`."""
    from ...engine.setup.config import config_from_dict, load_yaml, validate
    from ..reuse import HELD, existing_state, train_job

    threads = os.environ.get(THREADS)
    if threads:  # OMP_NUM_THREADS says the same; set here too in case torch read it otherwise
        import torch

        torch.set_num_threads(int(threads))
    cfg = validate(config_from_dict(load_yaml(config), str(config)))
    state = existing_state(cfg)
    label = f"{cfg.model.name} on {cfg.data.dataset}, {cfg.run.arm or cfg.policy}, seed {cfg.run.seed}"
    if state in ("new", "incomplete"):
        train_job(cfg, state, command, Label(label))
    elif state == "held":
        console.info(f"{label}: {HELD}")


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        console.error("usage: python -m fineprune_cli.drivers.executors.child JOB.yaml [COMMAND]")
        return 2
    try:
        run(argv[0], argv[1] if len(argv) > 1 else None)
    except FinepruneError as exc:
        (console.stopped if exc.stop else console.error)(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        console.stopped("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The matrix run: every job of a `compare` not yet finished, in this process one after the
other, or as tasks of an executor (`--jobs`, `--threads`, `--executor slurm`). Kept apart from
`compare` so the executors, which need `compare`'s job configs, sit between the two."""

from __future__ import annotations

from pathlib import Path

from .. import console
from ..engine.config import Config
from .compare import CompareConfig, job_config, plan
from .reuse import existing_state, train_job
from .progress import MatrixProgress, Planned


def run_matrix(cfg: Config, c: CompareConfig, show_progress: bool = True, command: str | None = None) -> list[Path]:
    """Train every job not yet finished; returns the run folders in plan order."""
    from ..engine.stream import data_identity

    jobs = plan(cfg, c)
    identities: dict[str, dict[str, str]] = {}  # listing a large folder once, not once a job
    states = {}
    for job in jobs:
        job_cfg = job_config(cfg, job, c.out)
        if job.dataset not in identities:
            identities[job.dataset] = data_identity(job_cfg.data)
        states[job] = existing_state(job_cfg, identities[job.dataset])
    todo = [job for job in jobs if states[job] in ("new", "incomplete")]
    if len(todo) < len(jobs):
        console.info(f"{len(jobs) - len(todo)} of {len(jobs)} runs already finished in {c.out}; skipping them")
    planned = [Planned((job.model, job.dataset), str(job), job_config(cfg, job, c.out).train.epochs) for job in todo]
    if not in_process(c):  # --jobs, --threads, --executor slurm: each run a task of an executor
        from .parallel import run_tasks

        run_tasks(cfg, c, todo, command, show_progress)
        return [job.run_dir(c.out) for job in jobs]
    with console.progress(sum(p.epochs for p in planned), f"compare ({len(todo)} runs)", show_progress) as bar:
        matrix = MatrixProgress(bar, planned)
        for i, job in enumerate(todo):
            with matrix.run(i) as labelled:
                train_job(job_config(cfg, job, c.out), states[job], command, labelled)
    return [job.run_dir(c.out) for job in jobs]


def in_process(c: CompareConfig) -> bool:
    """Today's path: one run after the other in this process, with torch's own thread count."""
    return c.executor == "local" and c.jobs == 1 and c.threads == 0

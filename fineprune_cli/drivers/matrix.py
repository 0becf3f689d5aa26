"""The matrix run: every job of a `compare` not yet finished, in this process one after the
other, or as tasks of an executor (`--jobs`, `--threads`, `--executor`). Kept apart from
`compare` so the executors, which need `compare`'s job configs, sit between the two."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Iterable

from .. import console
from ..analysis.decide import plan as plans
from ..analysis.decide.judging import Judging
from ..analysis.group.paired import is_baseline
from ..analysis.read.runs import load_runs
from ..analysis.study import Study, study, with_left_out
from ..engine.setup.config import Config
from ..pruning.policy import random_equal_note
from .compare import CompareConfig, Job, job_config, plan
from .executors import registry
from .parallel import RunsFailed
from .progress import MatrixProgress, Planned
from .reuse import HELD, existing_state, train_job
from .trainers.contract import RunFailed
from .trainers.registry import trainer_for


def run_matrix(
    cfg: Config,
    c: CompareConfig,
    show_progress: bool = True,
    command: str | None = None,
    later: tuple[list[Job], str] = ([], ""),
) -> list[Path]:
    """Train every job not yet finished; returns the run folders in plan order. `later`: the
    jobs the looks after this one may train, and their name, for the whole plan's ETA."""
    cfg = under_plan(cfg, Path(c.out))
    trainer = trainer_for(cfg)
    jobs = plan(cfg, c)
    identities: dict[str, dict[str, str]] = {}  # listing a large folder once, not once a job
    states = {}
    for job in jobs:
        job_cfg = job_config(cfg, job, c.out)
        if job.dataset not in identities:
            identities[job.dataset] = trainer.data_identity(job_cfg)
        states[job] = existing_state(job_cfg, identities[job.dataset])
    todo = [job for job in jobs if states[job] in ("new", "incomplete")]
    for job in (j for j in jobs if states[j] == "held"):
        console.info(f"{job}: {HELD}")
    left_out = _left_out([job.run_dir(c.out) for job in jobs if states[job] == "complete"])
    finished = sum(states[j] in ("complete", "diverged") and j.run_dir(c.out) not in left_out for j in jobs)
    if finished:
        console.info(f"{finished} of {len(jobs)} runs already finished in {c.out}; skipping them")
    guard = trainer.schedule_check(jobs, c.out)
    if guard:
        guard.after(j for j in jobs if states[j] == "complete")
    planned = [Planned((job.model, job.dataset), str(job), job_config(cfg, job, c.out).train.epochs) for job in todo]
    # named after every refusal (an executor's too), just before the first run trains
    named = random_equal_lines((job, job_config(cfg, job, c.out)) for job in todo)
    if not in_process(c):  # --jobs, --threads, --executor: each run a task of an executor
        from .parallel import run_tasks

        more = (sum(job_config(cfg, j, c.out).train.epochs for j in later[0]), later[1])
        run_tasks(cfg, c, todo, command, show_progress, guard.task_done if guard else None, named, more)
        if guard:  # the runs of an executor it could not check as each ended (Slurm's)
            guard.after(todo)
        return [job.run_dir(c.out) for job in jobs]
    for line in named:
        console.info(line)
    failed = []
    with console.progress(sum(p.epochs for p in planned), f"compare ({len(todo)} runs)", show_progress) as bar:
        more = [Planned((j.model, j.dataset), str(j), job_config(cfg, j, c.out).train.epochs) for j in later[0]]
        matrix = MatrixProgress(bar, planned, later=more, looks=later[1])
        for i, job in enumerate(todo):
            try:
                with matrix.run(i) as labelled:
                    train_job(job_config(cfg, job, c.out), states[job], command, labelled)
            except RunFailed as exc:  # one run failing must not stop the others
                console.error(str(exc))
                failed.append(job)
                continue
            if guard:
                guard.after([job])
    if failed:
        raise RunsFailed(len(failed), len(todo))
    return [job.run_dir(c.out) for job in jobs]


def under_plan(cfg: Config, out: Path) -> Config:
    """`cfg` with the digest of the judging plan recorded in `out` ('' where none is), which each
    run made in it records: a report tells a plan.json changed after its runs by it."""
    path = out / plans.PLAN_FILE
    stamped = copy.deepcopy(cfg)
    stamped.run.plan = plans.read(path).digest if path.is_file() else ""
    return stamped


def _left_out(finished: list[Path]) -> set[Path]:
    """The finished runs whose records a report would leave out (a figure outside its meaning,
    a copy of another seed's run), each said with its reason: reused, they would vanish from the
    decisions later without a word, or for a wrong one (too few seeds)."""
    problems = load_runs(finished)[1] if finished else []
    for p in problems:
        console.info(
            f"left out {p.path}: {p.status} ({p.reason}); delete that folder and compare again to train it anew"
        )
    return {p.path for p in problems}


def in_process(c: CompareConfig) -> bool:
    """One run after the other in this process, with torch's own thread count, where the executor says so."""
    return registry.kind(c.executor).in_process(c)


def refusals(cfg: Config, c: CompareConfig) -> list[Job]:
    """The matrix's refusals, before anything is written (its plan included): every job's
    config, and --jobs or --threads beyond this machine."""
    jobs = plan(cfg, c)
    registry.kind(c.executor).refuse(cfg, c)
    trainer_for(cfg).refuse([(job, job_config(cfg, job, c.out)) for job in jobs])
    return jobs


def random_equal_lines(jobs: Iterable[tuple[Job, Config]]) -> list[str]:
    """'<model> on <dataset>, <arm>: <why>' once per arm whose policy equals its random control in
    every pruning epoch (`pruning.policy.random_equal_note`); the seeds of an arm share it."""
    lines: dict[str, str] = {}
    for job, job_cfg in jobs:
        arm = f"{job.model} on {job.dataset}, {job.arm}"
        if arm not in lines:
            lines[arm] = random_equal_note(job_cfg.policy, job_cfg.prune, job_cfg.train.epochs) or ""
    return [f"{arm}: {note}" for arm, note in lines.items() if note]


def record_plan(c: CompareConfig, judging: Judging, jobs: list[Job], looks: list[int] | None = None) -> plans.Plan:
    """The folder's judging plan, recorded before its first run (`analysis.decide.plan.record`) with its
    family (the scored policies of `jobs`, on their models and datasets) and seeds; looks None:
    the ones already planned there, if any. Where this compare goes beyond a plan kept from
    before its runs, it says so: those decisions will be post hoc."""
    out = Path(c.out)
    runs = len(load_runs([out])[0]) if out.is_dir() else 0
    family = family_of(jobs)
    recorded = plans.record(out, judging, looks, runs, family, sorted({j.seed for j in jobs}))
    for line in plans.beyond(recorded, family, [] if looks else c.seeds):
        console.info(f"beyond the plan in {recorded.path}: {line}; decisions over these runs will be post hoc")
    return recorded


def family_of(jobs: list[Job]) -> plans.Family:
    """The policies a plan's alpha is shared over: every arm a decision is made for."""
    unique = lambda xs: tuple(dict.fromkeys(xs))  # noqa: E731
    scored = unique(j.arm for j in jobs if not is_baseline(j.arm))
    return plans.Family(scored, unique(j.model for j in jobs), unique(j.dataset for j in jobs))


def judged_matrix(
    cfg: Config, c: CompareConfig, judging: Judging, show_progress: bool = True, command: str | None = None
) -> Study:
    """`compare` without looks: the plan recorded, every job trained, one study of its runs."""
    recorded = record_plan(c, judging, refusals(cfg, c))
    dirs = run_matrix(cfg, c, show_progress=show_progress, command=command)
    runs, problems = load_runs(dirs)
    return with_left_out(study(runs, judging, [recorded]), problems)

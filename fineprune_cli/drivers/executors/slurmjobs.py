"""`compare --executor slurm`'s runner: each run one task of a Slurm job array, through submitit.

The task is the child entry point's (child.py on the job's config), wrapped as a
submitit Checkpointable: on preemption or time-out Slurm signals it, submitit requeues it
with the same arguments, and the requeued task finds its run incomplete and resumes from the
run's own checkpoint (written every epoch). The job ids are kept in <out>/.jobs/slurm.json,
so `--detach` can return at once and a later `compare` with the same arguments collects
what finished, waits for what is still queued or running, and submits only what is missing.
The calls to sbatch, squeue and sacct, each bounded in time, are in slurmcalls.py; the
settings in slurmsettings.py.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from ... import console
from ...engine.records.files import atomic_write_text
from ...errors import ConfigError, FinepruneError
from ..job import JOBS
from .contract import POLL_S, Outcome, Task, Watch
from .slurmcalls import Lost, held, submitting
from .slurmsettings import SlurmConfig

LEDGER = "slurm.json"


class Detached(FinepruneError):
    """`--detach`: the runs are submitted; not a failure."""

    exit_code = 0
    stop = True


class StoppedWaiting(FinepruneError):
    """Ctrl-C or SIGTERM while compare waits on Slurm: its runs go on there, as after --detach."""

    exit_code = 130
    stop = True

    def __init__(self, waiting: list[str]):
        arrays = sorted({job_id.split("_")[0] for job_id in waiting})
        super().__init__(
            f"stopped waiting: {len(waiting)} run(s) stay queued or running on Slurm (job {', '.join(arrays)}); "
            f"`compare` again collects them, `scancel {' '.join(arrays)}` stops them"
        )


class FinepruneTask(submitit.helpers.Checkpointable):
    """One run on a Slurm node. Checkpointable's own `checkpoint` resubmits it with the same
    arguments, which is all a requeue needs: the run's folder holds its state."""

    def __call__(self, config: str, command: str | None) -> None:
        from .child import run

        run(config, command)


def parameters(s: SlurmConfig) -> dict[str, Any]:
    """sbatch settings from the compare.slurm section (None: Slurm's own default)."""
    given = {
        "partition": s.partition or None,
        "time": s.time,
        "gpus_per_task": s.gpus_per_task or None,
        "account": s.account or None,
        "cpus_per_task": s.cpus_per_task or None,
        "job_name": "fineprune",
    }
    return {**{k: v for k, v in given.items() if v is not None}, **s.options}


# a run stopped by SIGTERM after its epoch (engine.training.checkpoint.Stopped), in submitit's trace
STOPPED = re.compile(r"^[\w.]*\b(?:Stopped|Interrupted): (.+?)(?:; continue with.*)?$", re.M)


def failure_line(error: BaseException | str | None) -> str:
    """The task's own error line out of submitit's report (a traceback between rulers); a task
    that Slurm preempted says so, not 'failed during processing'."""
    text = str(error or "")
    stopped = STOPPED.findall(text)
    if stopped or re.search(r"\(state: PREEMPTED\)", text):
        how = f" ({stopped[-1]})" if stopped else ""
        return f"preempted by Slurm (or cancelled){how}; `compare` again resumes it from its checkpoint"
    raised = [m.group(1) for m in re.finditer(r"^\w[\w.]*(?:Error|Exception|Exit)\w*: (.+)$", text, re.M)]
    lines = [x for x in text.splitlines() if x.strip()]
    return raised[-1] if raised else (lines[0] if lines else "the task ended without a result")


@dataclass
class SlurmRunner:
    s: SlurmConfig
    out: str

    @property
    def folder(self) -> Path:
        return Path(self.out).resolve() / JOBS / "slurm"

    def _ledger(self) -> dict[str, str]:
        try:
            data = json.loads((self.folder.parent / LEDGER).read_text())
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self, ledger: dict[str, str]) -> None:
        atomic_write_text(self.folder.parent / LEDGER, json.dumps(ledger, indent=1) + "\n")

    def submit(self, tasks: list[Task]) -> dict[Task, submitit.SlurmJob]:
        """The tasks' jobs: those still queued or running from an earlier `compare`, and new ones."""
        ledger, jobs = self._ledger(), {}
        earlier = {t: ledger[str(t.config)] for t in tasks if ledger.get(str(t.config))}
        earlier = {t: j for t, j in earlier.items() if not self._job(j).paths.result_pickle.exists()}
        if earlier:
            queued = held(set(earlier.values()), self.s.submit_timeout)
            if queued is None:  # submitting again could train a run twice at once
                raise FinepruneError(
                    f"cannot tell whether {len(earlier)} run(s) submitted earlier (Slurm job "
                    f"{', '.join(sorted({j.split('_')[0] for j in earlier.values()}))}) are still queued or "
                    "running: neither squeue nor sacct answered; compare again once they do"
                )
            jobs = {t: self._job(j) for t, j in earlier.items() if queued.get(j, False)}
        missing = [t for t in tasks if t not in jobs]
        if missing:
            executor = submitit.SlurmExecutor(folder=self.folder)
            try:
                executor.update_parameters(**parameters(self.s))
            except ValueError as exc:  # a compare.slurm name submitit does not know: its list follows
                raise ConfigError(f"compare.slurm: {' '.join(str(exc).split())}") from None
            new = submitting(
                self.folder,
                self.s.submit_timeout,
                lambda: executor.map_array(
                    FinepruneTask(), [str(t.config) for t in missing], [t.command for t in missing]
                ),
            )
            jobs.update(zip(missing, new))
            ledger.update({str(t.config): j.job_id for t, j in zip(missing, new)})
            self._save(ledger)
            console.info(f"submitted {len(missing)} run(s) to Slurm: job {new[0].job_id.split('_')[0]}")
        return jobs

    def _job(self, job_id: str) -> submitit.SlurmJob:
        return submitit.SlurmJob(folder=self.folder, job_id=job_id)

    def run(self, tasks: list[Task], watch: Watch) -> list[Outcome]:
        jobs = self.submit(tasks)
        if self.s.detach:
            raise Detached(
                f"{len(jobs)} run(s) queued or running on Slurm; `compare` again with the same "
                "arguments collects what finished and submits what is missing"
            )
        try:
            return self._wait(jobs, watch)
        except KeyboardInterrupt:
            raise StoppedWaiting([job.job_id for job in jobs.values()]) from None

    def _wait(self, jobs: dict[Task, submitit.SlurmJob], watch: Watch) -> list[Outcome]:
        """Until every job has a result or is lost; `jobs` loses each as it ends."""
        outcomes, running, lost = [], set(), Lost(self.s.submit_timeout)
        while jobs:
            ended = lost.check({j.job_id for j in jobs.values()})
            for task, job in list(jobs.items()):
                if job.paths.result_pickle.exists() or job.job_id in ended:
                    outcome = self._outcome(task, job)
                    outcomes.append(outcome)
                    del jobs[task]
                    watch.changed(task, "done" if outcome.ok else f"failed: {outcome.error}")
                elif task not in running and (task.run_dir / "summary.json").exists():
                    running.add(task)
                    watch.changed(task, "running")
            watch.tick()
            if jobs:
                time.sleep(POLL_S)
        return outcomes

    @staticmethod
    def _outcome(task: Task, job: submitit.SlurmJob) -> Outcome:
        """Its result, read from the run folder the task wrote and the task's log (no sacct: a cluster
        may have none), never by unpickling submitit's result file: <out>/.jobs/slurm/ is data like a
        run folder, and a pickle planted there would run code when loaded (issue 57)."""
        try:
            status = json.loads((task.run_dir / "summary.json").read_text()).get("status")
        except (OSError, ValueError, AttributeError):
            status = None
        if status in ("complete", "diverged"):  # as the local executor's exit code 0
            return Outcome(task, True, "")
        if not job.paths.result_pickle.exists():
            error = "the task ended without a result (killed, or its node failed)"
        else:  # submitit wrote the task's traceback into its log
            try:
                error = failure_line(job.paths.stderr.read_text(errors="replace")[-20_000:])
            except OSError:
                error = "the task failed, and its log cannot be read"
        return Outcome(task, False, f"{error} (Slurm job {job.job_id}; logs: {job.paths.stderr})")

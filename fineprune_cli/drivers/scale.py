"""`fineprune scale`: the same training on 1, 2, 4 ... processes, as in Campos et al. (2017).

Each configuration is an ordinary `fineprune train` run (through torch.distributed's launcher
when it has more than one process), with one thread per process so that N processes use N
cores. A 1-process synchronous run is always among them: it is the paper's baseline, against
which every configuration's speedup is computed (`scale_table` makes the tables).

What `--nproc` counts: on one node, the workers (async and mixed add their `--num-ps` server
processes); with `--nnodes N > 1`, the processes of each node (torchrun's `--nproc-per-node`,
the same on every node), so a run has nproc x N processes, of which the first num_ps ranks are
the servers in async/mixed. Each node runs the same `fineprune scale` command with its own
`--node-rank`; the runs meet at `--rdzv-endpoint`, one after the other. The 1-process baseline
runs last, on node rank 0 only (the others have finished by then), and node rank 0 writes the
tables, so `--out` must be a folder all nodes share.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..distributed.launch import MAX_NPROC, parse_endpoint
from ..engine.records.files import atomic_write_text, read_regular_text
from ..engine.records.fingerprint import drop_unused
from ..engine.records.record import Status, read_summary
from ..engine.setup import yamlvalues
from ..engine.setup.config import Config, RunConfig, validate
from ..engine.training.world import alone
from ..errors import ConfigError
from ..settings import check_section
from .scale_table import Targets, table, write_tables

MODES = ("sync", "async", "mixed")  # async/mixed: workers plus --num-ps parameter-server processes


@dataclass(frozen=True)
class Job:
    """One configuration: `nproc` as the command line gives it (see the module's docstring)."""

    mode: str
    nproc: int
    num_ps: int = 1
    nnodes: int = 1

    @property
    def servers(self) -> int:
        return 0 if self.mode == "sync" else self.num_ps

    @property
    def per_node(self) -> int:
        return self.nproc + self.servers if self.nnodes == 1 else self.nproc

    @property
    def processes(self) -> int:
        return self.per_node * self.nnodes

    @property
    def workers(self) -> int:
        return self.processes - self.servers

    def folder(self, cfg: Config) -> str:
        """What varies goes into the name; num_ps 1 and one node are left out, so folders of
        earlier `scale` commands keep their names."""
        name = f"{cfg.model.name}-{cfg.data.dataset}-{self.mode}-n{self.workers}"
        name += f"-ps{self.num_ps}" if self.servers > 1 else ""
        return name + (f"-nodes{self.nnodes}" if self.nnodes > 1 else "")


BASELINE = Job("sync", 1)


@dataclass(frozen=True)
class Launch:
    """Where this `scale` command runs: node `node_rank` of `nnodes`."""

    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None

    def check(self) -> None:
        if self.nnodes < 1:
            raise ConfigError(f"--nnodes must be a positive integer, got {self.nnodes}")
        if self.nnodes == 1:
            if self.node_rank or self.endpoint is not None:
                raise ConfigError("--node-rank and --rdzv-endpoint need --nnodes > 1")
            return
        if self.endpoint is None or not self.endpoint.strip():
            raise ConfigError("--nnodes > 1 needs --rdzv-endpoint host:port (node rank 0's address)")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank must be between 0 and {self.nnodes - 1}, got {self.node_rank}")
        parse_endpoint(self.endpoint)


def plan(nprocs: list[int], modes: list[str], num_ps: list[int] | None = None, launch: Launch = Launch()) -> list[Job]:
    """The configurations to run, baseline (1-process sync) last, each once."""
    num_ps = [1] if num_ps is None else num_ps
    launch.check()
    if not nprocs or any(not 1 <= n <= MAX_NPROC for n in nprocs):
        raise ConfigError(f"--nproc takes positive integers up to {MAX_NPROC}, e.g. 1,2,4")
    if not num_ps or any(k < 1 for k in num_ps):
        raise ConfigError("--num-ps takes positive integers, e.g. 1,2")
    if not modes:
        raise ConfigError(f"--dist-mode names no mode; choose from: {', '.join(MODES)}")
    for mode in modes:
        if mode not in MODES:
            raise ConfigError(f"unknown --dist-mode {mode}; choose from: {', '.join(MODES)}")
    if set(modes) == {"sync"} and num_ps != [1]:
        raise ConfigError("--num-ps applies to --dist-mode async and mixed only")
    jobs = []
    for mode in dict.fromkeys(modes):
        for n in sorted(set(nprocs)):
            for k in sorted(set(num_ps)) if mode != "sync" else [1]:
                jobs.append(_checked(Job(mode, n, k, launch.nnodes)))
    return [j for j in jobs if j != BASELINE] + [BASELINE]


def _checked(job: Job) -> Job:
    # the launched run would check its --num-ps only after starting: refuse it here, as it would
    check_section(RunConfig(dist_mode=job.mode, num_ps=job.num_ps), "")
    if job.workers < 1:  # only with several nodes, where the servers are among the processes
        raise ConfigError(
            f"--nproc {job.nproc} x --nnodes {job.nnodes} processes leave no worker "
            f"beside {job.num_ps} parameter servers"
        )
    return job


def run_scale(
    cfg: Config, jobs: list[Job], out: Path, command: str, targets: Targets | None = None, launch: Launch = Launch()
) -> tuple[list[dict[str, Any]], Path] | None:
    """Run (or reuse) every job; on node rank 0, write and return the table rows and scale.md."""
    validate(cfg)
    targets = targets or Targets()
    targets.check()
    bpw = cfg.train.batch_per_worker
    if bpw is None and any(cfg.train.batch_size % j.processes for j in jobs if j.mode == "sync"):
        raise ConfigError(
            f"--batch-size {cfg.train.batch_size} must divide by every sync run's processes "
            "(or give --batch-per-worker)"
        )
    _check_folder(out)
    for job in jobs:  # before any training: the baseline, run last, once failed after 11 minutes
        existing = out / "runs" / job.folder(cfg)
        if (existing / "summary.json").exists():
            _check_same_settings(existing, job_config(cfg, job))
    dirs = {}
    for job in jobs:
        if job.nnodes == 1 and launch.node_rank:  # the baseline: node rank 0 runs it alone
            continue
        dirs[job] = run_one(cfg, job, out, launch)
    if launch.node_rank:
        return None
    ordered = sorted(dirs.items(), key=lambda item: item[0] != BASELINE)  # the baseline's row first
    rows = table(ordered, targets)
    return rows, write_tables(rows, [d for _, d in ordered], out, command)


def job_config(cfg: Config, job: Job) -> str:
    """The YAML a job's run gets: the command's settings with this job's mode and servers."""
    config = cfg.to_dict()
    config["run"]["out"] = None
    config["run"]["dist_mode"] = job.mode
    config["run"]["num_ps"] = job.num_ps
    return yaml.safe_dump(config, sort_keys=False)


def train_command(job: Job, config_file: Path, run_dir: Path, launch: Launch = Launch()) -> list[str]:
    """The `fineprune train` command of one job on this node (pure: nothing runs)."""
    cmd = [
        sys.executable,
        "-m",
        "fineprune_cli",
        "train",
        "--config",
        str(config_file),
        "--out",
        str(run_dir),
        "--json",
    ]
    if job.processes > 1:
        cmd += ["--nproc-per-node", str(job.per_node)]
    if job.nnodes > 1:
        cmd += [
            "--nnodes",
            str(job.nnodes),
            "--node-rank",
            str(launch.node_rank),
            "--rdzv-endpoint",
            str(launch.endpoint),
        ]
    return cmd


def run_one(cfg: Config, job: Job, out: Path, launch: Launch = Launch()) -> Path:
    run_dir = out / "runs" / job.folder(cfg)
    text = job_config(cfg, job)
    if (run_dir / "summary.json").exists():
        _check_same_settings(run_dir, text)
        if read_summary(run_dir).status == Status.COMPLETE:
            return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "scale-config.yaml", text)
    env = dict(alone(os.environ), OMP_NUM_THREADS="1")  # under srun: the baseline is no rank of scale's step
    cmd = train_command(job, run_dir / "scale-config.yaml", run_dir, launch)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise ConfigError(
            f"the {job.processes}-process {job.mode} run failed: {failure_reason(proc.stderr, run_dir)} (see {run_dir})"
        )
    return run_dir


def failure_reason(stderr: str, run_dir: Path) -> str:
    """Why a run failed, in one line: its record's divergence, else the child's own `error:` line,
    else its last line of text. torchrun ends a failed job with a banner, and its last line, a row
    of '=', was once the whole message."""
    try:
        summary = read_summary(run_dir)
    except ConfigError:  # no record, or an unreadable one
        summary = None
    if summary is not None and summary.status == Status.DIVERGED:
        return (
            f"diverged at epoch {summary.diverged_epoch} (its loss is not finite; try a smaller --lr: "
            "stale updates, async and mixed, need one below the synchronous recipe's)"
        )
    lines = [line.strip() for line in stderr.splitlines() if line.strip(" =-_\t")]
    ours = [line for line in lines if line.startswith("error:")]
    return ours[-1].removeprefix("error:").strip() if ours else (lines or ["no output"])[-1]


def _check_same_settings(run_dir: Path, text: str) -> None:
    """A folder from another `scale` (other model, epochs, lr ...) must not be reported under
    this command's settings. Settings a run does not use (a sync run's group size, an unset
    --batch-per-worker) do not count, so folders made before those settings existed are reused."""
    try:
        theirs = yamlvalues.load(read_regular_text(run_dir / "scale-config.yaml"))
        same = _used(theirs) == _used(yamlvalues.load(text))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, AttributeError, TypeError):
        same = False
    if not same:
        raise ConfigError(
            f"{run_dir} holds a run with other settings than this command's; choose another --out or delete that folder"
        )


def _used(config: dict[str, Any]) -> dict[str, Any]:
    config = drop_unused(config)
    if config["run"].get("dist_mode") == "async":  # groups exist in mixed mode only
        config["run"].pop("group_size", None)
    return config


def _check_folder(out: Path) -> None:
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write --out {out}: {exc.strerror or exc}") from None

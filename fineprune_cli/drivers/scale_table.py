"""The tables of `fineprune scale`, read from its run folders (Campos et al. 2017, Tables 1-3).

Speedup is throughput against the 1-process synchronous run, the paper's single-node baseline,
for every mode. Efficiency divides it by all the processes a run used, parameter servers
included: here each server is a process of its own, like the paper's dedicated PS nodes, which
its efficiency counts (Table 1, "7 Nodes (4 Workers + 3 PS)"). speedup_per_worker divides by
the workers only, which is the paper's figure where servers share the workers' nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.records.files import atomic_write_text, to_csv, to_markdown
from ..engine.records.record import read_metrics, read_summary
from ..errors import ConfigError, FinepruneError

COLUMNS = """\
- mode: sync (DDP), async or mixed (parameter servers); workers: processes that compute gradients; \
servers: parameter-server processes (--num-ps; 0 in sync); nodes: machines (--nnodes); processes: \
workers + servers
- images_per_s: training images per second of training time (evaluation excluded)
- speedup: images_per_s / that of the 1-process sync run (the baseline, first row), as the \
paper's Tables 1-2 against one node; efficiency: speedup / processes, servers counted (the \
paper counts the nodes its servers occupy); speedup_per_worker: speedup / workers, servers \
not counted
- final_accuracy: test accuracy after the last epoch (Table 3); target_accuracy: --target-accuracy, \
by default the lowest final_accuracy of the table, so every run reaches it; seconds_to_accuracy: \
training seconds until an epoch's test accuracy first reached it (empty: never)
- target_train_loss: --target-loss, by default the highest final training loss among the runs \
whose loss fell; seconds_to_loss: training seconds until an epoch's training loss first reached \
it (Figure 3; empty: never)
- train_seconds: total training time; staleness_mean / _max: server version - the version a \
gradient was computed on (async/mixed)"""


@dataclass(frozen=True)
class Targets:
    loss: float | None = None  # training loss; None: the highest final loss of the runs that learned
    accuracy: float | None = None  # test accuracy in percent; None: the lowest final accuracy

    def check(self) -> None:
        if self.loss is not None and not (math.isfinite(self.loss) and self.loss > 0):
            raise ConfigError(f"--target-loss must be a positive number, got {self.loss}")
        if self.accuracy is not None and not (math.isfinite(self.accuracy) and 0 < self.accuracy <= 100):
            raise ConfigError(f"--target-accuracy must be a percentage in (0, 100], got {self.accuracy}")


def measure(run_dir: Path) -> dict[str, Any]:
    try:
        s, rows = read_summary(run_dir), read_metrics(run_dir)
    except FinepruneError as exc:  # e.g. several nodes and an --out they do not share
        raise ConfigError(
            f"cannot read the run in {run_dir} (with --nnodes > 1, --out must be a folder all nodes share): {exc}"
        ) from None
    if not rows or s.train_seconds <= 0:
        raise ConfigError(f"{run_dir} has no finished epoch to measure")
    return {
        "summary": s,
        "train_loss": [r.train_loss for r in rows],
        "accuracy": [r.test_accuracy for r in rows],
        "seconds": [r.train_seconds for r in rows],
    }


def time_to(target: float, m: dict[str, Any], key: str = "train_loss") -> float | None:
    """Training seconds until an epoch's `key` first reached `target` (loss: at or below it;
    accuracy: at or above it); None if no epoch did."""
    elapsed = 0.0
    for value, seconds in zip(m[key], m["seconds"]):
        elapsed += seconds
        if (value <= target) if key == "train_loss" else (value >= target):
            return elapsed
    return None


def table(results: list[tuple[Any, Path]], targets: Targets = Targets()) -> list[dict[str, Any]]:
    """One row per (job, run folder); the 1-process sync job must be among them."""
    measured = [(job, measure(run_dir)) for job, run_dir in results]
    base = [m for job, m in measured if job.mode == "sync" and job.processes == 1]
    if not base:
        raise ConfigError("no 1-process sync run to compute the speedups against")
    base_rate = _rate(base[0]["summary"])
    loss = targets.loss if targets.loss is not None else _default_loss([m for _, m in measured])
    accuracy = (
        targets.accuracy if targets.accuracy is not None else min(m["summary"].final_accuracy for _, m in measured)
    )
    return [_row(job, m, base_rate, loss, accuracy) for job, m in measured]


def _rate(summary: Any) -> float:
    return summary.samples_seen / summary.train_seconds


def _default_loss(measured: list[dict[str, Any]]) -> float:
    """The loss every configuration that learned at all has reached."""
    learned = [m["train_loss"][-1] for m in measured if m["train_loss"][-1] < m["train_loss"][0]]
    return max(learned or [m["train_loss"][-1] for m in measured])


def _row(job: Any, m: dict[str, Any], base_rate: float, loss: float, accuracy: float) -> dict[str, Any]:
    s = m["summary"]
    speedup = _rate(s) / base_rate
    to_acc, to_loss = time_to(accuracy, m, "accuracy"), time_to(loss, m)
    return {
        "mode": job.mode,
        "workers": job.workers,
        "servers": job.servers,
        "nodes": job.nnodes,
        "processes": job.processes,
        "images_per_s": round(_rate(s), 1),
        "speedup": round(speedup, 3),
        "efficiency": round(speedup / job.processes, 3),
        "speedup_per_worker": round(speedup / job.workers, 3),
        "final_accuracy": round(s.final_accuracy, 2),
        "target_accuracy": round(accuracy, 2),
        "seconds_to_accuracy": round(to_acc, 2) if to_acc is not None else "",
        "final_train_loss": round(m["train_loss"][-1], 4),
        "target_train_loss": round(loss, 4),
        "seconds_to_loss": round(to_loss, 2) if to_loss is not None else "",
        "train_seconds": s.train_seconds,
        "staleness_mean": s.extra.get("staleness_mean", ""),
        "staleness_max": s.extra.get("staleness_max", ""),
    }


def write_tables(rows: list[dict[str, Any]], dirs: list[Path], out: Path, command: str) -> Path:
    """<out>/scale.csv and scale.md (rows and dirs in the same order), the latter with the
    machine, the code, the command and what each column means."""
    summaries = [read_summary(d) for d in dirs]
    first = summaries[0]
    header = list(rows[0])
    body = [list(r.values()) for r in rows]
    commits = sorted({f"{s.git_commit} ({s.extra.get('dist_mode', 'sync')})" for s in summaries})
    atomic_write_text(out / "scale.csv", to_csv(header, body))
    text = "\n".join(
        [
            f"# Scaling: {first.model} on {first.label}",
            "",
            f"- machine: {first.device.split(',')[0]}; one thread per process; torch {first.torch}",
            f"- code: {', '.join(commits)}; command: `{command}`",
            (
                "- as in Campos et al. (2017): Tables 1-2 (throughput, speedup, efficiency), Table 3 and "
                "Figure 3 (final accuracy, time to a target)"
            ),
            *(
                [
                    (
                        "- caveat: on a CPU the processes share one machine's cores, caches and memory bandwidth, "
                        "so these speedups say little about several GPUs or nodes"
                    )
                ]
                if first.device.startswith("cpu")
                else []
            ),
            "",
            "Columns:",
            "",
            COLUMNS,
            "",
            to_markdown(header, body),
        ]
    )
    atomic_write_text(out / "scale.md", text)
    return out / "scale.md"

"""`fineprune scale`: the same training on 1, 2, 4 ... processes, as in Campos et al. (2017).

Each configuration is an ordinary `fineprune train` run (through torch.distributed's launcher
when it has more than one process), with one thread per process so that N processes use N
cores. From the run folders it reports what the paper's Tables 1-3 report: throughput,
speedup and efficiency against one process, final accuracy, and the training time needed to
reach a target training loss (by default the highest final loss among the configurations whose
loss fell, so each of those reaches it; one that diverged shows no time).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ..engine.config import Config, validate
from ..engine.files import atomic_write_text, to_csv, to_markdown
from ..engine.record import Status, read_metrics, read_summary
from ..errors import ConfigError

MODES = ("sync", "async", "mixed")  # async/mixed: N workers plus one parameter-server process


def plan(nprocs: list[int], modes: list[str]) -> list[tuple[str, int]]:
    if not nprocs or any(n < 1 for n in nprocs):
        raise ConfigError("--nproc takes positive integers, e.g. 1,2,4")
    if not modes:
        raise ConfigError(f"--dist-mode names no mode; choose from: {', '.join(MODES)}")
    for mode in modes:
        if mode not in MODES:
            raise ConfigError(f"unknown --dist-mode {mode}; choose from: {', '.join(MODES)}")
    return [(mode, n) for mode in modes for n in sorted(set(nprocs))]


def run_one(cfg: Config, mode: str, nproc: int, out: Path) -> Path:
    run_dir = out / "runs" / f"{cfg.model.name}-{cfg.data.dataset}-{mode}-n{nproc}"
    config = cfg.to_dict()
    config["run"]["out"] = None
    config["run"]["dist_mode"] = mode
    text = yaml.safe_dump(config, sort_keys=False)
    if (run_dir / "summary.json").exists():
        _check_same_settings(run_dir, text)
        if read_summary(run_dir).status == Status.COMPLETE:
            return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "scale-config.yaml", text)
    cmd = [sys.executable, "-m", "fineprune_cli", "train", "--config", str(run_dir / "scale-config.yaml"),
           "--out", str(run_dir), "--json"]
    processes = nproc + (mode != "sync")  # the parameter server is a process of its own
    if processes > 1:
        cmd += ["--nproc-per-node", str(processes)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"the {nproc}-process {mode} run failed: {last} (see {run_dir})")
    return run_dir


def _check_same_settings(run_dir: Path, text: str) -> None:
    """A folder from another `scale` (other model, epochs, lr ...) must not be reported under
    this command's settings."""
    try:
        same = (run_dir / "scale-config.yaml").read_text() == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        raise ConfigError(f"{run_dir} holds a run with other settings than this command's; "
                          "choose another --out or delete that folder")


def measure(run_dir: Path) -> dict[str, Any]:
    s = read_summary(run_dir)
    rows = read_metrics(run_dir)
    return {"summary": s, "train_loss": [r.train_loss for r in rows],
            "seconds": [r.train_seconds for r in rows]}


def time_to(target: float, m: dict[str, Any]) -> float | None:
    elapsed = 0.0
    for loss, seconds in zip(m["train_loss"], m["seconds"]):
        elapsed += seconds
        if loss <= target:
            return elapsed
    return None


def table(results: list[tuple[str, int, dict[str, Any]]], target: float | None) -> list[dict[str, Any]]:
    if target is None:  # the loss every configuration that learned at all has reached
        learned = [m["train_loss"][-1] for _, _, m in results if m["train_loss"][-1] < m["train_loss"][0]]
        target = max(learned or [m["train_loss"][-1] for _, _, m in results])
    base = {mode: m for mode, n, m in results if n == min(k for md, k, _ in results if md == mode)}
    rows = []
    for mode, n, m in results:
        s = m["summary"]
        throughput = s.samples_seen / s.train_seconds
        b = base[mode]["summary"]
        speedup = throughput / (b.samples_seen / b.train_seconds)
        reach = time_to(target, m)
        rows.append({"mode": mode, "workers": n, "images_per_s": round(throughput, 1),
                     "speedup": round(speedup, 3), "efficiency": round(speedup / n, 3),
                     "final_accuracy": round(s.final_accuracy, 2), "final_train_loss": round(m["train_loss"][-1], 4),
                     "target_train_loss": round(target, 4),
                     "seconds_to_target": round(reach, 2) if reach is not None else "",
                     "train_seconds": s.train_seconds,
                     "staleness_mean": s.extra.get("staleness_mean", ""),
                     "staleness_max": s.extra.get("staleness_max", "")})
    return rows


def run_scale(cfg: Config, nprocs: list[int], modes: list[str], out: Path,
              target: float | None = None) -> list[dict[str, Any]]:
    validate(cfg)
    jobs = plan(nprocs, modes)
    if target is not None and not (math.isfinite(target) and target > 0):
        raise ConfigError(f"--target-loss must be a positive number, got {target}")
    if any(cfg.train.batch_size % n for mode, n in jobs if mode == "sync"):
        raise ConfigError(f"--batch-size {cfg.train.batch_size} must divide by every --nproc value")
    _check_folder(out)
    results = [(mode, n, measure(run_one(cfg, mode, n, out))) for mode, n in jobs]
    return table(results, target)


def _check_folder(out: Path) -> None:
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write --out {out}: {exc.strerror or exc}") from None


def write_tables(rows: list[dict[str, Any]], out: Path, command: str) -> Path:
    """<out>/scale.csv and scale.md, the latter with the machine and the command."""
    first = read_summary(out / "runs" / _name(rows, 0, out))
    header = list(rows[0])
    body = [list(r.values()) for r in rows]
    atomic_write_text(out / "scale.csv", to_csv(header, body))
    text = "\n".join([
        f"# Scaling: {first.model} on {first.label}", "",
        f"- machine: {first.device.split(',')[0]}; one thread per process; torch {first.torch}",
        f"- code: {', '.join(_commits(rows, out))}; command: `{command}`",
        "- workers: processes that compute gradients (async and mixed add one parameter-server "
        "process); images_per_s: training images per second of training time (evaluation excluded); "
        "speedup and efficiency (speedup / workers) against the fewest processes, as in "
        "Campos et al. (2017), Tables 1-2; seconds_to_target: training time until the epoch's "
        "training loss first reached target_train_loss (their Table 3 / Figure 3)",
        *(["- caveat: on a CPU the processes share one machine's cores, caches and memory bandwidth "
           "(2 cores here), so these speedups say little about several GPUs or nodes"]
          if first.device.startswith("cpu") else []),
        "", to_markdown(header, body)])
    atomic_write_text(out / "scale.md", text)
    return out / "scale.md"


def _commits(rows: list[dict[str, Any]], out: Path) -> list[str]:
    summaries = [read_summary(out / "runs" / _name(rows, i, out)) for i in range(len(rows))]
    return sorted({f"{s.git_commit} ({s.extra.get('dist_mode', 'sync')})" for s in summaries})


def _name(rows: list[dict[str, Any]], i: int, out: Path) -> str:
    matches = sorted((out / "runs").glob(f"*-{rows[i]['mode']}-n{rows[i]['workers']}"))
    return matches[0].name

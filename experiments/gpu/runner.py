"""What every `make gpu` step shares: its context and time limit, running a command under that
limit (stopping it early when a watcher says so), and packing what the step wrote into $OUT."""

from __future__ import annotations

import atexit
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from common import describe_device, git_commit

ROOT = Path(__file__).resolve().parents[2]
PACK_RESERVE_S = 20  # kept back from --budget to pack the results
TERM_GRACE_S = 30  # between SIGTERM and SIGKILL: a run finishes its epoch and checkpoints
POLL_S = 0.05  # how often a watcher looks at the run it follows
MAX_ARCHIVE = 16 * 2**20  # the device tool brings back files up to 16 MiB
# `python -m fineprune_cli ...` starts forked from a server that imported torch and the CLI once, as
# compare --jobs starts its runs (CUDA is first touched in the child): a new interpreter spent ~3 s
# of CPU on imports, a dozen of them in a dry run; pytest and bench.py start as new interpreters
FORKED = [sys.executable, "-m", "fineprune_cli"]
PRELOAD = ["torch", "torch._dynamo", "fineprune_cli.cli", "fineprune_cli.runner"]
_SERVERS: list = []  # this process's fork server, started on first use


@dataclass
class Ctx:
    device: str
    quick: bool
    results: Path  # results root (the repository's results/ unless --results-dir)
    work: Path  # carried inputs, unpacked data, and the runs' working folders (ignored by git)
    out: Path | None  # $OUT: what comes back from the GPU machine
    tag: str  # device slug in folder names
    budget: float
    models: str | None = None
    epochs: int | None = None  # reproduce: the recipe scaled to this many epochs (None: the paper's)
    max_runs: int | None = None  # reproduce: at most this many runs in one call
    deadline: float = 0.0

    def start_step(self) -> None:
        self.deadline = time.monotonic() + self.budget - PACK_RESERVE_S

    def left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def experiment(self) -> Path:
        """One folder for the matrix, whatever machines its calls ran on (each call names its own)."""
        name = "dry-run-lenet" if self.quick else "cifar10-jpeg-resnet18"
        return self.results / f"{name}{f'-e{self.epochs}' if self.epochs else ''}"


class Watch(Protocol):
    def due(self, now: float) -> str | None:
        """Why the command should stop after its current epoch, or None to let it go on."""


def rel(path: Path) -> str:
    """Paths inside the repository are written relative to it: commands in the records stay readable."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


CALL_RUN = {"arm", "seed", "status", "seconds"}  # what the notes and the pace read of each run of a call


def read_call(path: Path) -> dict:
    """A call's record (call.json, carried back in an archive): one torn in transit or edited into
    something else stops the step in one line naming it (issue 57: a JSONDecodeError traceback)."""
    from fineprune_cli.errors import ConfigError

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        record = exc
    runs = record.get("runs") if isinstance(record, dict) else None
    whole = isinstance(runs, list) and all(isinstance(r, dict) and CALL_RUN <= r.keys() for r in runs)
    if not whole or not isinstance(record, dict) or not isinstance(record.get("machine"), str):
        why = type(record).__name__ if isinstance(record, Exception) else "not a call's record"
        raise ConfigError(
            f"{rel(path)} is unreadable or corrupt ({why}): unpack that call's archive again, "
            "or move its folder out of calls/"
        )
    return record


def child_env(**extra: str) -> dict[str, str]:
    """The project importable without an install (the GPU machine's python3 has none)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_logged(
    cmd: list[str],
    log: Path,
    ctx: Ctx,
    env: dict[str, str] | None = None,
    watch: Watch | None = None,
    limit_s: float | None = None,
) -> int:
    """Run `cmd` in the repository root, its output to our stdout and to `log`. It gets SIGTERM
    (a training run finishes its epoch, checkpoints and records itself interrupted) when `watch`
    says so, or TERM_GRACE_S before its time is up (the step's deadline, or `limit_s` from now if
    sooner); SIGKILL when it is up. Writes `log`.json: command, exit code, time, why it stopped."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$", shown(cmd), flush=True)
    t0 = time.monotonic()
    end = min(ctx.deadline, t0 + limit_s) if limit_s is not None else ctx.deadline
    with open(log, "w") as f, _start(cmd, env or child_env()) as proc:
        stopped: list[str] = []
        guard = threading.Thread(target=_guard, args=(proc, watch, end, stopped), daemon=True)
        guard.start()
        for line in proc.stdout:
            f.write(line)
            sys.stdout.write(line)
        guard.join()  # before wait: a forked command's status is read from a socket, by one thread at a time
        rc = proc.wait()
    record = {
        "command": shown(cmd),
        "returncode": rc,
        "seconds": round(time.monotonic() - t0, 1),
        "stopped_at_deadline": stopped == ["time limit"],
        "stop_reason": stopped[0] if stopped else None,
        "gpu_py": invocation(),
    }
    log.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return rc


def _start(cmd: list[str], env: dict[str, str]):
    """`cmd` started in the repository root, its output (stderr too) in a text pipe: a Popen, or
    for FORKED commands its fork server's Forked, which answers the same (it dies with us: SIGTERM)."""
    options = {"cwd": ROOT, "env": env, "text": True, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    if cmd[: len(FORKED)] != FORKED:
        return subprocess.Popen(cmd, **options)
    if not _SERVERS:
        from fineprune_cli.drivers.executors.forkclient import ForkServer

        _SERVERS.append(ForkServer(PRELOAD, env=child_env()))
        atexit.register(_SERVERS[0].close)
    return _SERVERS[0].popen(cmd[1:], pdeathsig=signal.SIGTERM, **options)


def _guard(proc: subprocess.Popen, watch: Watch | None, end: float, stopped: list[str]) -> None:
    """SIGTERM once (the watcher's reason, or the time limit), SIGKILL at `end`."""
    while proc.poll() is None:
        now = time.monotonic()
        if now >= end:
            proc.kill()
            return
        reason = (watch.due(now) if watch is not None else None) or (
            "time limit" if now >= end - TERM_GRACE_S else None
        )
        if reason and not stopped:
            stopped.append(reason)
            print(f"stopping it after this epoch: {reason}", flush=True)
            proc.terminate()
        time.sleep(POLL_S)


def run_summary(run: Path) -> dict:
    """A run folder's summary.json; {} where there is none (not started, or killed first)."""
    path = run / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def environment(ctx: Ctx) -> dict[str, str]:
    return {
        "device": describe_device(torch.device(ctx.device)),
        "torch": torch.__version__,
        "torch_cuda_build": str(torch.version.cuda),
        "python": platform.python_version(),
        "commit": git_commit(),
        "command": invocation(),
    }


def shown(cmd: list[str]) -> str:
    """A command as a reader would type it: `python`, not this interpreter's path."""
    return shlex.join(["python" if arg == sys.executable else arg for arg in cmd])


def invocation() -> str:
    return shlex.join(["python", "experiments/gpu/gpu.py", *sys.argv[1:]])


def _leave_out(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """No checkpoint (85 MiB for ResNet-18, more than a call brings back), no dot files
    (half-written temporaries, dataset caches)."""
    name = Path(info.name).name
    return None if name == "checkpoint.pt" or name.startswith(".") else info


def pack(ctx: Ctx, step: str, paths: list[Path]) -> int:
    """$OUT/<step>.tar.gz with `paths` under results/ as they lie under --results-dir."""
    if ctx.out is None:
        return 0
    ctx.out.mkdir(parents=True, exist_ok=True)
    archive = ctx.out / f"{step}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in paths:
            if path.exists():
                tar.add(
                    path,
                    arcname=str(Path("results") / path.resolve().relative_to(ctx.results.resolve())),
                    filter=_leave_out,
                )
    size = archive.stat().st_size
    print(f"packed {archive} ({size / 2**20:.2f} MiB)", flush=True)
    if size > MAX_ARCHIVE:
        print(f"error: {archive} is over 16 MiB and will not come back; copy less", file=sys.stderr)
        return 1
    return 0

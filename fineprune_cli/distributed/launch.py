"""Starting a run of several processes: `--nproc-per-node` relaunches the command through
torchrun, after the launch flags and the run's layout are checked; a process torchrun
restarted finds the run folder it continues (`restarted`). What each process then runs is
chosen by `fineprune_cli.runner`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from ..engine.records.fingerprint import fingerprint
from ..engine.records.record import CHECKPOINT, METRICS, SUMMARY, default_run_dir, load_run_config
from ..engine.setup.config import Config
from ..errors import ConfigError
from ..pruning.registry import get as get_policy

LAUNCH_FLAGS = ("--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-endpoint", "--max-restarts")
MAX_RESTARTS = 100


def relaunch(
    argv: list[str], nproc: int, nnodes: int | None, node_rank: int | None, endpoint: str | None, max_restarts: int = 0
) -> int:
    """Run `fineprune <argv>` in nproc processes through torch.distributed.run (torchrun); when
    one fails, torchrun restarts them all up to `max_restarts` times (see `restarted`)."""
    if "RANK" in os.environ:
        raise ConfigError("--nproc-per-node given inside a torchrun process: leave it out there")
    check_launch(nproc, nnodes, node_rank, endpoint)
    if not 0 <= max_restarts <= MAX_RESTARTS:
        raise ConfigError(f"--max-restarts must be between 0 and {MAX_RESTARTS}, got {max_restarts}")
    nnodes = nnodes or 1
    launcher = ["--nproc-per-node", str(nproc), "--nnodes", str(nnodes), "--max-restarts", str(max_restarts)]
    launcher += (
        ["--standalone"]
        if nnodes == 1
        else ["--node-rank", str(node_rank), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint]
    )
    # "--": the launcher would otherwise take our flags (e.g. --start) for abbreviations of its own
    cmd = [
        sys.executable,
        "-m",
        "fineprune_cli.distributed.torchrun",
        *launcher,
        "-m",
        "fineprune_cli",
        "--",
        *without_launch_flags(argv),
    ]
    return call_forwarding_signals(cmd)


MAX_NPROC, MAX_NODES = 256, 4096  # processes per node, machines: more is a typo


def check_launch(nproc: int, nnodes: int | None, node_rank: int | None, endpoint: str | None) -> None:
    """The launch flags, before anything starts: a node rank past the last node or an
    endpoint without a port made torchrun wait for peers that never come."""
    if not 1 <= nproc <= MAX_NPROC:
        raise ConfigError(f"--nproc-per-node must be between 1 and {MAX_NPROC}, got {nproc}")
    if nnodes is not None and not 1 <= nnodes <= MAX_NODES:
        raise ConfigError(f"--nnodes must be between 1 and {MAX_NODES}, got {nnodes}")
    nnodes = nnodes or 1
    if nnodes > 1 and (endpoint is None or node_rank is None):
        raise ConfigError("--nnodes > 1 needs --node-rank and --rdzv-endpoint host:port")
    if node_rank is not None and not 0 <= node_rank < nnodes:
        raise ConfigError(f"--node-rank must be between 0 and {nnodes - 1} (--nnodes {nnodes}), got {node_rank}")
    if endpoint is not None:
        parse_endpoint(endpoint)


def parse_endpoint(text: str, flag: str = "--rdzv-endpoint") -> tuple[str, int]:
    """host:port (IPv6 as [addr]:port), the port from 1 to 65535."""
    host, sep, port = text.strip().rpartition(":")
    if not (sep and host.strip("[]") and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigError(f"{flag} must be host:port with a port from 1 to 65535, got '{text}'")
    return host, int(port)


def call_forwarding_signals(cmd: list[str]) -> int:
    """subprocess.call, but a SIGTERM to us (a scheduler ending the job, `kill`) goes on to the
    launcher, which stops its ranks; otherwise they would be orphaned and go on training.
    (Ctrl-C reaches the whole process group from the terminal by itself.)"""
    proc = subprocess.Popen(cmd)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + N


def check_parallel(cfg: Config, size: int, per_node: int | None = None) -> None:
    """Process-count and batch-size checks of a `size`-process run (`per_node` on each node),
    before any data is loaded: the batch (or a mixed group's batch) is split evenly over the
    processes that share it."""
    from .layout import worker_groups

    mode, batch = cfg.run.dist_mode, cfg.train.batch_size
    if size < 2:
        return
    if mode != "sync" and get_policy(cfg.policy).selects_batches:  # workers train whole batches
        raise ConfigError(
            f"--policy {cfg.policy} chooses rows inside each step, which only the synchronous loop does: "
            f"use --dist-mode sync, not {mode}"
        )
    if mode == "sync":
        if batch % size and not cfg.train.batch_per_worker:
            raise ConfigError(f"--batch-size {batch} must divide evenly over {size} processes")
        return
    groups = worker_groups(size, cfg.run.num_ps, per_node or size, cfg.run.group_size, mode)
    if mode == "mixed" and not cfg.train.batch_per_worker:
        odd = sorted({len(g) for g in groups if batch % len(g)})
        if odd:  # an uneven split would train the groups' members on batches of other sizes
            raise ConfigError(
                f"--batch-size {batch} must divide evenly over a mixed group of {odd[0]} "
                f"workers (groups: {', '.join(str(len(g)) for g in groups)} workers; "
                "--group-size 0 = the workers of a node)"
            )


def naming_the_run(argv: list[str], cfg: Config) -> list[str]:
    """`argv` with the run folder named once, here: every rank, and every restart of one, then
    writes the same folder, not one named by the time it started."""
    if cfg.run.out:
        return argv
    return [*argv, "--out", str(default_run_dir(cfg.model.name, cfg.data.dataset))]


def restarted(cfg: Config, env: Mapping[str, str], main: bool) -> Path | None:
    """The run folder a process that torchrun restarted continues: its --out, when that holds
    this run's config and a checkpoint. (torchrun stops every process when one fails and starts
    them all again with TORCHELASTIC_RESTART_COUNT > 0: torch.distributed.run's "Failure
    Modes", torch/distributed/elastic/agent/server/local_elastic_agent.py.) Without a checkpoint
    the main rank clears the dead attempt's records and the run starts afresh in its folder; a
    folder of other settings is left to the fresh start to refuse, as on a first start."""
    if not cfg.run.out or int(env.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) < 1:
        return None
    path = Path(cfg.run.out)
    try:
        ours = fingerprint(load_run_config(path)) == fingerprint(cfg.to_dict())
    except ConfigError:  # no config.yaml: the first attempt died before it wrote anything
        return None
    if ours and (path / CHECKPOINT).exists():
        return path
    if ours and main:
        for name in (SUMMARY, METRICS):
            (path / name).unlink(missing_ok=True)
    return None


def without_launch_flags(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in LAUNCH_FLAGS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out

"""The dist step: every --dist-mode on the one device, each run interrupted (SIGTERM) once it
has recorded its first epoch and then continued with `fineprune train --resume` (issue 24).

Sync runs 2 ranks in one process group, not 1 rank alone (which forms no group and so tests
nothing of DDP). Both share the GPU; NCCL refuses two ranks on one GPU ("Duplicate GPU
detected", NCCL 2.5 and later), while gloo all-reduces CUDA tensors (torch.distributed's
backend table), so the engine picks gloo where ranks share a GPU (engine/training/world.py's
`shared_gpu`, by GPU UUID), for sync and for a mixed group of 2 workers alike. Async runs 2 parameter servers, so the chief fetches the other server's state
over RPC, the path a GPU breaks first."""

from __future__ import annotations

import csv
import json
import shutil
import sys
import time
from pathlib import Path

from common import git_commit
from runner import Ctx, environment, invocation, pack, rel, run_logged, run_summary
from sizing import AfterEpochs, count_rows

# (mode, processes, parameter servers, more flags): async's 2 servers and 2 workers, with the
# servers on the CPU (the default) and on the GPU; mixed's 1 server and a group of 2
DIST_RUNS = (("sync", 2, 0, ()), ("async", 4, 2, ()), ("async", 4, 2, ("--ps-device", "gpu")), ("mixed", 3, 1, ()))
# the dry run: sync alone, each launch costs CI seconds of start (two launches of async's three
# processes took two minutes of CI's time); the loop below is the same for every mode, and
# tests/test_paramserver.py kills and resumes async with 2 servers and stops it by a signal
QUICK_RUNS = DIST_RUNS[:1]
EPOCHS = 4  # interrupted after epoch 1 or 2 (the signal reaches every rank within an epoch), resumed to 4
TIMEOUT_S = 120  # --dist-timeout: a lost process ends its run well inside the step's time
LAUNCH_S = 45  # kept for each launch still to come, so one that hangs cannot take their time


def dist(ctx: Ctx) -> int:
    folder = ctx.results / f"gpu-{ctx.tag}" / "dist"
    fmnist = ctx.work / "fashion-mnist"
    data = (
        ["--dataset", "synthetic", "--subset", "3072", "--test-subset", "200"]
        if ctx.quick
        else ["--dataset", "fashion-mnist", *(["--data-dir", rel(fmnist)] if fmnist.is_dir() else [])]
    )
    cases = QUICK_RUNS if ctx.quick else DIST_RUNS
    rows = []
    for i, (mode, processes, servers, flags) in enumerate(cases):
        name = "-".join([mode, *(f.removeprefix("--") for f in flags)])
        run = folder / "runs" / f"lenet-{name}-p{processes}"
        shutil.rmtree(run, ignore_errors=True)
        launch = ["--nproc-per-node", str(processes)]
        first = [
            sys.executable,
            "-m",
            "fineprune_cli",
            "train",
            "--model",
            "lenet",
            *data,
            "--epochs",
            str(EPOCHS),
            "--lr",
            "0.01",
            "--device",
            ctx.device,
            "--dist-mode",
            mode,
            "--dist-timeout",
            str(TIMEOUT_S),
            *(["--num-ps", str(servers)] if servers else []),
            *flags,
            "--out",
            rel(run),
            "--json",
            *launch,
        ]
        after = 2 * (len(cases) - i) - 1  # launches after this one
        watch = AfterEpochs(lambda run=run: count_rows(run / "metrics.csv"), time.monotonic(), 1)
        codes = [
            run_logged(
                first,
                folder / "logs" / f"{name}.log",
                ctx,
                watch=watch,
                limit_s=max(LAUNCH_S, ctx.left() - after * LAUNCH_S),
            )
        ]
        interrupted = run_summary(run)
        if interrupted.get("status") == "interrupted":
            again = [sys.executable, "-m", "fineprune_cli", "train", "--resume", rel(run), "--json", *launch]
            codes.append(
                run_logged(
                    again,
                    folder / "logs" / f"{name}-resume.log",
                    ctx,
                    limit_s=max(LAUNCH_S, ctx.left() - (after - 1) * LAUNCH_S),
                )
            )
        rows.append(dist_row(" ".join([mode, *flags]), processes, servers, run, codes, interrupted))
    write_tables(ctx, folder, rows)
    print(json.dumps(rows), flush=True)
    failed = any(not r["resumed_ok"] for r in rows)
    return max(pack(ctx, "dist", [folder]), int(failed))


def metric_epochs(run: Path) -> list[int]:
    if not (run / "metrics.csv").exists():
        return []
    with open(run / "metrics.csv", newline="") as f:
        return [int(r["epoch"]) for r in csv.DictReader(f)]


def dist_row(mode: str, processes: int, servers: int, run: Path, codes: list[int], first: dict) -> dict:
    """One mode: how its first launch stopped, and whether the resumed run finished where the
    first left off (every epoch recorded once, in order, the resume noted after the right one)."""
    s = run_summary(run)
    stopped = first.get("epochs_completed", 0) if first.get("status") == "interrupted" else None
    resumed_ok = (
        s.get("status") == "complete"
        and stopped is not None
        and 1 <= stopped < EPOCHS
        and s.get("resumed_after_epochs") == [stopped]
        and metric_epochs(run) == list(range(1, EPOCHS + 1))
    )
    seconds = s.get("train_seconds") or 0
    return {
        "mode": mode,
        "processes": processes,
        "servers": servers,
        "exit": "/".join(str(c) for c in codes),
        "interrupted_after": stopped,
        "status": s.get("status", "no run"),
        "resumed_ok": resumed_ok,
        "device": s.get("device", ""),
        "epochs": s.get("epochs_completed", 0),
        "final_accuracy": s.get("final_accuracy", ""),
        "train_seconds": seconds,
        "images_per_s": round(s.get("samples_seen", 0) / seconds, 1) if seconds else "",
        "staleness_mean": s.get("staleness_mean", ""),
    }


def write_tables(ctx: Ctx, folder: Path, rows: list[dict]) -> None:
    env = environment(ctx)
    (folder / "dist.json").write_text(json.dumps({"runs": rows, **env}, indent=2) + "\n")
    header = list(rows[0])
    (folder / "dist.md").write_text(
        "\n".join(
            [
                f"# Distributed modes on {env['device']}: interrupted after an epoch, resumed",
                "",
                f"- code {git_commit()}; command: `{invocation()}`",
                f"- each run: LeNet, {EPOCHS} epochs, SIGTERM once epoch 1 is recorded (it stops after the "
                "epoch in progress), then `fineprune train --resume RUN --nproc-per-node N`; `exit` lists both",
                "- sync: 2 ranks in one process group; async: 2 servers (on the CPU unless `--ps-device gpu`) and "
                "the other processes workers; mixed: 1 server, 1 group of workers; all processes share the device",
                "",
                "| " + " | ".join(header) + " |",
                "|" + " --- |" * len(header),
                *("| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows),
            ]
        )
        + "\n"
    )

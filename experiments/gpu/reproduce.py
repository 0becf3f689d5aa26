"""The reproduce steps: ResNet-18 on CIFAR-10 (JPEG q75), one policy per step, trained in
chunks that each fit one call, continued by calling the step again.

A run lives under --work-dir (.gpu-data/runs/<experiment>/, ignored by git): the device tool
keeps ignored files on a machine between the calls it is held for and replaces the rest of the
tree with the copy it sends, so the run folder and its checkpoint are there for the next call.
After each call the run folder, less its checkpoint, is copied into results/ and packed.

The checkpoint never travels: ResNet-18's weights and SGD momentum in fp32 are 85 MiB (72 MiB
even losslessly compressed, byte planes through zlib), over the 64 MiB a call brings back, and
beside the 53 MiB CIFAR-10 npz over the 64 MiB a call carries in. Half-precision weights would
fit, but the resumed run would not be the run. So a run continues on the machine that holds its
checkpoint; on a fresh machine it starts again, and the step says so. `--epochs N` scales the
recipe to a run that fits one call, in its own folder and labelled as such.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

from common import describe_device
from runner import PACK_RESERVE_S, ROOT, Ctx, child_env, pack, rel, run_logged, run_summary, shown
from sizing import ChunkStop, calls_needed, count_rows, epochs_that_fit

CONFIG = Path("experiments/gpu/cifar10-resnet18.yaml")
# the dry run: the paper's config with a tiny model, data and schedule (pruning from epoch 2)
QUICK_CONFIG = {
    "model": {"name": "lenet"},
    "data": {"label": "tiny generated JPEGs (dry run)"},
    "train": {"epochs": 4},
    "prune": {"window": 3, "start": 2, "block": 1},
    "run": {"compile": False},
}
RESUMABLE = ("interrupted", "incomplete")


def reproduce(ctx: Ctx, policy: str) -> int:
    """One chunk of one policy's run: as many epochs as fit the call, then a clean stop."""
    started = time.monotonic()
    data_dir = tiny_images(ctx.work / "quick-images") if ctx.quick else cifar10_jpeg(ctx.work)
    work_runs, kept = ctx.work / "runs" / ctx.experiment.name, ctx.experiment / "runs"
    if run_summary(_run_dir(kept, policy)).get("status") == "complete":
        print(f"reproduce-{policy}: complete in {rel(_run_dir(kept, policy))}: nothing to train", flush=True)
        return 0
    calls_log = ctx.experiment / "logs" / "calls" / f"reproduce-{policy}.json"
    calls = json.loads(calls_log.read_text()) if calls_log.exists() else []
    run = _run_dir(work_runs, policy)
    before = run_summary(run)
    say_plan(policy, run, before, calls)
    log = ctx.experiment / "logs" / f"reproduce-{policy}.log"
    cmd = train_command(ctx, policy, run, before, data_dir, work_runs)
    watch = ChunkStop(
        lambda: count_rows(_run_dir(work_runs, policy) / "metrics.csv"), started, ctx.deadline, ctx.chunk_epochs
    )
    # the decoded images and compiled kernels stay on the machine for the next call too
    env = child_env(FINEPRUNE_CACHE=str(ctx.work / "cache"), TORCHINDUCTOR_CACHE_DIR=str(ctx.work / "inductor-cache"))
    rc = run_logged(cmd, log, ctx, env, watch=watch)
    run = _run_dir(work_runs, policy)
    record = call_record(ctx, cmd, rc, log, watch, before, run_summary(run), run)
    calls_log.parent.mkdir(parents=True, exist_ok=True)
    calls_log.write_text(json.dumps([*calls, record], indent=2) + "\n")
    print("\n".join(projection(ctx, policy, record, run)), flush=True)
    copies = [keep_copy(run, kept)] if run.is_dir() else []
    packed = pack(ctx, f"reproduce-{policy}", [*copies, log, log.with_suffix(".json"), calls_log])
    return max(packed, 0 if chunk_ok(record) else 1)


def train_command(ctx: Ctx, policy: str, run: Path, before: dict, data_dir: Path, work_runs: Path) -> list[str]:
    """`train --resume` where this machine holds the run's checkpoint (a resume that fails is an
    error, never a silent retrain), else `compare`, which writes the run folder as the matrix
    names it (and trains again a run left without a checkpoint)."""
    if before.get("status") in RESUMABLE and (run / "checkpoint.pt").exists():
        return [sys.executable, "-m", "fineprune_cli", "train", "--resume", rel(run)]
    return [
        sys.executable,
        "-m",
        "fineprune_cli",
        "compare",
        "--config",
        rel(config_file(ctx)),
        "--policies",
        policy,
        "--seeds",
        "0",
        "--device",
        ctx.device,
        "--data-dir",
        rel(data_dir),
        "--out",
        rel(work_runs),
    ]


def _run_dir(runs: Path, policy: str) -> Path:
    """<runs>/<model>-<dataset>/<policy>-seed0, as compare names it (one model per experiment)."""
    found = sorted(runs.glob(f"*/{policy}-seed0"))
    return found[0] if found else runs / "none" / f"{policy}-seed0"


def say_plan(policy: str, run: Path, before: dict, calls: list[dict]) -> None:
    """What this call starts from; a fresh machine says that the epochs made elsewhere are lost."""
    if before.get("status") in RESUMABLE and (run / "checkpoint.pt").exists():
        last = calls[-1] if calls else {}
        pace = f"; {last['epoch_s']:.1f} s an epoch in the last call" if last.get("epoch_s") else ""
        print(
            f"reproduce-{policy}: continuing from epoch {before.get('epochs_completed')} of "
            f"{before.get('epochs')}{pace}",
            flush=True,
        )
        return
    made = max((c.get("epochs_after") or 0 for c in calls if c.get("status") in RESUMABLE), default=0)
    if made:
        print(
            f"reproduce-{policy}: this machine holds no checkpoint of the run ({made} epochs were "
            f"trained on {calls[-1]['machine']}, and an exact checkpoint is too big to travel: see "
            "experiments/gpu/README.md); the run starts again from epoch 1",
            flush=True,
        )


def call_record(
    ctx: Ctx, cmd: list[str], rc: int, log: Path, watch: ChunkStop, before: dict, after: dict, run: Path
) -> dict:
    step = json.loads(log.with_suffix(".json").read_text())
    ckpt = run / "checkpoint.pt"
    return {
        "machine": describe_device(torch.device(ctx.device)),
        "command": shown(cmd),
        "gpu_py": step["gpu_py"],
        "returncode": rc,
        "seconds": step["seconds"],
        "stop_reason": step["stop_reason"],
        "status": after.get("status", "no run"),
        "epochs": after.get("epochs"),
        "epochs_before": before.get("epochs_completed", 0),
        "epochs_after": after.get("epochs_completed", 0),
        "startup_s": _round(watch.startup_s),
        "epoch_s": _round(watch.epoch_s),
        "checkpoint_mib": round(ckpt.stat().st_size / 2**20, 1) if ckpt.exists() else None,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def chunk_ok(record: dict) -> bool:
    """Complete, or stopped cleanly with a checkpoint after training at least one epoch here."""
    if record["status"] == "complete":
        return True
    return (
        record["status"] == "interrupted"
        and record["checkpoint_mib"] is not None
        and record["epochs_after"] > record["epochs_before"]
    )


def projection(ctx: Ctx, policy: str, rec: dict, run: Path) -> list[str]:
    """The call in numbers, and what the rest of the run needs at the measured pace."""
    name = f"reproduce-{policy}"
    if rec["epochs"] is None:
        return [f"{name}: no run folder was written: see {rel(run.parents[2] / 'logs')}"]
    lines = [
        f"{name}: {rec['status']}, epochs {rec['epochs_before'] + 1}-{rec['epochs_after']} of "
        f"{rec['epochs']} in this call ({rec['seconds']} s)"
    ]
    if rec["status"] == "complete":
        return lines
    rest, calls, per_call = rec["epochs"] - rec["epochs_after"], None, None
    if rec["epoch_s"] is not None:
        per_call = epochs_that_fit(ctx.budget - PACK_RESERVE_S - rec["startup_s"], rec["epoch_s"])
        calls = calls_needed(rest, per_call)
        lines.append(
            f"  {rec['epoch_s']:.1f} s an epoch after {rec['startup_s']:.0f} s of start (data, "
            f"compilation): a call of {ctx.budget:.0f} s trains {per_call} epochs"
        )
        if calls is None:
            lines.append("  not one epoch fits a call after such a start")
    if rec["status"] in RESUMABLE and rec["checkpoint_mib"] is not None:
        # the run continues from its checkpoint whatever this call's pace said: one epoch times no
        # epoch apart from the start, and a slow start (a loaded machine) may fit none at that pace
        count = (
            f"{calls} more call(s)"
            if calls
            else "more call(s) (one epoch here: no pace yet)"
            if per_call is None
            else "more call(s) (at this call's pace not one epoch fits: a faster start may)"
        )
        lines.append(
            f"  the other {rest} epochs need {count} of {name} on this machine: its "
            f"checkpoint ({rec['checkpoint_mib']} MiB) stays in {rel(run)}; a fresh machine "
            "starts the run again"
        )
    if per_call is None:
        return lines
    if per_call >= rec["epochs"]:
        lines.append(f"  the whole run, {rec['epochs']} epochs, fits one call at this pace")
    elif not ctx.epochs and per_call > 0:
        lines.append(
            f"  the recipe scaled to one call here: GPU_ARGS='--epochs {per_call}' (its own "
            "folder, labelled; not the paper's 200-epoch row)"
        )
    return lines


def keep_copy(run: Path, runs: Path) -> Path:
    """The run folder in results/, without its checkpoint (it stays with the run) or dot files."""
    dest = runs / run.parent.name / run.name
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(run, dest, ignore=lambda _, names: [n for n in names if n == "checkpoint.pt" or n.startswith(".")])
    return dest


def config_file(ctx: Ctx) -> Path:
    """The paper's config; in the dry run with QUICK_CONFIG laid over it; with --epochs scaled."""
    if not (ctx.quick or ctx.epochs):
        return ROOT / CONFIG
    cfg = yaml.safe_load((ROOT / CONFIG).read_text())
    for section, values in QUICK_CONFIG.items() if ctx.quick else ():
        cfg[section].update(values)
    if ctx.epochs:
        cfg = scaled_recipe(cfg, ctx.epochs)
    path = ctx.work / f"{ctx.experiment.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def scaled_recipe(cfg: dict, epochs: int) -> dict:
    """The recipe at `epochs` epochs: its lr steps and pruning windows at the same fractions of
    the run (the paper: lr x0.2 after epochs 60, 120, 160 of 200; windows of 60 from epoch 30)."""
    base, train, prune = cfg["train"]["epochs"], cfg["train"], cfg["prune"]
    f = epochs / base
    milestones = [round(m * f) for m in train["milestones"]]
    if min(milestones, default=1) < 1 or len(set(milestones)) < len(milestones) or epochs < 2:
        sys.exit(f"error: --epochs {epochs} is too few to keep the recipe's lr steps {train['milestones']} apart")
    window = max(2, round(prune["window"] * f))
    train.update(epochs=epochs, milestones=milestones)
    prune.update(window=window, start=min(window - 1, round(prune["start"] * f)))
    cfg["data"]["label"] += f"; the {base}-epoch recipe scaled to {epochs} epochs"
    return cfg


def cifar10_jpeg(work: Path) -> Path:
    """The image folder, unpacked once from the carried npz (`make gpu-data` puts it in
    .gpu-data/cifar10); unpacked beside and renamed, so a cut-off unpack is never used."""
    dest = work / "cifar10-jpeg"
    if dest.is_dir():
        return dest
    script = work / "cifar10" / "unpack_cifar10_jpeg.py"
    if not script.exists():
        sys.exit(
            f"error: {script} is missing: run `make gpu-data` where ../shared/data is, "
            f"and carry {rel(work / 'cifar10')} to this machine"
        )
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([sys.executable, str(script), str(tmp)], check=True)
    tmp.rename(dest)
    return dest


def tiny_images(dest: Path, classes: int = 10, per_class: tuple[int, int] = (20, 5)) -> Path:
    """A CIFAR-shaped image folder of JPEGs (q75) made here, so the dry run needs no ../shared:
    each class a colour, each image that colour plus noise (learnable, not trivial)."""
    if dest.is_dir():
        return dest
    from torchvision.io import encode_jpeg

    g = torch.Generator().manual_seed(0)
    colours = torch.rand(classes, 3, 1, 1, generator=g) * 200
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for split, n in zip(("train", "test"), per_class):
        for c in range(classes):
            folder = tmp / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(n):
                image = (colours[c] + torch.rand(3, 32, 32, generator=g) * 55).to(torch.uint8)
                (folder / f"{i:04d}.jpg").write_bytes(encode_jpeg(image, quality=75).numpy().tobytes())
    tmp.rename(dest)
    return dest

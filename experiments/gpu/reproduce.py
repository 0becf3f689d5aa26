"""The reproduce step: the next missing runs of the GPU matrix, as many whole runs as fit one call.

The matrix is `experiments/gpu/cifar10-resnet18.yaml`: ResNet-18 on CIFAR-10 (JPEG q75), the
paper's 200-epoch recipe, arms regular, fine-pruning, its random control and 10% and 15% fewer
epochs (which bracket fine-pruning's ~12% budget), seeds in planned looks (3, 5, 8) as
`compare --until-decided` adds them, judged by its `judging` plan. Each call asks
`sequential.looks.next_runs` what the looks need next, given every run already made (the runs of
earlier calls, on any machine, are in results/ once their archives are unpacked), and trains
those runs one after the other while a whole run still fits the call at the pace measured on this
kind of device. A run is never split over calls: its checkpoint (85 MiB for ResNet-18) cannot
travel, so a run cut off by the time limit is dropped, and the call's record says why.

Every call writes into its own folder, <experiment>/calls/<UTC time>-<device>/runs/, packed
whole; `report` reads all of them, and since runs record their data by content, runs made from
the data unpacked on several machines are one context. The plan is recorded once, in
<experiment>/plan.json, before the first run of the first call.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml
from common import describe_device
from runner import ROOT, TERM_GRACE_S, Ctx, child_env, pack, read_call, rel, run_logged, run_summary, shown

from fineprune_cli.analysis.decide import plan as plans
from fineprune_cli.analysis.decide.judging import load_judging
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.drivers.compare import Job, job_config, load_compare
from fineprune_cli.drivers.compare import plan as jobs_of
from fineprune_cli.drivers.matrix import family_of
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.sequential.looks import next_runs

CONFIG = Path("experiments/gpu/cifar10-resnet18.yaml")
# the dry run: the paper's config with a tiny model, data and schedule (pruning from epoch 2)
QUICK_CONFIG = {
    "model": {"name": "lenet"},
    "data": {"label": "tiny generated JPEGs (dry run)"},
    "train": {"epochs": 4},
    "prune": {"window": 3, "start": 2, "block": 1},
    "run": {"compile": False},
    # the matrix's 10% and 15% shorter arms of 4 epochs would train 4 (regular's run) and 3
    "compare": {"looks": [2, 3], "shorter": [0.25, 0.5]},
}


def reproduce(ctx: Ctx) -> int:
    """Train the next missing runs of the matrix that fit this call, then pack them."""
    data_dir = tiny_images(ctx.work / "quick-images") if ctx.quick else cifar10_jpeg(ctx.work)
    config = config_file(ctx)
    cfg, c, judging = matrix(config, data_dir, ctx.device)
    made = runs_made(ctx.experiment)
    first = jobs_of(cfg, replace(c, seeds=list(range(c.looks[0]))))
    plan = plans.record(ctx.experiment, judging, c.looks, len(made), family_of(first))
    cfg.run.plan = plan.digest  # each run records the plan it is made under
    call = ctx.experiment / "calls" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{ctx.tag}"
    todo = next_runs(cfg, replace(c, out=str(call / "runs")), judging, made)
    if not todo:
        print("reproduce: every policy is decided, or every planned look is trained: nothing to train", flush=True)
        return 0
    (call / "runs").mkdir(parents=True, exist_ok=True)
    shutil.copy(plan.path or ctx.experiment / plans.PLAN_FILE, call / "runs" / plans.PLAN_FILE)
    pace = seconds_per_epoch(ctx.experiment, describe_device(torch.device(ctx.device)))
    records = []
    for job in todo[: ctx.max_runs or None]:
        epochs = job_config(cfg, job, str(call / "runs")).train.epochs
        if pace is not None and not fits(pace * epochs, ctx.left()):
            print(f"reproduce: {job} needs ~{pace * epochs:.0f} s, {ctx.left():.0f} s are left: next call", flush=True)
            break
        record = train(ctx, cfg, job, call)
        records.append(record)
        if record["status"] != "complete":  # cut off at the time limit: nothing more fits
            break
        pace = max(pace or 0.0, record["seconds"] / max(record["epochs"], 1))
    (call / "call.json").write_text(json.dumps(call_record(ctx, config, records, len(todo)), indent=2) + "\n")
    print("\n".join(summary(records, len(todo), pace, ctx)), flush=True)
    code = pack(ctx, "reproduce", [call, ctx.experiment / plans.PLAN_FILE])
    return max(code, 0 if records and all(r["status"] == "complete" for r in records) else 1)


def fits(seconds: float, left: float) -> bool:
    """A run of `seconds` ends before the step's runner stops it, TERM_GRACE_S before time is up."""
    return seconds <= left - TERM_GRACE_S


def matrix(config: Path, data_dir: Path, device: str):
    """The run config, the matrix (compare section) and the judging plan of the experiment file."""
    overrides = {"data.data_dir": str(data_dir), "run.device": device}
    cfg = build_config(config, overrides)
    return cfg, load_compare(config, {}), load_judging(config, {})


def runs_made(experiment: Path) -> list:
    """The complete runs of every earlier call (of any machine), as their archives left them."""
    calls = sorted((experiment / "calls").glob("*/runs"))
    return load_runs(calls)[0] if calls else []


def seconds_per_epoch(experiment: Path, machine: str) -> float | None:
    """The slowest pace (seconds a run took / its epochs, start-up and evaluation included) that
    a whole run reached on this kind of device in an earlier call; None before the first."""
    paces = [
        r["seconds"] / r["epochs"]
        for path in (experiment / "calls").glob("*/call.json")
        for record in [read_call(path)]
        if record.get("machine") == machine
        for r in record.get("runs", [])
        if r.get("status") == "complete" and r.get("epochs")
    ]
    return max(paces) if paces else None


def train(ctx: Ctx, cfg, job: Job, call: Path) -> dict:
    """One run of the matrix with `fineprune train`, its config the one `compare` would give it;
    the run folder keeps no checkpoint (it never travels) and no dot files."""
    job_cfg = job_config(cfg, job, str(call / "runs"))
    run = Path(job_cfg.run.out)
    settings = job_cfg.to_dict()
    del settings["run"]["out"]  # a config file may not write outside the working folder: --out may
    spec = ctx.work / "jobs" / f"{job.arm}-seed{job.seed}.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(yaml.safe_dump(settings, sort_keys=False))
    cmd = [sys.executable, "-m", "fineprune_cli", "train", "--config", str(spec), "--out", rel(run)]
    env = child_env(FINEPRUNE_CACHE=str(ctx.work / "cache"), TORCHINDUCTOR_CACHE_DIR=str(ctx.work / "inductor-cache"))
    log = call / "logs" / f"{job.arm}-seed{job.seed}.log"
    rc = run_logged(cmd, log, ctx, env)
    for name in ("checkpoint.pt", ".lock"):
        (run / name).unlink(missing_ok=True)
    after = run_summary(run)
    if after.get("status") != "complete":  # a part of a run cannot travel: it is not kept
        shutil.rmtree(run, ignore_errors=True)
    step = json.loads(log.with_suffix(".json").read_text())
    return {
        "arm": job.arm,
        "seed": job.seed,
        "command": shown([*cmd[:4], rel(spec), *cmd[5:]]),
        "returncode": rc,
        "status": after.get("status", "no run"),
        "epochs": after.get("epochs_completed", 0),
        "seconds": step["seconds"],
        "train_seconds": after.get("train_seconds"),
        "stop_reason": step["stop_reason"],
    }


def call_record(ctx: Ctx, config: Path, records: list[dict], todo: int) -> dict:
    return {
        "machine": describe_device(torch.device(ctx.device)),
        "config": rel(config),
        "budget_s": ctx.budget,
        "asked": todo,
        "runs": records,
    }


def summary(records: list[dict], todo: int, pace: float | None, ctx: Ctx) -> list[str]:
    """The call in numbers, and what the rest of the look needs at the pace measured."""
    done = [r for r in records if r["status"] == "complete"]
    lines = [f"reproduce: {len(done)} of the {todo} runs the looks ask for next trained in this call"]
    lines += [f"  {r['arm']} seed {r['seed']}: {r['status']}, {r['epochs']} epochs, {r['seconds']} s" for r in records]
    left = todo - len(done)
    if left and pace:
        per_call = max(1, int((ctx.budget - 20 - TERM_GRACE_S) // (pace * max(done[0]["epochs"] if done else 1, 1))))
        lines.append(f"  {left} more run(s): about {-(-left // per_call)} call(s) of {per_call} at this pace")
    elif left:
        lines.append(f"  {left} more run(s); no whole run timed on this device yet")
    return lines


def config_file(ctx: Ctx) -> Path:
    """The matrix's config; in the dry run with QUICK_CONFIG laid over it; with --epochs scaled."""
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

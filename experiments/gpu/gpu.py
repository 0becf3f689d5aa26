"""`make gpu`: the CUDA path checked, benchmarked and the paper's ResNet-18 row reproduced, in
steps that each fit one 10-minute call on a lent GPU machine (issues 16, 24).

    python experiments/gpu/gpu.py STEP [--device cuda|cpu] [--quick] [--results-dir R]

  check              the test suite with CUDA visible, gpu-marked tests first  -> R/gpu-<dev>/check/
  bench              experiments/bench/bench.py, every model                   -> R/bench/<dev>.{csv,md}
  reproduce          the next missing runs of the GPU matrix (ResNet-18, CIFAR-10 (JPEG q75), the
                     paper's 200-epoch recipe, arms regular/fine/random/shorter-10/shorter-15,
                     seeds in planned looks): as many whole runs as fit the call; any later call,
                     on any machine, goes on  -> R/cifar10-jpeg-resnet18[-e<N>]/calls/<time>-<dev>/
  report             `fineprune report` over every call's runs, with notes.md  -> R/cifar10-jpeg-resnet18[-e<N>]/
  dist               each distributed mode on the device, interrupted after its first epoch and
                     resumed: sync with 2 ranks in a process group, async with 2 servers, mixed;
                     LeNet, Fashion-MNIST                           -> R/gpu-<dev>/dist/dist.{json,md}
  all                the seven in order

<dev> is the device's name as a slug (nvidia-h100-80gb-hbm3). With $OUT set (the device tool's
folder of files that come back) each step also packs what it wrote into $OUT/<step>.tar.gz, paths
starting at results/ and never a checkpoint.pt: `tar xzf <step>.tar.gz` at the repository root
puts the results in place. A step stops its work (SIGTERM: a training run finishes its epoch and
records itself interrupted) in time to pack within --budget seconds; the reproduce step starts a
run only while a whole one fits at the pace earlier calls measured on this kind of device
(experiments/gpu/README.md).

`--device cpu --quick` is the dry run CI runs (tests/test_gpu_script.py): LeNet on a tiny
generated JPEG folder, 4 epochs, no compile; the check step then runs only tests/test_gpu.py.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments" / "bench"), str(ROOT / "experiments" / "gpu")]

# bench's file naming and the engine's device and commit, through one module (the engine is being reorganised)
from common import device_slug, git_commit, table_stem  # noqa: E402
from distcheck import dist  # noqa: E402
from reproduce import reproduce  # noqa: E402
from runner import Ctx, child_env, environment, invocation, pack, read_call, rel, run_logged  # noqa: E402

STEPS = ("check", "bench", "reproduce", "report", "dist")
QUICK_BENCH = ["--models", "lenet", "--subset", "256", "--rounds", "1", "--peak-size", "256"]


# --- the steps -----------------------------------------------------------------------------


def check(ctx: Ctx) -> int:
    """pytest with CUDA visible: the gpu-marked tests first (the point of the call), then the rest
    with the time left. The dry run hides CUDA and runs only tests/test_gpu.py."""
    folder = ctx.results / f"gpu-{ctx.tag}" / "check"
    folder.mkdir(parents=True, exist_ok=True)
    extra = {"CUDA_VISIBLE_DEVICES": ""} if ctx.device == "cpu" else {}
    fmnist = ctx.work / "fashion-mnist"
    if fmnist.is_dir():  # carried by the device tool; tests/test_gpu.py looks here
        extra["FINEPRUNE_FMNIST_DIR"] = str(fmnist)
    else:  # 30 MB: a call carries 64 MiB, so it travels alone, without the CIFAR-10 npz
        print(
            f"check: Fashion-MNIST not carried ({rel(fmnist)}): its CUDA test skips; carry it with this step",
            flush=True,
        )
    _nvidia_smi(folder / "nvidia-smi.txt")
    parts = [("gpu", ["-m", "gpu", "tests/test_gpu.py" if ctx.quick else "tests"])]
    if not ctx.quick:
        parts.append(("rest", ["-m", "not gpu", "tests"]))
    codes = {}
    for name, args in parts:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--junitxml={folder / f'junit-{name}.xml'}",
            *args,
        ]
        codes[name] = run_logged(cmd, folder / f"pytest-{name}.log", ctx, child_env(**extra))
    summary = {
        "fashion_mnist": "carried" if fmnist.is_dir() else "not carried: its test skipped",
        "returncodes": codes,
        "tests": {n: junit_counts(folder / f"junit-{n}.xml") for n in codes},
        **environment(ctx),
    }
    (folder / "check.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["tests"]), flush=True)
    return max(pack(ctx, "check", [folder]), max(codes.values()))


def _nvidia_smi(path: Path) -> None:
    if shutil.which("nvidia-smi"):
        path.write_text(subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout)


def junit_counts(path: Path) -> dict[str, int]:
    """tests / failures / errors / skipped from pytest's JUnit XML (absent: the run was cut off)."""
    if not path.exists():
        return {"missing": 1}
    suites = list(ET.parse(path).getroot().iter("testsuite"))
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}


def bench(ctx: Ctx) -> int:
    """experiments/bench/bench.py, every model (or --models, merged into the table already there)."""
    out = ctx.results / "bench"
    args = ["--device", ctx.device, "--out", rel(out)]
    if ctx.quick:
        args += QUICK_BENCH
    elif ctx.models:
        args += ["--models", ctx.models, "--merge"]
    stem = table_stem("", torch.device(ctx.device), out)
    rc = run_logged([sys.executable, "experiments/bench/bench.py", *args], stem.with_suffix(".log"), ctx)
    missing = [m for m in bench_models(ctx) if m not in table_models(stem.with_suffix(".csv"))]
    if missing:  # cut off at the time limit, or failed: the next call measures the rest
        print(
            f"bench: not measured: {','.join(missing)}; next: make gpu STEP=bench "
            f"GPU_ARGS='--models {','.join(missing)}'",
            flush=True,
        )
    files = [stem.with_suffix(s) for s in (".csv", ".md", ".log", ".json")]
    return max(pack(ctx, "bench", files), rc, 1 if missing else 0)


def bench_models(ctx: Ctx) -> list[str]:
    from fineprune_cli import models

    if ctx.quick:
        return QUICK_BENCH[QUICK_BENCH.index("--models") + 1].split(",")
    return ctx.models.split(",") if ctx.models else models.list_models()


def table_models(path: Path) -> list[str]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [row["model"] for row in csv.DictReader(f)]


def report(ctx: Ctx) -> int:
    """`fineprune report` over every call's runs, notes.md (devices, calls, commit) on top."""
    calls = sorted((ctx.experiment / "calls").glob("*/call.json"))
    if not list((ctx.experiment / "calls").glob("*/runs/*/*/summary.json")):
        print(
            f"error: no runs in {ctx.experiment / 'calls'}: run the reproduce step first (or unpack its "
            "archives at the repository root)",
            file=sys.stderr,
        )
        return 2
    notes = ctx.experiment / "notes.md"
    notes.write_text(notes_text(ctx, [read_call(p) for p in calls], [p.parent.name for p in calls]))
    log = ctx.experiment / "logs" / "report.log"
    cmd = [sys.executable, "-m", "fineprune_cli", "report", rel(ctx.experiment / "calls")]
    rc = run_logged([*cmd, "--out", rel(ctx.experiment), "--notes", rel(notes)], log, ctx)
    return max(pack(ctx, "report", [ctx.experiment]), rc)


def notes_text(ctx: Ctx, calls: list[dict], names: list[str]) -> str:
    """Where the runs were made and how, read from the calls' records (nothing typed in by hand)."""
    what = (
        "a dry run of"
        if ctx.quick
        else f"the paper's 200-epoch recipe scaled to {ctx.epochs} epochs (not the paper's row), by"
        if ctx.epochs
        else "the paper's 200-epoch recipe, by"
    )
    lines = [
        f"# The GPU matrix: {what} `make gpu`",
        "",
        f"- report at commit {git_commit()}; each run's summary.json names its own commit, device and torch",
        "- data: `../shared/data/cifar10-jpeg.npz` (CIFAR-10 re-encoded as JPEG, quality about 75), "
        "unpacked by its `unpack_cifar10_jpeg.py` into an image folder, `--dataset folder`"
        if not ctx.quick
        else "- data: a tiny generated JPEG folder (dry run)",
        "- calls (each on the machine named; runs that did not finish within the call are dropped):",
    ]
    for name, call in zip(names, calls):
        runs = "; ".join(
            f"{r['arm']} seed {r['seed']}: {r['status']} in {r['seconds']} s" for r in call.get("runs", [])
        )
        lines.append(f"  - `{name}` on {call['machine']}: {runs or 'no run'}")
    lines.append(f"  - report: `{invocation()}`")
    return "\n".join(lines) + "\n"


def run_step(ctx: Ctx, step: str) -> int:
    from fineprune_cli.errors import ConfigError

    ctx.start_step()
    print(f"== {step} ({ctx.device}{', quick' if ctx.quick else ''}) ==", flush=True)
    try:
        return {"check": check, "bench": bench, "reproduce": reproduce, "report": report, "dist": dist}[step](ctx)
    except ConfigError as exc:  # a record it reads is not one (a torn call.json, an edited plan.json): one line
        print(f"error: {step}: {exc}", file=sys.stderr, flush=True)
        return 2


# --- command line --------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=[*STEPS, "all"])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="the dry run: tiny data, LeNet, 4 epochs, no compile")
    ap.add_argument(
        "--results-dir", type=Path, default=None, help="results root (default: results/; with --quick: .gpu-quick/)"
    )
    ap.add_argument(
        "--work-dir",
        type=Path,
        default=ROOT / ".gpu-data",
        help="carried inputs, unpacked data and the reproduce runs with their checkpoints "
        "(default .gpu-data/, ignored by git: it stays on the machine between calls)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=os.environ.get("OUT") or None,
        help="where the step's .tar.gz goes (default $OUT; none when unset)",
    )
    ap.add_argument(
        "--tag",
        default=None,
        help="device slug in folder names (default: this machine's); e.g. to report elsewhere on GPU runs",
    )
    ap.add_argument("--models", default=None, help="bench: these models only, merged into the table there")
    ap.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="reproduce, report: the recipe scaled to N epochs (lr steps and pruning windows at the same "
        "fractions), in its own folder (-e<N>) and labelled so; not the paper's 200-epoch row",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=None,
        help="reproduce: at most N runs in this call (default: as many whole runs as fit --budget)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=570,
        help="seconds a step may take, packing included (default 570: one 10-minute call)",
    )
    return ap.parse_args(argv)


def make_ctx(args: argparse.Namespace) -> Ctx:
    needs_device = args.step != "report" or args.tag is None
    if needs_device and args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda, but CUDA is not available here (--device cpu --quick is the dry run)")
    results = args.results_dir or ROOT / (".gpu-quick" if args.quick else "results")
    tag = args.tag or device_slug(torch.device(args.device))
    return Ctx(
        args.device,
        args.quick,
        results.resolve(),
        args.work_dir.resolve(),
        args.out.resolve() if args.out else None,
        tag,
        args.budget,
        args.models,
        args.epochs,
        args.runs,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    ctx = make_ctx(args)
    steps = STEPS if args.step == "all" else (args.step,)
    codes, seconds = [], []
    for step in steps:
        start = time.monotonic()
        codes.append(run_step(ctx, step))
        seconds.append(time.monotonic() - start)
    for step, code, took in zip(steps, codes, seconds):  # the time: what each step leaves of a call's budget
        print(f"{step}: {'ok' if code == 0 else f'failed ({code})'} ({took:.0f} s)", flush=True)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())

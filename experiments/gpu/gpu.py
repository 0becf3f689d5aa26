"""`make gpu`: the CUDA path checked, benchmarked and the paper's ResNet-18 row reproduced, in
steps that each fit one 10-minute call on a lent GPU machine (issue 16).

    python experiments/gpu/gpu.py STEP [--device cuda|cpu] [--quick] [--results-dir R]

  check              the test suite with CUDA visible, gpu-marked tests first  -> R/gpu-<dev>/check/
  bench              experiments/bench/bench.py, every model                   -> R/bench/<dev>.{csv,md}
  reproduce-regular  ResNet-18, CIFAR-10 (JPEG q75), the paper's 200-epoch recipe, compiled, seed 0
  reproduce-fine     the same with fine-pruning                     -> R/cifar10-jpeg-resnet18-<dev>/runs/
  reproduce-random   the same with the random control
  report             `fineprune report` over those runs, with notes.md  -> R/cifar10-jpeg-resnet18-<dev>/
  dist               each distributed mode on the device (issue 17): sync with 1 rank, async and mixed
                     with a server and 2 workers sharing it; LeNet, Fashion-MNIST, 2 epochs
                                                                    -> R/gpu-<dev>/dist/dist.{json,md}
  all                the seven in order

<dev> is the device's name as a slug (nvidia-h100-80gb-hbm3). With $OUT set (the device tool's
folder of files that come back) each step also packs what it wrote into $OUT/<step>.tar.gz, paths
starting at results/ and never a checkpoint.pt: `tar xzf <step>.tar.gz` at the repository root
puts the results in place. A step stops its work (SIGTERM: a training run finishes its epoch and
records itself interrupted) in time to pack within --budget seconds.

`--device cpu --quick` is the dry run CI runs (tests/test_gpu_script.py): LeNet on a tiny
generated JPEG folder, 2 epochs, no compile; the check step then runs only tests/test_gpu.py.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments" / "bench")]

# bench's file naming and the engine's device and commit, through one module (the engine is being reorganised)
from common import describe_device, device_slug, git_commit, table_stem  # noqa: E402

POLICIES = ("regular", "fine", "random")
STEPS = ("check", "bench", *(f"reproduce-{p}" for p in POLICIES), "report", "dist")
DIST_RUNS = (("sync", 1), ("async", 3), ("mixed", 3))  # (mode, processes): a server + 2 workers
CONFIG = Path("experiments/gpu/cifar10-resnet18.yaml")
PACK_RESERVE_S = 20    # kept back from --budget to pack the results
TERM_GRACE_S = 30      # between SIGTERM and SIGKILL: a run finishes its epoch and checkpoints
MAX_ARCHIVE = 16 * 2**20  # the device tool brings back files up to 16 MiB
# the dry run: the paper's config with a tiny model, data and schedule (pruning in epoch 2)
QUICK_CONFIG = {"model": {"name": "lenet"}, "data": {"label": "tiny generated JPEGs (dry run)"},
                "train": {"epochs": 2}, "prune": {"window": 3, "start": 2, "block": 1},
                "run": {"compile": False}}
QUICK_BENCH = ["--models", "lenet", "--subset", "256", "--rounds", "1", "--peak-size", "256"]


@dataclass
class Ctx:
    device: str
    quick: bool
    results: Path      # results root (the repository's results/ unless --results-dir)
    work: Path         # carried inputs (.gpu-data/cifar10, .gpu-data/fashion-mnist) and unpacked data
    out: Path | None   # $OUT: what comes back from the GPU machine
    tag: str           # device slug in folder names
    budget: float
    models: str | None = None
    deadline: float = 0.0

    def start_step(self) -> None:
        self.deadline = time.monotonic() + self.budget - PACK_RESERVE_S

    def left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def experiment(self) -> Path:
        name = "dry-run-lenet" if self.quick else "cifar10-jpeg-resnet18"
        return self.results / f"{name}-{self.tag}"


# --- running and packing -------------------------------------------------------------------

def rel(path: Path) -> str:
    """Paths inside the repository are written relative to it: commands in the records stay readable."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def child_env(**extra: str) -> dict[str, str]:
    """The project importable without an install (the GPU machine's python3 has none)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_logged(cmd: list[str], log: Path, ctx: Ctx, env: dict[str, str] | None = None) -> int:
    """Run `cmd` in the repository root, its output to our stdout and to `log`; at the step's
    deadline it gets SIGTERM, TERM_GRACE_S later SIGKILL. Writes `log`.json: command, exit code, time."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$", shown(cmd), flush=True)
    t0, stopped = time.monotonic(), threading.Event()
    with open(log, "w") as f, subprocess.Popen(cmd, cwd=ROOT, env=env or child_env(), text=True,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        def stop() -> None:
            stopped.set()
            proc.terminate()

        timers = [threading.Timer(max(0.0, ctx.left() - TERM_GRACE_S), stop),
                  threading.Timer(max(0.0, ctx.left()), proc.kill)]
        for timer in timers:
            timer.daemon = True
            timer.start()
        for line in proc.stdout:
            f.write(line)
            sys.stdout.write(line)
        rc = proc.wait()
        for timer in timers:
            timer.cancel()
    record = {"command": shown(cmd), "returncode": rc, "seconds": round(time.monotonic() - t0, 1),
              "stopped_at_deadline": stopped.is_set(), "gpu_py": invocation()}
    log.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return rc


def shown(cmd: list[str]) -> str:
    """A command as a reader would type it: `python`, not this interpreter's path."""
    return shlex.join(["python" if arg == sys.executable else arg for arg in cmd])


def invocation() -> str:
    return shlex.join(["python", "experiments/gpu/gpu.py", *sys.argv[1:]])


def _leave_out(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """No checkpoint (up to ~100 MB for ResNet-18, and only useful on the machine that made it),
    no dot files (half-written temporaries, dataset caches)."""
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
                tar.add(path, arcname=str(Path("results") / path.resolve().relative_to(ctx.results.resolve())),
                        filter=_leave_out)
    size = archive.stat().st_size
    print(f"packed {archive} ({size / 2**20:.2f} MiB)", flush=True)
    if size > MAX_ARCHIVE:
        print(f"error: {archive} is over 16 MiB and will not come back; copy less", file=sys.stderr)
        return 1
    return 0


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
    _nvidia_smi(folder / "nvidia-smi.txt")
    parts = [("gpu", ["-m", "gpu", "tests/test_gpu.py" if ctx.quick else "tests"])]
    if not ctx.quick:
        parts.append(("rest", ["-m", "not gpu", "tests"]))
    codes = {}
    for name, args in parts:
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={folder / f'junit-{name}.xml'}", *args]
        codes[name] = run_logged(cmd, folder / f"pytest-{name}.log", ctx, child_env(**extra))
    summary = {"returncodes": codes, "tests": {n: junit_counts(folder / f"junit-{n}.xml") for n in codes},
               **environment(ctx)}
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


def environment(ctx: Ctx) -> dict[str, str]:
    return {"device": describe_device(torch.device(ctx.device)),
            "torch": torch.__version__, "torch_cuda_build": str(torch.version.cuda),
            "python": platform.python_version(),
            "commit": git_commit(), "command": invocation()}


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
        print(f"bench: not measured: {','.join(missing)}; next: make gpu STEP=bench "
              f"GPU_ARGS='--models {','.join(missing)}'", flush=True)
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


def reproduce(ctx: Ctx, policy: str) -> int:
    """One policy of the paper's recipe through `fineprune compare` (which reuses a complete run)."""
    data_dir = tiny_images(ctx.work / "quick-images") if ctx.quick else cifar10_jpeg(ctx.work)
    runs = ctx.experiment / "runs"
    cmd = [sys.executable, "-m", "fineprune_cli", "compare", "--config", rel(config_file(ctx)),
           "--policies", policy, "--seeds", "0", "--device", ctx.device, "--data-dir", rel(data_dir),
           "--out", rel(runs)]
    log = ctx.experiment / "logs" / f"reproduce-{policy}.log"
    rc = run_logged(cmd, log, ctx)
    run_dirs = sorted(runs.glob(f"*/{policy}-seed0"))
    status = [json.loads((d / "summary.json").read_text()).get("status") for d in run_dirs
              if (d / "summary.json").exists()]
    print(f"reproduce-{policy}: {status or 'no run folder'}", flush=True)
    packed = pack(ctx, f"reproduce-{policy}", [*run_dirs, log, log.with_suffix(".json")])
    return max(packed, rc, 0 if status == ["complete"] else 1)


def config_file(ctx: Ctx) -> Path:
    """The paper's config; in the dry run a copy with QUICK_CONFIG laid over it."""
    if not ctx.quick:
        return ROOT / CONFIG
    cfg = yaml.safe_load((ROOT / CONFIG).read_text())
    for section, values in QUICK_CONFIG.items():
        cfg[section].update(values)
    path = ctx.work / "dry-run.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def cifar10_jpeg(work: Path) -> Path:
    """The image folder, unpacked once from the carried npz (`make gpu-data` puts it in
    .gpu-data/cifar10); unpacked beside and renamed, so a cut-off unpack is never used."""
    dest = work / "cifar10-jpeg"
    if dest.is_dir():
        return dest
    script = work / "cifar10" / "unpack_cifar10_jpeg.py"
    if not script.exists():
        sys.exit(f"error: {script} is missing: run `make gpu-data` where ../shared/data is, "
                 f"and carry {rel(work / 'cifar10')} to this machine")
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


def report(ctx: Ctx) -> int:
    """`fineprune report` over the reproduce runs, notes.md (device, commands, commit) on top."""
    runs = ctx.experiment / "runs"
    summaries = sorted(runs.glob("*/*/summary.json"))
    if not summaries:
        print(f"error: no runs in {runs}: run the reproduce steps first (or unpack their archives "
              f"at the repository root; --tag names the device they ran on)", file=sys.stderr)
        return 2
    notes = ctx.experiment / "notes.md"
    notes.write_text(notes_text(ctx, [json.loads(p.read_text()) for p in summaries]))
    log = ctx.experiment / "logs" / "report.log"
    rc = run_logged([sys.executable, "-m", "fineprune_cli", "report", rel(runs), "--out",
                     rel(ctx.experiment), "--notes", rel(notes)], log, ctx)
    return max(pack(ctx, "report", [ctx.experiment]), rc)


def notes_text(ctx: Ctx, summaries: list[dict]) -> str:
    """Where the runs were made and how, read from their records (nothing typed in by hand)."""
    def values(key: str) -> str:
        return ", ".join(sorted({str(s.get(key, "?")) for s in summaries}))

    steps = sorted((ctx.experiment / "logs").glob("reproduce-*.json"))
    what = "a dry run of" if ctx.quick else "the paper's 200-epoch recipe, by"
    lines = [f"# {values('model')} on {values('dataset_label')}: {what} `make gpu`", "",
             f"- device: {values('device')}; torch {values('torch')}",
             f"- code: commit {values('git_commit')} (runs); report at commit {git_commit()}",
             "- data: `../shared/data/cifar10-jpeg.npz` (CIFAR-10 re-encoded as JPEG, quality about 75), "
             "unpacked by its `unpack_cifar10_jpeg.py` into an image folder, `--dataset folder`"
             if not ctx.quick else "- data: a tiny generated JPEG folder (dry run)",
             "- runs (policy: status, epochs, training seconds):"]
    lines += [f"  - {s.get('policy')}: {s.get('status')}, {s.get('epochs_completed')} of {s.get('epochs')} "
              f"epochs, {s.get('train_seconds')} s" for s in summaries]
    lines += ["- commands:"]
    for path in steps:
        step = json.loads(path.read_text())
        lines.append(f"  - {path.stem}: `{step['gpu_py']}` ran `{step['command']}` (exit {step['returncode']}, "
                     f"{step['seconds']} s{', stopped at its time limit' if step['stopped_at_deadline'] else ''})")
    lines.append(f"  - report: `{invocation()}`")
    return "\n".join(lines) + "\n"


def dist(ctx: Ctx) -> int:
    """Every --dist-mode trains on the device, each run afresh; the processes of a server mode
    share the one GPU (each sees it as cuda:0). The dry run: synthetic data, 1 epoch, the async
    run alone (the plumbing is the same for all three; each launch costs CI half a minute)."""
    folder = ctx.results / f"gpu-{ctx.tag}" / "dist"
    fmnist = ctx.work / "fashion-mnist"
    data = (["--dataset", "synthetic", "--subset", "512", "--test-subset", "100", "--epochs", "1"] if ctx.quick
            else ["--dataset", "fashion-mnist", "--epochs", "2", *(["--data-dir", rel(fmnist)] if fmnist.is_dir() else [])])
    rows, codes = [], []
    for mode, processes in DIST_RUNS[1:2] if ctx.quick else DIST_RUNS:
        run = folder / "runs" / f"lenet-{mode}-p{processes}"
        shutil.rmtree(run, ignore_errors=True)
        cmd = [sys.executable, "-m", "fineprune_cli", "train", "--model", "lenet", *data, "--lr", "0.01",
               "--device", ctx.device, "--dist-mode", mode, "--dist-timeout", "300", "--out", rel(run), "--json",
               *(["--nproc-per-node", str(processes)] if processes > 1 else [])]
        codes.append(run_logged(cmd, folder / "logs" / f"{mode}.log", ctx))
        rows.append(dist_row(mode, processes, run, codes[-1]))
    (folder / "dist.json").write_text(json.dumps({"runs": rows, **environment(ctx)}, indent=2) + "\n")
    header = list(rows[0])
    (folder / "dist.md").write_text("\n".join([
        f"# Distributed modes on {environment(ctx)['device']}", "",
        f"- code {git_commit()}; torch {torch.__version__}; command: `{invocation()}`",
        "- async and mixed: rank 0 serves, 2 workers train; all processes share the device", "",
        "| " + " | ".join(header) + " |", "|" + " --- |" * len(header),
        *("| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows)]) + "\n")
    print(json.dumps(rows), flush=True)
    failed = any(r["status"] != "complete" for r in rows)
    return max(pack(ctx, "dist", [folder]), max(codes), int(failed))


def dist_row(mode: str, processes: int, run: Path, rc: int) -> dict:
    s = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    seconds = s.get("train_seconds") or 0
    return {"mode": mode, "processes": processes, "exit": rc, "status": s.get("status", "no run"),
            "device": s.get("device", ""), "epochs": s.get("epochs_completed", 0),
            "final_accuracy": s.get("final_accuracy", ""), "train_seconds": seconds,
            "images_per_s": round(s.get("samples_seen", 0) / seconds, 1) if seconds else "",
            "staleness_mean": s.get("staleness_mean", "")}


def run_step(ctx: Ctx, step: str) -> int:
    ctx.start_step()
    print(f"== {step} ({ctx.device}{', quick' if ctx.quick else ''}) ==", flush=True)
    if step.startswith("reproduce-"):
        return reproduce(ctx, step.removeprefix("reproduce-"))
    return {"check": check, "bench": bench, "report": report, "dist": dist}[step](ctx)


# --- command line --------------------------------------------------------------------------

def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=[*STEPS, "all"])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="the dry run: tiny data, LeNet, 2 epochs, no compile")
    ap.add_argument("--results-dir", type=Path, default=None,
                    help="results root (default: results/; with --quick: .gpu-quick/)")
    ap.add_argument("--work-dir", type=Path, default=ROOT / ".gpu-data",
                    help="carried inputs and unpacked data (default .gpu-data/)")
    ap.add_argument("--out", type=Path, default=os.environ.get("OUT") or None,
                    help="where the step's .tar.gz goes (default $OUT; none when unset)")
    ap.add_argument("--tag", default=None,
                    help="device slug in folder names (default: this machine's); e.g. to report elsewhere on GPU runs")
    ap.add_argument("--models", default=None, help="bench: these models only, merged into the table there")
    ap.add_argument("--budget", type=float, default=570,
                    help="seconds a step may take, packing included (default 570: one 10-minute call)")
    return ap.parse_args(argv)


def make_ctx(args: argparse.Namespace) -> Ctx:
    needs_device = args.step != "report" or args.tag is None
    if needs_device and args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda, but CUDA is not available here (--device cpu --quick is the dry run)")
    results = args.results_dir or ROOT / (".gpu-quick" if args.quick else "results")
    tag = args.tag or device_slug(torch.device(args.device))
    return Ctx(args.device, args.quick, results.resolve(), args.work_dir.resolve(),
               args.out.resolve() if args.out else None, tag, args.budget, args.models)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    ctx = make_ctx(args)
    steps = STEPS if args.step == "all" else (args.step,)
    codes = [run_step(ctx, step) for step in steps]
    for step, code in zip(steps, codes):
        print(f"{step}: {'ok' if code == 0 else f'failed ({code})'}", flush=True)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())

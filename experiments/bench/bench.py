"""`make bench`: one table per device, results/bench/<device>.csv and .md.

Per model, on CIFAR-shaped synthetic data at batch 128, measured in one run:
- throughput of our trainer and of a bare PyTorch loop on the same preloaded tensors;
- FLOPs per training image (torch.utils.flop_counter, forward + backward) and the share of
  the device's peak our throughput reaches (peak: the nominal bf16 dense figure for known
  GPUs, else a measured large matmul, named in the table);
- a pruned epoch's time relative to a full one at prune fraction 0.3 and 0.5;
- DroppingCount + selection overhead as a share of training time;
- the projected time of the paper's 200-epoch regular run (50,000 images), beside Table 1's.

On a GPU every loop is compiled (`--compile auto`), as the GPU configs train; `--compile off`
writes `<device>-eager`. `--quick` (what `make bench` runs on a CPU) keeps to a few models and small subsets so it
ends in under 10 minutes on 2 cores.

The table is rewritten after every model, so a run stopped at a time limit keeps the models
it finished; `--merge` keeps the rows of models not measured now from the table already there
(to measure the zoo over several sessions: each row names its commit).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from bench_prune import run as prune_ratio
from bench_trainer import bench as throughput
from common import table_stem, write_table
from torch.utils.flop_counter import FlopCounterMode

from fineprune_cli import models
from fineprune_cli.analysis.render.tables import paper_results
from fineprune_cli.engine.records.record import git_commit
from fineprune_cli.engine.training.device import describe_device, resolve_device

# nominal dense bf16 tensor-core peaks (vendor data sheets), TFLOP/s
GPU_PEAKS = {
    "H100 SXM": 989.4,
    "H100 80GB HBM3": 989.4,
    "H100 PCIe": 756.5,
    "H100 NVL": 835.0,
    "H200": 989.4,
    "A100": 312.0,
    "L40S": 362.1,
    "A10": 125.0,
    "4090": 165.2,
}
QUICK = {"lenet": 10000, "vgg13": 512, "resnet18": 512, "wrn10": 256}  # model -> samples per epoch on CPU


def flops_per_image(name: str) -> float:
    model = models.create(name, 3, 10)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    return counter.get_total_flops() / 4


def peak_tflops(device: torch.device, size: int = 2048) -> tuple[float, str]:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, peak in GPU_PEAKS.items():
            if key in name:
                return peak, f"nominal bf16 dense ({key})"
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    best = 0.0
    for _ in range(5):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(4):
            a @ a
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, 4 * 2 * size**3 / (time.perf_counter() - t0) / 1e12)
    return best, f"measured {str(dtype).removeprefix('torch.')} {size}² matmul"


def compiles(choice: str, device: torch.device) -> bool:
    """--compile auto: compiled on a GPU, as the GPU configs train (run.compile), eager on a CPU,
    where compiling costs more than it saves in a benchmark's few epochs. Eager on a GPU measures
    kernel launches more than the trainer: ResNet-18 at batch 128 reached 4% of an H100's peak."""
    return choice == "on" or (choice == "auto" and device.type == "cuda")


def variant(compiled: bool, device: torch.device) -> str:
    """The table's name says when a device ran in the mode that is not its default."""
    if compiled != compiles("auto", device):
        return "compiled" if compiled else "eager"
    return ""


def bench_model(name: str, subset: int, rounds: int, device: torch.device, peak: float, compiled: bool) -> dict:
    t = throughput(name, "synthetic", rounds, subset, device, compile=compiled)
    flops = flops_per_image(name)
    ratios = {f: prune_ratio(name, f, 5, subset, str(device), compile=compiled) for f in (0.3, 0.5)}
    paper = paper_results()["models"].get(name, {})
    return {
        "model": name,
        "samples": t["samples"],
        "ours_img_s": t["ours_img_s"],
        "bare_img_s": t["bare_img_s"],
        "ours_over_bare": t["ours_over_bare"],
        "gflop_per_img": round(flops / 1e9, 3),
        "peak_pct": round(100 * t["ours_img_s"] * flops / (peak * 1e12), 2),
        "pruned_0.3": ratios[0.3]["pruned_over_full"],
        "pruned_0.5": ratios[0.5]["pruned_over_full"],
        "overhead_pct": t["tracker_overhead_pct"],
        "projected_200ep_min": round(50000 * 200 / t["ours_img_s"] / 60, 1),
        "paper_200ep_min": round(paper["regular_s"] / 60, 1) if paper else "",
        "commit": git_commit(),
    }


def earlier_rows(csv_path: Path, columns: list[str], measuring: list[str]) -> list[dict]:
    """Rows of the table already at `csv_path` for models not measured now (same columns only)."""
    if not csv_path.exists():
        return []
    with open(csv_path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("model") not in measuring and list(r) == columns]
    return [{k: _number(v) for k, v in r.items()} for r in rows]


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--models", default=None, help="comma-separated (default: all; --quick: lenet,vgg13,resnet18,wrn10)"
    )
    ap.add_argument("--subset", type=int, default=None, help="training samples per epoch (default 50000)")
    ap.add_argument("--rounds", type=int, default=None, help="epochs timed per loop (default 3; --quick: 2)")
    ap.add_argument("--quick", action="store_true", help="a CPU-sized subset: few models, small epochs")
    ap.add_argument("--device", default="auto")
    ap.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="torch.compile ours, the bare loop and the pruned-epoch runs (auto: on a GPU only; "
        "a mode that is not the device's default names the table, e.g. <device>-eager)",
    )
    ap.add_argument(
        "--peak-size",
        type=int,
        default=None,
        help="matmul size measuring the peak where no data-sheet figure is known (default 2048; dry runs: smaller)",
    )
    ap.add_argument("--out", default=None, help="folder for the table (default results/bench)")
    ap.add_argument(
        "--merge", action="store_true", help="keep the rows of models not measured now from the table already there"
    )
    args = ap.parse_args()
    device = resolve_device(args.device)
    names = args.models.split(",") if args.models else list(QUICK) if args.quick else models.list_models()
    rounds = args.rounds or (2 if args.quick else 3)
    compiled = compiles(args.compile, device)
    mode = variant(compiled, device)
    peak, peak_source = peak_tflops(device, args.peak_size or 2048)
    cmd = "python experiments/bench/bench.py " + " ".join(
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in vars(args).items()
        if v not in (None, False, "auto")
    )
    notes = [
        "model: "
        + (
            "compiled (torch.compile; on a GPU reduce-overhead, i.e. CUDA graphs) in ours, the bare "
            "loop and the pruned-epoch runs"
            if compiled
            else "eager (not compiled) in ours, the bare loop and the pruned-epoch runs"
        ),
        f"peak: {peak:.2f} TFLOP/s ({peak_source}); peak_pct = ours_img_s x FLOPs per image / peak",
        f"img/s: median of {rounds} epochs of ours and of the bare loop, alternating, same run",
        "pruned_0.3 / pruned_0.5: pruned over full epoch time, same run (ideal 0.7 / 0.5)",
        "overhead_pct: DroppingCount.update time / training time, same run",
        "projected_200ep_min: 200 x 50,000 images at ours_img_s, training only; paper: Table 1 regular, GTX 1080 Ti",
        f"device: {describe_device(device)}",
    ]
    rows: list[dict] = []
    failed: dict[str, str] = {}
    for name in names:
        subset = args.subset or (QUICK.get(name, 512) if args.quick else None)
        try:
            rows.append(bench_model(name, subset, rounds, device, peak, compiled))
        except Exception as exc:  # one model's failure (a diverged run, memory) must not cost the others
            failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            print(f"{name}: not measured ({failed[name]})", flush=True)
            continue
        print(rows[-1], flush=True)
        write(rows, names, failed, device, cmd, notes, args, mode)
    if rows and failed:  # the table names what failed, with why
        write(rows, names, failed, device, cmd, notes, args, mode)
    sys.exit(1 if failed else 0)


def write(rows: list[dict], names: list[str], failed: dict[str, str], device, cmd, notes, args, mode) -> None:
    """The table after every model: a run stopped at a time limit keeps what it measured."""
    kept = (
        earlier_rows(table_stem("", device, args.out, mode).with_suffix(".csv"), list(rows[0]), names)
        if args.merge
        else []
    )
    zoo = models.list_models()
    table = sorted(kept + rows, key=lambda r: zoo.index(r["model"]) if r["model"] in zoo else len(zoo))
    why = [f"not measured: {name} ({reason})" for name, reason in failed.items()]
    print("wrote", write_table("", table, device, cmd, notes + why, args.out, mode), flush=True)


if __name__ == "__main__":
    main()

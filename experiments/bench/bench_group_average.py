"""What a mixed group's gradient average cost on the host path (issue 24, item 5): one flat
gloo all_reduce of a model's gradient between 2 processes, and one flat copy of it (the
concatenation of its tensors), on this machine's CPU, one thread per process.

    python experiments/bench/bench_group_average.py [--model resnet18] [--reps 10]

On a GPU the old path added a device-to-host copy per member and step; the new one averages
on the device (NCCL) and copies once, on the leader. Prints one line; not a timed test.
"""

from __future__ import annotations

import argparse
import socket
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fineprune_cli import models


def measure(rank: int, size: int, port: int, sizes: list[int], reps: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size, timeout=timedelta(seconds=120)
    )
    pieces = [torch.randn(n) for n in sizes]
    flat = torch.cat(pieces)
    dist.all_reduce(flat)  # warm-up
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(flat)
    dist.barrier()
    reduce_s = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.cat(pieces)
    copy_s = (time.perf_counter() - t0) / reps
    if rank == 0:
        print(
            f"{flat.numel():,} float32 ({flat.numel() * 4 / 2**20:.0f} MiB) in {len(sizes)} tensors: gloo "
            f"all_reduce over {size} processes {reduce_s * 1e3:.1f} ms, one flat copy {copy_s * 1e3:.1f} ms"
        )
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    sizes = [p.numel() for p in models.create(args.model, 3, 10).parameters()]
    with socket.socket() as s:  # a free port for this measurement's own two processes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(measure, args=(2, port, sizes, args.reps), nprocs=2)


if __name__ == "__main__":
    main()

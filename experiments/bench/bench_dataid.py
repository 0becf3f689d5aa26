"""What an image folder's identity costs at a run's start (issue 42): the mtime listing the old
identity hashed, and the content identity (every file's bytes, digests cached) with no digest
cache and then cached. `--drop-page-cache` (root only) empties the OS page cache first, so the
first content pass reads from disk. Writes one Markdown line per pass to --out and prints it.

    python experiments/bench/bench_dataid.py .data/cifar10-jpeg --drop-page-cache

Times compare only within one run of this script: one machine, one disk.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path


def _timed(step):
    start = time.perf_counter()
    value = step()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="an image folder with train/ and test/")
    parser.add_argument("--drop-page-cache", action="store_true", help="sync and drop the page cache first (root)")
    parser.add_argument("--out", type=Path, default=Path("results/bench/dataid-cpu.md"))
    args = parser.parse_args()
    os.environ["FINEPRUNE_CACHE"] = tempfile.mkdtemp()  # no digests cached before the first pass
    from fineprune_cli.engine.inputs import dataid
    from fineprune_cli.engine.inputs.imagefolder import identity, list_folder

    if args.drop_page_cache:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    listing, listed = _timed(lambda: list_folder(args.folder))
    first, cold = _timed(lambda: dataid.folder_identity(args.folder, listing))
    again, cached = _timed(lambda: dataid.folder_identity(args.folder, listing))
    _, by_mtime = _timed(lambda: identity(args.folder, listing))
    assert first == again, "the cached digests gave another identity"
    files = sum(len(listing[split]) for split in ("train", "test"))
    cold_word = "page cache dropped" if args.drop_page_cache else "files possibly in the page cache"
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout
    text = (
        f"# Image folder identity at a run's start\n\n"
        f"Made by `python experiments/bench/bench_dataid.py {args.folder}"
        f"{' --drop-page-cache' if args.drop_page_cache else ''}` at commit {commit.strip()} on "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; {files:,} files.\n\n"
        "| pass | seconds |\n|---|---|\n"
        f"| listing the folder | {listed:.2f} |\n"
        f"| content identity, no digest cache ({cold_word}) | {cold:.2f} |\n"
        f"| content identity, digests cached | {cached:.2f} |\n"
        f"| old identity (paths, sizes, mtimes) | {by_mtime:.2f} |\n"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

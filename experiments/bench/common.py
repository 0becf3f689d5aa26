"""Shared bits of the benchmark scripts: device naming and writing CSV + Markdown tables."""

from __future__ import annotations

import csv
import io
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fineprune_cli.engine.records.files import atomic_write_text  # noqa: E402
from fineprune_cli.engine.records.record import git_commit  # noqa: E402
from fineprune_cli.engine.training.device import describe_device  # noqa: E402


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def device_slug(device) -> str:
    """The device in file names: 'nvidia-h100-80gb-hbm3', 'cpu-intel-r-xeon-r-processor'."""
    return slug(describe_device(device).split(",")[0])


def table_stem(name: str, device, out: Path | None = None, variant: str = "") -> Path:
    """<out>/<name>-<device>[-<variant>] (out: results/bench by default); add .csv or .md."""
    return Path(out or ROOT / "results" / "bench") / "-".join(filter(None, [name, device_slug(device), variant]))


def write_table(
    name: str, rows: list[dict], device, command: str, notes: list[str], out: Path | None = None, variant: str = ""
) -> Path:
    """results/bench/<name>-<device>[-<variant>].csv and .md, with the machine and the command to redo it."""
    stem = table_stem(name, device, out, variant)
    stem.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(stem.with_suffix(".csv"), buf.getvalue())
    cols = list(rows[0])
    md = [
        f"# {name or 'Benchmarks'}: {describe_device(device)}",
        "",
        f"- machine: {describe_device(device)}",
        f"- measured: {time.strftime('%Y-%m-%d')}, commit {git_commit()}",
        f"- command: `{command}`",
        *[f"- {n}" for n in notes],
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    md += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |" for r in rows]
    atomic_write_text(stem.with_suffix(".md"), "\n".join(md) + "\n")
    return stem


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)

"""Helpers shared by the test files."""

import csv
import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from fineprune_cli.cli import app

TIMING = {"train_seconds", "overhead_seconds"}  # columns that differ between identical runs
_runner = CliRunner()


def invoke(args):
    """Run the CLI in-process; returns click's Result (exit_code, output)."""
    return _runner.invoke(app, [str(a) for a in args])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_rows(run_dir, drop_timing=False):
    with open(Path(run_dir) / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows] if drop_timing else rows


def summary_of(run_dir):
    return json.loads((Path(run_dir) / "summary.json").read_text())

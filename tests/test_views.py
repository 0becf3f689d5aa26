"""cli.views: terminal tables fit 100 columns with every header whole; words agree with numbers."""

import csv
from pathlib import Path
from types import SimpleNamespace

import torch
from rich.cells import cell_len

from fineprune_cli.cli import views
from fineprune_cli.engine.device import describe_device

SCALE = Path(__file__).resolve().parents[1] / "results" / "scale"


def test_the_scale_table_fits_100_columns_with_its_headers_whole(capsys):
    with open(SCALE / "scale.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    views.show_scale((rows, SCALE / "scale.md"), 0, False)
    out = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in out if not line.startswith("all columns")) <= 100
    header = next(line for line in out if "mode" in line and "workers" in line)
    for name in views.SCALE_COLUMNS.values():
        assert name in header
    assert "…" not in "".join(out)
    assert sum(line.strip().startswith(("sync", "async", "mixed")) for line in out) == 10


def test_one_epoch_and_one_sample_are_singular(capsys):
    summary = SimpleNamespace(model="lenet", dataset="synthetic", final_accuracy=50.0, best3_accuracy=50.0,
                              train_seconds=1.0, epochs=1, samples_skipped=1, run_dir="r")
    views.show_trained(summary, False)
    assert "over 1 epoch, 1 sample skipped" in capsys.readouterr().out
    summary.epochs, summary.samples_skipped = 2, 0
    views.show_trained(summary, False)
    assert "over 2 epochs, 0 samples skipped" in capsys.readouterr().out


def test_one_thread_is_singular(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert describe_device(torch.device("cpu")).endswith(", 1 thread")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert describe_device(torch.device("cpu")).endswith(", 2 threads")

"""cli.views: terminal tables fit 100 columns with every header whole; words agree with numbers."""

import csv
from pathlib import Path
from types import SimpleNamespace

import torch
from rich.cells import cell_len

from fineprune_cli.cli import views
from fineprune_cli.engine.training.device import describe_device

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
    summary = SimpleNamespace(
        model="lenet",
        dataset="synthetic",
        final_accuracy=50.0,
        best3_accuracy=50.0,
        train_seconds=1.0,
        epochs=1,
        samples_skipped=1,
        run_dir="r",
    )
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


def test_the_compare_table_fits_100_columns_at_its_widest_numbers(capsys):
    """Hours of training, a spread of time saved over 100 points, an interval below -10 and a
    long row name: still under 100 columns, the numbers whole."""
    row = {
        "model": "resnet18",
        "dataset": "CIFAR-10 (JPEG q75)",
        "variant": "",
        "seeds": 3,
        "policy": "infobatch (infobatch_rescale off, prune_fraction 0.5)",
        "train_s_mean": 21000.4,
        "train_s_std": 1500.2,
        "saved_pct_mean": -73.1,
        "saved_pct_std": 102.7,
        "skipped_pct_mean": 27.46,
        "skipped_pct_std": 0.31,
        "final_acc_mean": 100.0,
        "final_acc_std": 10.0,
        "d_final_mean": -21.18,
        "d_final_ci90_low": -36.24,
        "d_final_ci90_high": -6.13,
    }
    views.show_compare([row])
    out = capsys.readouterr().out.splitlines()
    table = [line for line in out if not line.startswith("n: seeds")]
    assert max(cell_len(line) for line in table) <= 100
    assert any("21000±1500" in line and "-73±103" in line and "-21.18 [-36.24,-6.13]" in line for line in table)

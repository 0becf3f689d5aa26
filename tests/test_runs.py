"""Reading run folders back (analysis/read/runs.py) and drawing them (analysis/render/plots.py): hostile
records are left out with a reason or lose only their own plot, never fail the report."""

import dataclasses
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from conftest import tiny
from factories import make, make_run
from fineprune_cli.analysis.read.runs import arm_of, check_counts
from fineprune_cli.analysis.render.plots import slug
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.cli import app
from fineprune_cli.errors import ConfigError

runner = CliRunner()


def _pruned(tmp_path, **summary):
    return make_run(tmp_path / "runs", "lenet", "fine", 0, 10.0, [50.0, 60.0], skipped_epochs=(2,), summary=summary)


@pytest.mark.slow
@pytest.mark.parametrize(
    "snapshot",
    [
        torch.tensor([]),
        torch.full((5,), float("nan")),
        torch.full((5,), float("inf")),
        {"a": torch.tensor([1])},
        "text",
        torch.zeros(2, 3),
        torch.tensor([-1, 2]),
        torch.tensor([1e300], dtype=torch.float64),
        torch.zeros(3, dtype=torch.bool),
    ],
)
def test_a_hostile_score_snapshot_costs_only_its_histogram(tmp_path, snapshot):
    path = _pruned(tmp_path)
    torch.save(snapshot, path / "dropping_counts_window0.pt")
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=True)
    assert len(report.runs) == 1 and report.runs[0].counts == {}
    assert not (tmp_path / "rep" / "plots" / "counts-lenet-cifar-10-jpeg-q75.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [{"window": "x"}, {"window": -3}, {"window": True}, {"window": 10**30}, {}])
def test_a_schedule_of_wrong_types_draws_the_timeline_without_resets(tmp_path, schedule):
    _pruned(tmp_path, schedule=schedule)
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=True)
    assert (tmp_path / "rep" / "plots" / "timeline-lenet-cifar-10-jpeg-q75.png").is_file() and report.runs


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("num_train", 10**400, "num_train and epochs must be positive"),
        ("num_train", 0, "num_train and epochs must be positive"),
        ("epochs", 10**30, "num_train and epochs"),
        ("samples_skipped", 10**30, "samples_skipped must be between"),
        ("samples_skipped", -1, "samples_skipped must be between"),
    ],
)
def test_impossible_counts_are_left_out_of_the_report_and_refused_by_estimate(tmp_path, field, value, words):
    path = _pruned(tmp_path, policy="ucb", **{field: value})
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    assert not report.runs and words in report.problems[0].reason
    (path / "config.yaml").write_text("prune: {enabled: true, policy: ucb}\n")
    result = runner.invoke(app, ["estimate", "--run", str(path)])
    assert result.exit_code == 2 and words in result.output, result.output


@pytest.mark.slow
def test_very_long_model_and_label_names_get_short_distinct_file_names(tmp_path):
    long_a, long_b = "m" * 200 + "a", "m" * 200 + "b"  # a folder name holds 255 bytes; a plot name holds both
    assert len(slug(long_a, "L" * 400)) < 130 and slug(long_a) != slug(long_b)
    assert slug("ResNet-18", "CIFAR-10 (JPEG q75)") == "resnet-18-cifar-10-jpeg-q75"  # short names unchanged
    make_run(tmp_path / "runs", long_a, "regular", 0, 10.0, [50.0, 60.0], label="L" * 400)
    make_run(tmp_path / "runs", long_a, "fine", 0, 9.0, [50.0, 61.0], skipped_epochs=(2,), label="L" * 400)
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=True)
    assert len(report.runs) == 2 and all(len(f.name) < 255 for f in report.files)


def test_a_disk_that_fills_up_midway_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    from fineprune_cli.engine.records import files

    make_run(tmp_path / "runs", "lenet", "regular", 0, 10.0, [50.0, 60.0])
    write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    before = {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()}
    make_run(tmp_path / "runs", "lenet", "fine", 0, 9.0, [50.0, 61.0], skipped_epochs=(2,))
    real, writes = files.atomic_write_bytes, []

    def full_at_third(path, data):
        writes.append(path.name)
        if len(writes) == 4:  # the write check, two tables, then the disk is full
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full_at_third)
    result = runner.invoke(app, ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"), "--no-plots"])
    assert result.exit_code == 2 and "No space left on device" in result.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()} == before  # nothing half-new


def test_a_full_disk_at_start_leaves_no_empty_run_folder(tmp_path, monkeypatch):
    from fineprune_cli.engine.records import files, record

    def full(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(files, "atomic_write_bytes", full)
    monkeypatch.setattr(record, "atomic_write_text", lambda path, text: full(path, text))
    result = runner.invoke(
        app,
        ["train", *tiny(subset=64, test_subset=32, epochs=1, batch_size=None), "--out", str(tmp_path / "a" / "run")],
    )
    assert result.exit_code == 2 and "No space left on device" in result.output, result.output
    assert not (tmp_path / "a").exists()


def test_the_counts_a_report_divides_by_are_taken_up_to_their_bounds_and_refused_one_past():
    """check_counts at its edges: 1 sample and 1 epoch, 2**40 samples and 10**6 epochs, skipped 0
    and skipped every sample-epoch are all records a run can hold; 0 epochs, 10**6 + 1 epochs and one
    skipped sample more than epochs x num_train are not."""
    base = make("regular", 0, 90.0).summary
    for fields in (
        {"num_train": 1, "epochs": 1, "samples_skipped": 0},
        {"num_train": 2**40, "epochs": 10**6, "samples_skipped": 2**40 * 10**6},
        {"num_train": 1, "epochs": 1, "samples_skipped": 1},
    ):
        check_counts(dataclasses.replace(base, **fields), Path("s.json"))  # no refusal
    for fields, words in (
        ({"epochs": 0}, "num_train and epochs must be positive"),
        ({"epochs": 10**6 + 1}, "num_train and epochs must be positive"),
        ({"num_train": 2**40 + 1}, "num_train and epochs must be positive"),
        ({"num_train": 1, "epochs": 1, "samples_skipped": 2}, "samples_skipped must be between"),
    ):
        with pytest.raises(ConfigError, match=words):
            check_counts(dataclasses.replace(base, **fields), Path("s.json"))


def test_a_row_name_s_arm_is_what_comes_before_its_settings():
    assert arm_of("fine (prune_fraction 0.5)") == "fine" and arm_of("shorter-30 (epochs 7)") == "shorter-30"
    assert arm_of("regular") == "regular"

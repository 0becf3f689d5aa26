"""A complete run's record before a report uses it (issue 31, items 3 and 4): impossible
numbers, a summary that contradicts its metrics.csv, numbers too large for the statistics and
non-numbers where numbers belong are left out under 'Runs left out' with the reason."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from factories import make_run
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.cli import app

runner = CliRunner()


def _pair(root, **edits):
    """Regular and fine of seeds 0 and 1; fine seed 1 carries the test's edits (`summary=`, `rows=`)."""
    for seed in range(2):
        make_run(root, "lenet", "regular", seed, 10.0, [50.0, 60.0 + seed])
        path = make_run(
            root, "lenet", "fine", seed, 9.0, [50.0, 59.0 + seed], skipped_epochs=(2,), **(edits if seed == 1 else {})
        )
    return path


SUMMARY_EDITS = {  # the issue's findings first
    "final 150": ({"final_accuracy": 150.0}, "not a test accuracy"),
    "final -50": ({"final_accuracy": -50.0}, "not a test accuracy"),
    "final 40 points off its metrics": (
        {"final_accuracy": 20.0, "best3_accuracy": 40.0},
        "not the last epoch's test accuracy",
    ),
    "seed -1": ({"seed": -1}, "seed -1"),
    "world_size 0": ({"world_size": 0}, "world_size 0"),
    "overhead above train": ({"overhead_seconds": 20.0}, "not part of train_seconds"),
    "epochs_completed 0": ({"epochs_completed": 0}, "epochs_completed 0"),
    "train_seconds 1e308": ({"train_seconds": 1e308}, "train_seconds 1e+308 is not a duration"),
    "load_average words": ({"load_average": ["high", "low"]}, "load_average"),
    "load_average 1e308": ({"load_average": [1e308]}, "load_average"),
    "best3 off": ({"best3_accuracy": 10.0}, "not the mean of the three best"),
    "samples_seen off": ({"samples_seen": 7}, "samples_seen 7"),
    "pruning_epochs off": ({"pruning_epochs": [1]}, "pruning_epochs"),
    "eval_seconds negative": ({"eval_seconds": -1.0}, "eval_seconds"),
    "seed 2**63": ({"seed": 2**63}, "seed 9223372036854775808"),  # one past run.seed's bound
    "resumed after epoch 1.5": ({"resumed_after_epochs": [1.5]}, "resumed_after_epochs lists other than epochs"),
}


@pytest.mark.parametrize("name", SUMMARY_EDITS)
def test_an_impossible_or_contradicting_summary_is_left_out_with_the_reason(tmp_path, name):
    changes, words = SUMMARY_EDITS[name]
    edited = _pair(tmp_path, summary=changes)
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 3 and [str(p.path) for p in problems] == [str(edited)]
    assert problems[0].status == "implausible" and words in problems[0].reason, problems[0].reason


def test_the_largest_seed_run_seed_takes_is_a_seed(tmp_path):
    """2**63 - 1 is run.seed's own bound: a run of that seed is read (one more is not, above)."""
    _pair(tmp_path, summary={"seed": 2**63 - 1})
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 4 and problems == [] and max(r.seed for r in runs) == 2**63 - 1


@pytest.mark.parametrize(
    "edits",
    [
        {"summary": {"resumed_after_epochs": [0, 2]}},  # stopped before its first epoch ended, and after its last
        {"rows": {2: {"samples": 0}}},  # an epoch that pruned every sample still is an epoch
    ],
)
def test_records_at_the_edges_of_their_meaning_are_read(tmp_path, edits):
    _pair(tmp_path, **edits)
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 4 and problems == []


def test_a_non_number_in_a_metrics_row_is_a_malformed_row(tmp_path):
    edited = _pair(tmp_path, rows={1: {"train_loss": float("nan")}})
    runs, problems = load_runs([tmp_path])
    assert [str(p.path) for p in problems] == [str(edited)] and "has a malformed row" in problems[0].reason


ROW_EDITS = {
    "accuracy 150": (2, {"test_accuracy": 150.0}, "not a test accuracy"),
    "epochs out of order": (2, {"epoch": 5}, "row 2 is epoch 5"),
    "samples beyond the set": (1, {"samples": 10**6}, "samples"),
    "loss 1e308": (1, {"train_loss": 1e308}, "losses"),
    "overhead above its epoch": (1, {"overhead_seconds": 100.0}, "overhead_seconds"),
}


@pytest.mark.parametrize("name", ROW_EDITS)
def test_an_impossible_metrics_row_is_left_out_with_the_reason(tmp_path, name):
    epoch, changes, words = ROW_EDITS[name]
    edited = _pair(tmp_path, rows={epoch: changes})
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 3 and [str(p.path) for p in problems] == [str(edited)]
    assert words in problems[0].reason, problems[0].reason


def test_the_edited_run_never_enters_the_verdict(tmp_path):
    """final 150 entered the paired differences before: fine's mean difference read +45 pt."""
    _pair(tmp_path, summary={"final_accuracy": 150.0})
    report = write_report([tmp_path], tmp_path / "rep", with_plots=False)
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "Runs left out" in index and "final_accuracy 150" in index
    assert sorted(r.summary.final_accuracy for r in report.runs) == [59.0, 60.0, 61.0]


@pytest.mark.parametrize("changes", [{"train_seconds": 1e308}, {"load_average": ["x", {}]}])
def test_report_and_compare_tables_take_huge_and_non_numeric_fields_without_a_traceback(tmp_path, changes):
    """Both crashed before: an overflow in the std, a format of a string as a number."""
    _pair(tmp_path, summary=changes)
    result = runner.invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "rep"), "--no-plots"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "1 left out" in result.output or "left out" in (tmp_path / "rep" / "index.md").read_text()


def test_every_committed_record_passes(tmp_path):
    """The checks hold for what fineprune wrote, in every version whose runs are committed."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "results"
    runs, problems = load_runs([results])
    assert len(runs) >= 100 and problems == []


@pytest.mark.parametrize("num_test, left_out", [(200, True), (400, False), (0, False)])
def test_an_accuracy_off_the_test_sets_grid_is_left_out(tmp_path, num_test, left_out):
    """60.25% is 120.5 of 200 test images: no run measures that (of 400 it is 241; 0: not recorded)."""
    make_run(tmp_path, "lenet", "regular", 0, 9.0, [50.0, 60.5], summary={"num_test": num_test})
    edited = make_run(tmp_path, "lenet", "regular", 1, 9.0, [50.0, 60.25], summary={"num_test": num_test})
    runs, problems = load_runs([tmp_path])
    assert [p.path for p in problems] == ([edited] if left_out else []) and len(runs) == 2 - left_out
    if left_out:
        assert "test_accuracy 60.25 is no whole number of the run's 200 test images" in problems[0].reason


def test_a_num_test_beyond_any_test_set_is_left_out_without_overflow(tmp_path):
    edited = make_run(tmp_path, "lenet", "regular", 0, 9.0, [50.0, 60.0], summary={"num_test": 10**400})
    assert [(p.path, p.status) for p in load_runs([tmp_path])[1]] == [(edited, "implausible")]


LOSSES = {1: {"train_loss": 2.2971}, 2: {"train_loss": 1.8403}}


def test_a_run_copied_under_another_seeds_name_is_left_out_as_a_copy(tmp_path):
    """A folder copied to seed 1 with its seed edited: its losses are seed 0's, epoch for epoch."""
    make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0], rows=LOSSES)
    copy = make_run(tmp_path, "lenet", "regular", 1, 10.0, [50.0, 60.0], rows=LOSSES)
    other = {1: {"train_loss": 2.2975}, 2: {"train_loss": 1.8403}}  # one epoch apart: a run of its own
    make_run(tmp_path, "lenet", "regular", 2, 10.0, [50.0, 60.0], rows=other)
    runs, problems = load_runs([tmp_path])
    assert sorted(r.seed for r in runs) == [0, 2]
    assert [(p.path, p.status) for p in problems] == [(copy, "copy")]
    assert "losses are those of seed 0 in" in problems[0].reason


def test_a_script_run_copied_under_another_seeds_name_is_left_out_as_a_copy(tmp_path):
    """Issue 57: a script run records no test loss (NaN, equal to nothing), so the losses never
    told its copy under another seed's name, which passed as a further seed. Its summary.json
    records the folder it was made in, a comparison's name with seed 0: a copy. A run moved to
    another folder of its own name, or a run made by `train --out` under any name, is no copy."""
    unmeasured = {e: {**LOSSES[e], "test_loss": float("nan")} for e in LOSSES}
    made = {"run_dir": str(tmp_path / "a" / "lenet-folder" / "regular-seed0")}  # as a run records it
    first = make_run(tmp_path / "a", "lenet", "regular", 0, 10.0, [50.0, 60.0], rows=unmeasured, summary=made)
    copy = first.parent / "regular-seed1"
    shutil.copytree(first, copy)
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "seed": 1}))
    moved = tmp_path / "b" / "lenet-folder" / "regular-seed2"
    made = {"run_dir": str(tmp_path / "c" / "lenet-folder" / "regular-seed2")}
    shutil.copytree(make_run(tmp_path / "c", "lenet", "regular", 2, 9.0, [50.0, 61.0], summary=made), moved)
    runs, problems = load_runs([tmp_path / "a", tmp_path / "b"])
    assert sorted(r.seed for r in runs) == [0, 2]
    assert [(p.path, p.status) for p in problems] == [(copy, "copy")]
    assert problems[0].reason.startswith("its summary.json records it was made as regular-seed0 (seed 0): a run")


def test_losses_alike_in_every_epoch_are_no_fingerprint_and_two_arms_of_one_seed_may_match(tmp_path):
    """Hand-made records of constant loss, and fine-pruning before its first pruned epoch, repeat
    another run's losses honestly."""
    make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0])
    make_run(tmp_path, "lenet", "regular", 1, 10.0, [50.0, 60.0])
    make_run(tmp_path, "lenet", "regular", 2, 10.0, [50.0, 60.0], rows=LOSSES)
    make_run(tmp_path, "lenet", "fine", 2, 10.0, [50.0, 60.0], rows=LOSSES)
    runs, problems = load_runs([tmp_path])
    assert len(runs) == 4 and problems == []

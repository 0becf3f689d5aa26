"""Which times compare (machine signatures), machine-independent costs, time-to-accuracy."""

import csv
import json

import pytest

from factories import MACHINE, make_run
from fineprune_cli.analysis.decide.judging import Judging
from fineprune_cli.analysis.group import timing
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.analysis.render.summary import summary_rows
from fineprune_cli.analysis.render.tables import table1, table3
from fineprune_cli.analysis.study import study

OTHER = {**MACHINE, "processor": "Other CPU"}


def _run(tmp_path, accs=(50.0, 70.0, 60.0, 74.0), pruned=(2,), times=(3.0, 2.0, 2.5, 2.0), batch=None):
    make_run(
        tmp_path,
        "lenet",
        "fine",
        0,
        sum(times),
        list(accs),
        skipped_epochs=pruned,
        times=times,
        settings={"train.batch_size": batch} if batch else None,
    )
    return load_runs([tmp_path])[0][0]


@pytest.mark.parametrize(
    "target, epoch, sample_epochs, seconds",
    [
        (65.0, 2, 1.7, 5.0),  # the first epoch at the target, not a later one (epoch 3 falls back)
        (50.0, 1, 1.0, 3.0),  # reached in epoch 1
        (74.0, 4, 3.7, 9.5),  # exactly the target counts as reached
    ],
)
def test_time_to_accuracy_on_a_hand_made_curve(tmp_path, target, epoch, sample_epochs, seconds):
    reached = timing.time_to_accuracy(_run(tmp_path), target, 0.01)  # epoch 2 trains 70 of 100 samples
    assert (reached.epoch, reached.sample_epochs, reached.seconds) == (
        epoch,
        pytest.approx(sample_epochs),
        pytest.approx(seconds),
    )


def test_a_target_never_reached_is_none_and_says_so(tmp_path):
    run = _run(tmp_path)
    assert timing.time_to_accuracy(run, 74.01, 0.01) is None
    # the curve's accuracies (50, 70, 60, 74) are even points, so its grid is 2 pt: 74.01 is 74.0, reached
    write_report([tmp_path], tmp_path / "out", with_plots=False, judging=Judging(target=74.01))
    row = next(csv.DictReader(open(tmp_path / "out" / "runs.csv")))
    assert row["target_epoch"] == "4" and row["target_accuracy"] == "74.0"
    write_report([tmp_path], tmp_path / "out", with_plots=False, judging=Judging(target=75.5))
    row = next(csv.DictReader(open(tmp_path / "out" / "runs.csv")))
    assert row["target_epoch"] == "not reached" and row["target_accuracy"] == "76.0"


def test_the_target_compares_in_whole_test_images(tmp_path):
    """A target that float sums leave at 73.99999999999993 is 74.00 on the grid of 0.01 pt: the epoch
    at exactly 74.00% reaches it (a raw >= would, too; one at 73.34000000000002 would not)."""
    run = _run(tmp_path)
    target = 73.5 + 0.1 + 0.4 - 1e-13 + 2e-14 + 0.00000000000001
    assert target != 74.0 and timing.time_to_accuracy(run, target, 0.01).epoch == 4
    assert timing.time_to_accuracy(run, 74.00000000000002, 0.01).epoch == 4  # a raw >= misses it
    assert timing.on_grid(73.34000000000002, 0.01) == pytest.approx(73.34, abs=1e-12)


def test_runs_made_beside_others_compare_only_within_one_concurrency():
    class R:
        def __init__(self, machine):
            self.summary = type("S", (), {"machine": machine})()

    alone = {"processor": "P", "threads": 1, "torch": "t", "device": "cpu"}
    two = {**alone, "concurrency": 2}
    assert timing.signature(R(two)).endswith(", 2 runs at once")
    assert timing.comparable(R(alone), R(two)) == "different machines"
    assert timing.comparable(R(two), R(dict(two))) is None


def test_optimizer_steps_use_the_runs_batch_size(tmp_path):
    run = _run(tmp_path, batch=40)  # 100, 70, 100, 100 samples in batches of 40: 3 + 2 + 3 + 3
    assert timing.optimizer_steps(run) == 11 and timing.sample_epochs(run) == pytest.approx(3.7)


def test_signatures_old_runs_and_mixed_runs():
    class R:  # the fields signature() reads
        def __init__(self, machine):
            self.summary = type("S", (), {"machine": machine})()

    assert timing.signature(R(MACHINE)) == "Test CPU, 2 threads, torch 2.14.1, cpu"
    assert timing.signature(R({**MACHINE, "threads": 1})) == "Test CPU, 1 thread, torch 2.14.1, cpu"
    assert timing.signature(R({})) == "unknown machine"
    assert timing.signature(R({"mixed": [MACHINE, OTHER]})) == "mixed machines"
    assert timing.comparable(R({}), R({})) == "unknown machine"  # two old runs: still not compared
    assert timing.comparable(R(MACHINE), R(OTHER)) == "different machines"
    assert timing.comparable(R(MACHINE), R(dict(MACHINE))) is None


@pytest.fixture
def two_machines(tmp_path):
    """Seeds 0-1 on one machine, seed 2's fine on another, seed 3 from before signatures."""
    root = tmp_path / "runs"
    plan = [(0, MACHINE, MACHINE, 90.0), (1, MACHINE, MACHINE, 80.0), (2, MACHINE, OTHER, 50.0), (3, None, None, 10.0)]
    for seed, reg_m, fine_m, fine_s in plan:
        make_run(root, "lenet", "regular", seed, 100.0, [60.0, 70.0, 74.0], machine=reg_m)
        make_run(root, "lenet", "fine", seed, fine_s, [60.0, 73.6, 74.0], skipped_epochs=(2,), machine=fine_m)
    return root


def test_a_report_over_two_machines_compares_times_only_within_one(two_machines, tmp_path):
    runs = load_runs([two_machines])[0]
    fine = next(r for r in summary_rows(study(runs)) if r["policy"] == "fine")
    assert fine["saved_pct_mean"] == pytest.approx(15.0) and fine["saved_pairs"] == 2  # 10% and 20%
    table = {r[0]: r[1] for r in table1(study(runs))[1]}
    assert table["fine-pruning: saved (same machine)"] == "15.00 ± 7.07% (2 of 4 pairs)"
    assert table["fine-pruning: sample-epochs trained"] == "2.70 ± 0.00"  # machine-independent: all 4
    write_report([two_machines], tmp_path / "out", with_plots=False)
    index = (tmp_path / "out" / "index.md").read_text()
    assert "Pairs left out of *saved*: different machines (1: fine seed 2); unknown machine (1: fine seed 3)." in index
    assert "- unknown machine: 2 runs: recorded no machine signature" in index
    assert "- Test CPU, 2 threads, torch 2.14.1, cpu: 5 runs; 1-minute load at start 0.5–0.5" in index


def test_time_to_accuracy_seconds_come_from_one_machine_only(two_machines):
    runs = load_runs([two_machines])[0]
    table = {r[0]: r[1] for r in table3(study(runs))[1]}
    # target: regular's final 74 - 0.5 = 73.5, on the runs' grid of 0.2 pt (accuracies such as 73.8):
    # 73.6; fine reaches it in epoch 2, regular in epoch 3
    assert table["Target (test accuracy)"] == "73.60%"
    assert table["Seconds measured on"] == "Test CPU, 2 threads, torch 2.14.1, cpu"
    assert table["Regular: epoch"] == "3.0 ± 0.0" and table["fine-pruning: epoch"] == "2.0 ± 0.0"
    assert table["fine-pruning: sample-epochs"] == "1.70 ± 0.00"
    assert table["fine-pruning: reached"] == "4 of 4 seeds"
    # seconds of fine on Test CPU only (seeds 0 and 1: 2/3 of 90 and 80 s), not seed 2's or 3's
    assert table["fine-pruning: seconds"] == "56.7 ± 4.7 s (2 runs)"
    assert table["Regular: seconds"] == "100.0 ± 0.0 s (3 runs)"


@pytest.mark.slow
def test_every_committed_run_folder_is_grouped_by_machine():
    """Committed folders from before schema 3 are 'unknown machine'; none is mixed."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "results"
    runs = load_runs([results])[0]
    old = [r for r in runs if r.summary.schema < 3 or "schema" not in json.loads((r.path / "summary.json").read_text())]
    assert old and all(timing.signature(r) == timing.UNKNOWN for r in old)
    assert all(timing.signature(r) != timing.MIXED for r in runs)


def test_time_saved_pairs_by_seed_when_the_arms_have_different_seeds(tmp_path):
    """regular has seeds 0 and 1 (100 s, 200 s), fine seeds 1 and 2 (150 s, 50 s): only seed 1 has
    both, 25% saved; paired by position, fine's 150 s would meet regular's 100 s (-50%)."""
    for seed, seconds in ((0, 100.0), (1, 200.0)):
        make_run(tmp_path, "lenet", "regular", seed, seconds, [60.0, 70.0])
    for seed, seconds in ((1, 150.0), (2, 50.0)):
        make_run(tmp_path, "lenet", "fine", seed, seconds, [60.0, 70.0], skipped_epochs=(2,))
    by = {p: {r.seed: r for r in load_runs([tmp_path])[0] if r.policy == p} for p in ("regular", "fine")}
    saved, left = timing.savings(by, "fine")
    assert saved == pytest.approx({1: 25.0}) and left == []


def test_a_target_just_below_a_whole_image_as_a_float_is_not_reached_an_image_early(tmp_path):
    """54.66 / 0.01 is 5465.999... as floats: the target is image 5466 (rounded), so the epoch at
    54.65% (image 5465) does not reach it and the one at 54.66% does (truncating would say epoch 2)."""
    assert 54.66 / 0.01 < 5466
    run = _run(tmp_path, accs=(50.0, 54.65, 54.66, 60.0))
    assert timing.time_to_accuracy(run, 54.66, 0.01).epoch == 3


def test_a_batch_of_one_sample_is_a_batch_size(tmp_path):
    """Batch size 1: one step per sample trained, 100 + 70 + 100 + 100 = 370 (not the default's 12)."""
    assert timing.optimizer_steps(_run(tmp_path, batch=1)) == 370


@pytest.mark.parametrize("batch", ["x", -5])
def test_a_batch_size_that_is_no_size_counts_steps_at_the_default(tmp_path, batch):
    """A config.yaml batch size of text or below 1: steps at the default 128 (one per epoch here)."""
    assert timing.optimizer_steps(_run(tmp_path, batch=batch)) == 4

"""analysis/read/randomequal.py: fine-pruning's random-equal epochs read from run records, in the
decision's chain of index.md (and so of compare's output) and in runs.csv."""

import csv

import pytest

from factories import make_run
from fineprune_cli.analysis.read.randomequal import random_equal_epochs
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report

ACCS = [60.0, 70.0, 75.0, 78.0, 80.0, 81.0]  # 6 epochs


def _six_epochs(root, window=2, seeds=(0, 1)):
    """regular, fine and random over 6 epochs, pruning 2, 4, 6 (as --epochs 6's default schedule)
    with fine's recorded window `window` (None: a record without one)."""
    schedule = {} if window is None else {"window": window}
    for seed in seeds:
        make_run(root, "lenet", "regular", seed, 6.0, [a + seed for a in ACCS])
        for policy, shift in (("fine", -0.5), ("random", -0.4)):
            accs = [a + seed + shift for a in ACCS]
            make_run(root, "lenet", policy, seed, 5.0, accs, skipped_epochs=(2, 4, 6), summary={"schedule": schedule})
    return root


def _report(tmp_path, **kw):
    out = tmp_path / "report"
    write_report([_six_epochs(tmp_path / "runs", **kw)], out, with_plots=False)
    runs = {(r["policy"], r["seed"]): r["random_equal_epochs"] for r in csv.DictReader(open(out / "runs.csv"))}
    return (out / "index.md").read_text(), runs


def test_at_6_epochs_the_report_counts_every_pruning_epoch_as_random_equal(tmp_path):
    # Window 2: epochs 2, 4, 6 each open a window. Catches: the count missing beside fine's decision
    # or in runs.csv, given to the random control, or said as a partial share.
    index, runs = _report(tmp_path)
    line = "**Random-equal in every pruning epoch** (3 of 3: 2, 4, 6)"
    assert index.count(line) == 1 and "its comparison with the random control measures nothing" in index
    chain = index.split("- **fine-pruning**")[1].split("\n\n")[0]
    assert line in chain  # beside fine's decision, not another's
    assert runs == {
        ("fine", "0"): "3",
        ("fine", "1"): "3",
        ("random", "0"): "0",
        ("random", "1"): "0",
        ("regular", "0"): "0",
        ("regular", "1"): "0",
    }


@pytest.mark.parametrize(
    "window, count, line",
    [
        (3, "1", "Random-equal epochs: 1 of its 3 pruning epochs (6) select"),  # 2 and 4 follow counted epochs
        (5, "0", None),  # no pruning epoch opens a window
        (None, "0", None),  # a record without its window: nothing claimed
    ],
)
def test_the_recorded_window_decides_which_epochs_are_random_equal(tmp_path, window, count, line):
    index, runs = _report(tmp_path, window=window)
    assert runs["fine", "0"] == count
    assert (line in index) if line else "Random-equal" not in index


def test_runs_of_one_row_with_other_random_equal_epochs_are_told_apart(tmp_path):
    # A row's runs share their settings; a record edited by hand may not. Catches: the first run's
    # count reported for all of them.
    root = _six_epochs(tmp_path / "runs", seeds=(0,))
    _six_epochs(root / "seed1", window=3, seeds=(1,))
    runs = load_runs([root])[0]
    assert sorted(len(random_equal_epochs(r)) for r in runs if r.policy == "fine") == [1, 3]
    write_report([root], tmp_path / "report", with_plots=False)
    assert "seed 0: 3 of 3; seed 1: 1 of 3 pruning epochs" in (tmp_path / "report" / "index.md").read_text()

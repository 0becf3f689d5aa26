"""A report's per-row numbers (`analysis.group.rownumbers`, `analysis.render.summary`): a row's statistics over its seeds and the
summary.csv cells they become."""

import math

import pytest

from factories import make
from fineprune_cli.analysis.decide.decision import CANT_TELL
from fineprune_cli.analysis.group.rownumbers import Stat, epoch_ratio, pace_saving
from fineprune_cli.analysis.render.summary import csv_cells, summary_rows
from fineprune_cli.analysis.study import study


def test_a_row_of_one_seed_has_a_mean_and_no_spread():
    """One seed: its value, spread 0 (statistics.stdev needs two), printed without '±'; two seeds
    1 and 3: mean 2, sd sqrt(2); none: no mean, printed as '—'."""
    one = Stat([2.5])
    assert (one.mean, one.std, one.fmt(1, " s")) == (2.5, 0.0, "2.5 s")
    two = Stat([1.0, 3.0])
    assert (two.mean, two.std, two.fmt(2)) == (2.0, pytest.approx(math.sqrt(2)), "2.00 ± 1.41")
    assert math.isnan(Stat([]).mean) and Stat([]).fmt() == "—"


def test_summary_csv_rounds_numbers_once_to_four_decimals():
    assert csv_cells({"a": 0.123456, "b": 3, "c": "x", "d": -0.70513}) == [0.1235, 3, "x", -0.7051]


def test_a_run_without_pruned_epochs_has_no_epoch_ratio_and_its_own_pace():
    """An unpruned 10-epoch run of 1.0 s epochs: its pace is its own, nothing saved (1 - 10 / (10 x
    1.0)); a median epoch of exactly 1 s is a time, not 'too short'. With no pruned epoch there is no
    pruned-to-full ratio."""
    run = make("regular", 0, 90.0)
    assert pace_saving(run) == pytest.approx(0.0)
    assert math.isnan(epoch_ratio(run))


def test_summary_rows_compare_policies_with_the_frontier_and_never_the_frontier_with_itself():
    """ucb at 30% beside the random-every-30 arm (3 seeds each): its row carries the interval against
    the frontier over seeds 0-2; the frontier arm's own row (a baseline) has none."""
    runs = [make("regular", s, 90.0 + s / 10) for s in range(3)]
    runs += [make("random", s, 89.0 + s / 5, skipped=300, arm="random-every-30") for s in range(3)]
    runs += [make("ucb", s, 89.5 + s / 4, skipped=300) for s in range(3)]
    rows = {r["policy"]: r for r in summary_rows(study(runs))}
    assert rows["ucb"]["d_frontier_n"] == 3 and rows["ucb"]["d_frontier_seeds"] == "0 1 2"
    assert rows["random-every-30"]["d_frontier_n"] == "" and rows["regular"]["d_frontier_n"] == ""
    # undecided on 3 seeds: summary.csv carries its plan of seeds (the decision's own number)
    [d] = study(runs).decisions
    assert rows["ucb"]["decision"] == d.word == CANT_TELL and rows["ucb"]["family_size"] == 1
    assert rows["ucb"]["seeds_for_80pct"] == (d.advice.seeds or "")  # none at the observed mean, within 50
    assert isinstance(d.advice.low, int) and rows["ucb"]["seeds_for_80pct_low"] == d.advice.low > 3
    assert rows["regular"]["seeds_for_80pct"] == rows["regular"]["decision"] == ""
    # time to accuracy: target regular's mean final 90.1 - 0.5 = 89.6; epoch e reads final - (10 - e)
    # x 0.37: regular reaches it at epoch 9 in every seed (89.63, 89.73, 89.83); ucb (finals 89.5,
    # 89.75, 90.0) never in seed 0, at epoch 10 in seed 1 (89.38 at 9), at epoch 9 in seed 2 (89.63)
    assert rows["ucb"]["tta_target"] == pytest.approx(89.6)
    assert (rows["regular"]["tta_reached"], rows["regular"]["tta_epoch_mean"]) == (3, pytest.approx(9.0))
    ucb = rows["ucb"]
    assert (ucb["tta_reached"], ucb["tta_censored"], ucb["tta_epoch_mean"]) == (2, 1, pytest.approx(9.5))

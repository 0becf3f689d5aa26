import json

import pytest

from fineprune_cli.drivers.estimate import times_from_run
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning.estimate import estimate, from_epochs, timeline
from fineprune_cli.pruning.schedule import PruneSchedule


def test_paper_setup_by_hand():
    est = estimate(PruneSchedule(), epochs=200, prune_fraction=0.3, epoch_seconds=10.0, overhead=0.5)
    assert est.n_prune == 72 and est.n_prune_formula == 45 and not est.formula_agrees
    assert est.t_regular == pytest.approx(2000.0)
    assert est.t_prune == pytest.approx(2000 - 72 * 0.3 * 10 + 72 * 0.5)
    assert est.t_save == pytest.approx(72 * 3 - 36)
    assert est.saving_percent == pytest.approx(100 * 180 / 2000)


def test_without_time_the_unit_is_epochs():
    est = estimate(PruneSchedule(window=10, start=5), epochs=30, prune_fraction=0.5)
    assert est.time_unit == "epochs" and est.t_regular == 30
    assert est.saving_percent == pytest.approx(100 * 0.5 * est.n_prune / 30)


def test_anneal_keeps_a_pruning_epoch_that_falls_on_floor_delta_n():
    # pruning epochs 3, 6, 7, 9, 10, 12 (test_schedule's small case); δ = 0.85, n = 12:
    # floor(10.2) = 10 is itself a pruning epoch and stays. Catches: e < last (drops epoch 10).
    s = PruneSchedule(window=4, start=2, attenuation=2, block=3, count=2)
    est = estimate(s, epochs=12, prune_fraction=0.5, anneal=0.85)
    assert est.pruning_epochs == [3, 6, 7, 9, 10] and est.n_prune == 5
    assert est.saving_percent == pytest.approx(100 * 0.5 * 5 / 12)


def test_timeline_rows_follow_windows():
    rows = timeline(PruneSchedule(window=4, start=2, attenuation=2, block=3, count=2), 12)
    assert [(a, b) for a, b, _ in rows] == [(1, 3), (4, 7), (8, 11), (12, 12)]
    assert "".join(m for _, _, m in rows) == "..#..##.##.#"


def _run_folder(tmp_path, rows, summary):
    header = "epoch,lr,samples,train_seconds,train_loss,test_loss,test_accuracy,pruned,overhead_seconds\n"
    body = "".join(f"{e},0.1,{s},{t},1,1,50,{p},0\n" for e, s, t, p in rows)
    (tmp_path / "metrics.csv").write_text(header + body)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def test_times_from_run_skip_warmup_and_charge_overhead_to_pruning_epochs(tmp_path):
    run = _run_folder(
        tmp_path,
        [(1, 100, 9.0, 0), (2, 100, 2.0, 0), (3, 70, 1.4, 1), (4, 100, 4.0, 0)],
        {
            "model": "lenet",
            "dataset": "synthetic",
            "epochs": 4,
            "seed": 0,
            "pruning_epochs": [3],
            "overhead_seconds": 0.3,
            "num_train": 100,
        },
    )
    epoch_s, overhead = times_from_run(run)
    assert epoch_s == pytest.approx(3.0)  # mean of epochs 2 and 4
    assert overhead == pytest.approx(0.3)


def test_times_from_run_errors(tmp_path):
    with pytest.raises(ConfigError, match="summary.json|metrics.csv"):
        times_from_run(tmp_path)


def test_a_prune_fraction_of_zero_has_no_pruning_epoch():
    """The schedule prunes epochs (window 5, start 3, block 1), but m = 0 leaves nothing out: no
    pruning epoch, no saving, and no overhead charged to one."""
    est = estimate(PruneSchedule(window=5, start=3, block=1, count=1), 10, 0.0, epoch_seconds=10.0, overhead=1.0)
    assert est.pruning_epochs == [] and est.n_prune == 0 and est.t_save == 0.0
    assert estimate(PruneSchedule(window=5, start=3, block=1, count=1), 10, 0.5).pruning_epochs == [
        3,
        4,
        6,
        7,
        8,
        9,
        10,
    ]


def test_measured_pruning_epochs_are_charged_no_overhead_unless_given():
    # A run's own pruning epochs 2 and 3 of 4, half left out: t_prune = 2 + 2 x 0.5 = 3 epochs,
    # saving 1 of 4 = 25%; a default overhead of 0.1 per pruning epoch would make it 3.2.
    est = from_epochs([2, 3], 4, 0.5)
    assert est.t_prune == 3.0 and est.saving_percent == 25.0 and est.overhead_per_pruning_epoch == 0.0


def test_a_damaged_run_gives_one_line_not_a_negative_estimate(tmp_path):
    """A run whose metrics.csv holds a negative epoch time (hand-edited, or torn): d26b633 printed
    a negative saving from it; the report's record checks now refuse it, naming the file."""
    run = _run_folder(
        tmp_path,
        [(1, 100, 9.0, 0), (2, 100, -2.0, 0), (3, 70, 1.4, 1)],
        {"model": "lenet", "dataset": "synthetic", "epochs": 3, "seed": 0, "num_train": 100, "status": "interrupted"},
    )
    with pytest.raises(ConfigError, match="metrics.csv: epoch 2's train_seconds"):
        times_from_run(run)

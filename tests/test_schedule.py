import dataclasses
import re

import pytest

from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning.schedule import PruneSchedule, counts_empty, formula_n_prune, last_pruning_epoch


def test_default_schedule_prunes_about_a_third_of_200_epochs():
    s = PruneSchedule()
    assert [s.starting_point(k) for k in range(4)] == [30, 15, 7, 3]
    epochs = s.pruning_epochs(200)
    assert len(epochs) == 72
    assert epochs[:3] == [30, 32, 34] and epochs[-1] == 200
    assert [e for e in epochs if 60 <= e < 120][0] == 76  # a_1 = 15: p >= 15, even epochs


def test_small_case_by_hand():
    # w=4, a=2,1,0,0 ; prune iff p >= a_k and e % 3 < 2 (worked out in the comment below)
    # e: 1 p1<2 | 2 e%3=2 | 3 yes | 4 p0<1 | 5 e%3=2 | 6 yes | 7 yes | 8 e%3=2 | 9 yes | 10 yes | 11 no | 12 yes
    s = PruneSchedule(window=4, start=2, attenuation=2, block=3, count=2)
    assert s.pruning_epochs(12) == [3, 6, 7, 9, 10, 12]


def test_the_last_pruning_epoch_itself_still_prunes():
    # --anneal's last pruning epoch 9 (epochs <= 9 may prune) cuts the case above after 9.
    # Catches `epoch >= last` for `epoch > last` (9 lost), or the bound ignored (10, 12 kept).
    s = PruneSchedule(window=4, start=2, attenuation=2, block=3, count=2)
    assert s.pruning_epochs(12, last=9) == [3, 6, 7, 9] and s.pruning_epochs(12, last=None)[-1] == 12
    assert s.prunes(9, last=9) and not s.prunes(10, last=9) and s.prunes(10)


def test_attenuation_once_per_window_not_per_epoch():
    s = PruneSchedule(window=10, start=8, attenuation=2, block=1, count=1)
    assert [s.starting_point(k) for k in range(5)] == [8, 4, 2, 1, 0]
    # window 1 (epochs 10..19) starts pruning at p = 4, whatever the epoch inside the window
    assert [e for e in s.pruning_epochs(20) if e >= 10] == [14, 15, 16, 17, 18, 19]


def test_fractional_attenuation():
    s = PruneSchedule(window=60, start=30, attenuation=1.5, block=1, count=1)
    assert [s.starting_point(k) for k in range(4)] == [30, 20, 13, 8]


def test_resets_and_window_ends():
    s = PruneSchedule(window=5, start=1)
    assert [e for e in range(1, 16) if s.resets(e)] == [5, 10, 15]
    assert [e for e in range(1, 13) if s.window_ends(e, 12)] == [4, 9, 12]


def test_block_count_equal_prunes_every_epoch_after_start():
    s = PruneSchedule(window=3, start=0, attenuation=1, block=1, count=1)
    assert s.pruning_epochs(7) == list(range(1, 8))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"window": 0}, "--window must be >= 1, got 0"),
        ({"start": 60}, "--start must be in [0, window=60), got 60"),
        ({"start": -1}, "--start must be in [0, window=60), got -1"),
        ({"block": 0}, "--block must be >= 1, got 0"),
        ({"count": 0}, "--count must be in [1, block=2], got 0"),
        ({"count": 3, "block": 2}, "--count must be in [1, block=2], got 3"),
        ({"attenuation": 0.5}, "--attenuation must be >= 1, got 0.5"),
    ],
)
def test_invalid_schedules(kwargs, words):
    # The whole message: window 0 also breaks `start < window` and block 0 `count <= block`, so
    # a message that only names the field would pass when the window (block) check itself is
    # off by one and the start (count) check answers in its place.
    with pytest.raises(ConfigError, match=re.escape(words)):
        PruneSchedule(**kwargs)


def test_the_smallest_valid_schedule_is_accepted():
    # Each bound at its edge: window 1, start 0 = window - 1, block 1, count = block, attenuation 1.
    s = PruneSchedule(window=1, start=0, attenuation=1.0, block=1, count=1)
    assert s.pruning_epochs(3) == [1, 2, 3]
    assert PruneSchedule(window=5, start=4, block=3, count=3).prunes(4)


def test_formula_as_printed():
    assert formula_n_prune(200, 60, 30, 2, 1) == 45  # tail 200 mod 60 = 20 < a: taken as 0
    assert formula_n_prune(120, 60, 30, 4, 1) == 18  # (7*1 + 2) * 2: the remainder counts whole
    assert formula_n_prune(130, 60, 6, 4, 1) == (13 + 2) * 2 + 1 + 0


def test_formula_matches_schedule_without_attenuation_on_aligned_blocks():
    s = PruneSchedule(window=60, start=30, attenuation=1, block=2, count=1)
    assert len(s.pruning_epochs(120)) == formula_n_prune(120, 60, 30, 2, 1) == 30


def test_long_runs_cost_linear_time_even_with_attenuation_near_one():
    """starting_point was recomputed from a_0 at every epoch: an attenuation just above 1 lowers
    a by one per window, which made 100,000 epochs quadratic. Count the divisions instead."""
    s = PruneSchedule(window=2, start=1, attenuation=1.0000001)
    assert [s.starting_point(k) for k in (0, 1, 5000)] == [1, 0, 0]
    slow = PruneSchedule(window=1000, start=999, attenuation=1.0000001)
    assert [slow.starting_point(k) for k in (0, 1, 2, 998, 999, 10**6)] == [999, 998, 997, 1, 0, 0]
    assert len(slow.pruning_epochs(100_000)) > 0
    calls = []

    class Counting(float):
        def __rtruediv__(self, other):
            calls.append(other)
            return other / float(self)

    counted = PruneSchedule(window=1000, start=999, attenuation=Counting(1.0000001))
    counted.pruning_epochs(100_000)
    assert len(calls) <= 999  # each a_k once, not once per epoch


def test_the_last_annealing_epoch_is_floor_delta_n_also_where_delta_n_is_not_exact():
    # 0.29 x 100 is 28.999... in floating point, yet δ·n = 29: epoch 29 still prunes;
    # 0.875 x 10 = 8.75 and 0.35 x 10 = 3.5 round down. Catches: floor without the tolerance
    # (28), round (9; 4) and ceil (9; 4).
    assert last_pruning_epoch(0.29, 100) == 29
    assert last_pruning_epoch(0.875, 10) == 8
    assert last_pruning_epoch(0.35, 10) == 3
    assert last_pruning_epoch(1.0, 10) is None and last_pruning_epoch(None, 10) is None


# --- the paper's defaults as shares of the run's length ------------------------------------

from fineprune_cli.pruning.schedule import paper_start, paper_window, percent_of  # noqa: E402


@pytest.mark.parametrize(
    "epochs, window, start",
    [
        (200, 60, 30),  # the paper's values exactly
        (30, 9, 5),  # 4.5 rounds half up to 5 (Python's round() would give 4)
        (10, 3, 2),  # 1.5 -> 2
        (23, 7, 3),  # 6.9 -> 7, 3.45 -> 3
        (4, 1, 0),  # 15% of 4 rounds to 1, kept below the one-epoch window
        (1, 1, 0),
    ],
)
def test_the_paper_schedule_is_a_share_of_the_run(epochs, window, start):
    w = paper_window(epochs)
    assert (w, paper_start(epochs, w)) == (window, start)
    assert PruneSchedule.paper(epochs) == PruneSchedule(window, start)


def test_a_share_of_the_run_rounds_half_up_exactly():
    # In integers: 0.49 of an epoch rounds down, 0.5 up (1% of 49 epochs, 1% of 50). The shares in
    # use (15, 30, 60, 80%) never fall on x.49, so only a direct case shows `+ 51` for `+ 50`.
    assert [percent_of(49, 1), percent_of(50, 1), percent_of(149, 1), percent_of(150, 1)] == [0, 1, 1, 2]


def test_a_scaled_schedule_prunes_a_proportionate_share():
    """10 epochs, window 3 start 2: windows 0..3 start at a = 2, 1, 0, 0 and block 2 keeps the
    even epochs, so 2, 4, 6, 8, 10 prune (hand-computed)."""
    assert PruneSchedule.paper(10).pruning_epochs(10) == [2, 4, 6, 8, 10]
    assert PruneSchedule.paper(30).pruning_epochs(30) == [6, 8, 12, 14, 16, 20, 22, 24, 26, 28, 30]


@pytest.mark.parametrize(
    "schedule, first",
    [
        (PruneSchedule(60, 30), 30),
        (PruneSchedule(60, 31), 32),  # odd position: the next even epoch
        (PruneSchedule(10, 9, attenuation=1.0), None),  # position 9: epochs 9, 19, 29 ... all odd
        (PruneSchedule(10, 9), 14),  # window 1 starts at a_1 = 4: epoch 14
        (PruneSchedule(3, 2, block=1), 2),
        (PruneSchedule(3, 0, block=1), 1),  # start 0: epoch 1, never "epoch 0" (which p = 0 would allow)
    ],
)
def test_first_pruning_epoch(schedule, first):
    assert schedule.first_pruning_epoch() == first
    assert schedule.pruning_epochs(first or 1000) == ([first] if first else [])


def test_a_schedule_cannot_be_changed_once_made():
    # Its starting points a_k are computed once and cached on the object: a schedule that could
    # be changed afterwards would keep the old a_k (start 8's [8, 4, 2, 1, 0] for start 2).
    s = PruneSchedule(window=10, start=8)
    assert s.starting_point(1) == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.start = 2  # type: ignore[misc]


def test_counts_are_empty_at_a_windows_first_epoch_and_at_the_runs_first():
    # Window 5: Algorithm 1 clears the counts at the start of epochs 5, 10, 15; epoch 1 has seen
    # nothing. Catches: epoch 1 left out, the epoch after a reset (6: it holds epoch 5's counts) or
    # a window's last epoch (4, 9) counted, the reset taken as the end of e mod w == 0.
    assert [e for e in range(1, 16) if counts_empty(e, 5)] == [1, 5, 10, 15]
    assert all(counts_empty(e, 1) for e in range(1, 8))  # window 1: every epoch opens one

"""Arm names (`fineprune_cli.arms`): what compare writes, report reads back as the same share."""

import pytest

from fineprune_cli.arms import frontier_arm, frontier_fraction, shorter_arm, shorter_budget, shorter_schedule
from fineprune_cli.errors import ConfigError


@pytest.mark.parametrize("share", [0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.95])
def test_a_share_written_into_an_arm_name_reads_back(share):
    assert frontier_fraction(frontier_arm(share)) == pytest.approx(share)
    assert shorter_budget(shorter_arm(share)) == pytest.approx(share)


def test_names_round_to_whole_percent_and_each_prefix_parses_only_its_own():
    assert (frontier_arm(0.2), shorter_arm(1 / 3)) == ("random-every-20", "shorter-33")
    assert shorter_budget("random-every-20") is None and frontier_fraction("shorter-30") is None
    assert frontier_fraction("random") is None and shorter_budget("regular") is None
    assert frontier_fraction("random-every-x") is None and shorter_budget("shorter-") is None


def test_a_shorter_schedule_rounds_half_up_and_drops_milestones_at_its_end():
    """Each count x (1 - budget), rounded half up: 200 at 0.3 is 140, milestones 60/120/160 are
    42/84/112, warm-up 2.0 scaled exactly (1.4). 5 epochs at 0.5 are 2.5: 3 (round() would give 2).
    1 epoch at 0.9 is 0.1: still 1 epoch. A milestone that lands on the last epoch (10 at 0.3: 7 of
    7) or after it is left out; 2 epochs at 0.5 keep none of 1, 2 (both land on epoch 1 of 1)."""
    assert shorter_schedule(200, [60, 120, 160], 2.0, 0.3) == (140, [42, 84, 112], pytest.approx(1.4))
    assert shorter_schedule(5, [], 1.0, 0.5) == (3, [], 0.5)
    assert shorter_schedule(1, [], 1.0, 0.9)[0] == 1
    assert shorter_schedule(10, [5, 10], 1.0, 0.3) == (7, [4], pytest.approx(0.7))
    assert shorter_schedule(10, [2], 1.0, 0.5) == (5, [1], 0.5)  # a milestone at epoch 1 is allowed
    assert shorter_schedule(2, [1, 2], 1.0, 0.5) == (1, [], 0.5)


@pytest.mark.parametrize(
    "milestones, budget, scaled",
    [([1, 2], 0.5, "1,1"), ([1, 2, 5], 0.5, "1,1,3"), ([1], 0.6, "0"), ([1, 5], 0.6, "0,2")],  # two meet; one before 1
)
def test_a_shorter_schedule_whose_milestones_collapse_is_refused(milestones, budget, scaled):
    with pytest.raises(ConfigError, match=f"give {scaled}, which is not strictly increasing"):
        shorter_schedule(10, milestones, 1.0, budget)

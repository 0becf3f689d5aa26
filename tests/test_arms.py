"""Arm names (`fineprune_cli.arms`): what compare writes, report reads back as the same share."""

import pytest

from fineprune_cli.arms import frontier_arm, frontier_fraction, shorter_arm, shorter_budget


@pytest.mark.parametrize("share", [0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.95])
def test_a_share_written_into_an_arm_name_reads_back(share):
    assert frontier_fraction(frontier_arm(share)) == pytest.approx(share)
    assert shorter_budget(shorter_arm(share)) == pytest.approx(share)


def test_names_round_to_whole_percent_and_each_prefix_parses_only_its_own():
    assert (frontier_arm(0.2), shorter_arm(1 / 3)) == ("random-every-20", "shorter-33")
    assert shorter_budget("random-every-20") is None and frontier_fraction("shorter-30") is None
    assert frontier_fraction("random") is None and shorter_budget("regular") is None
    assert frontier_fraction("random-every-x") is None and shorter_budget("shorter-") is None

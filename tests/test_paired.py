"""Per-seed differences (`analysis.paired`): always of runs of the same seed, whatever seeds each
arm has, and a variant's random control is the control of that variant."""

import pytest

from fineprune_cli.analysis import paired
from fineprune_cli.analysis.groups import is_frontier
from factories import make


def arm(policy, finals, skipped=0, name=""):
    """seed -> run of an arm, each seed's final accuracy given."""
    return {s: make(policy, s, f, skipped=skipped, arm=name) for s, f in finals.items()}


def uneven():
    """Arms with different seed sets: sorted by position, ucb's seeds 1, 2, 3 would meet regular's
    0, 1, 2 (differences 11, 11.5, -30); by seed only 1 and 2 meet (1.0 and 1.5)."""
    return {
        "regular": arm("regular", {0: 70.0, 1: 80.0, 2: 90.0}),
        "random-every-30": arm("random", {0: 69.0, 1: 79.0, 3: 59.5}, skipped=300, name="random-every-30"),
        "ucb": arm("ucb", {1: 81.0, 2: 91.5, 3: 60.0}, skipped=300),
    }


def test_differences_against_regular_pair_by_seed_not_by_position():
    found = paired.vs_regular(uneven(), "ucb")
    assert found.diffs == pytest.approx({1: 1.0, 2: 1.5})
    assert found.left_out == {0: "no run of this arm", 3: "no run of regular"}


def test_a_line_is_read_in_the_same_seed_and_a_seed_either_side_lacks_is_left_out():
    """ucb and the frontier arm at its 30% budget share seeds 1 and 3 only."""
    found = paired.vs_line(uneven(), "ucb", is_frontier)
    assert found.arms == ("random-every-30",)
    assert found.diffs == pytest.approx({1: 2.0, 3: 0.5})
    assert found.left_out == {0: "no run of this arm", 2: "no run of random-every-30"}


def test_the_random_control_pairs_by_seed():
    by = {
        "regular": arm("regular", {0: 70.0, 1: 80.0, 2: 90.0}),
        "fine": arm("fine", {1: 80.5, 2: 90.0}, skipped=300),
        "random": arm("random", {0: 69.0, 2: 89.0}, skipped=300),
    }
    found = paired.vs_control(by, "fine")
    assert found.diffs == pytest.approx({2: 1.0})
    assert found.left_out == {0: "no run of this arm", 1: "no run of random"}


def test_a_variant_meets_the_random_control_of_its_own_variant_never_the_plain_one():
    """fine at prune_fraction 0.5 against random at 0.5 (+1 pt), not against plain random (+15 pt);
    without its own control it has none."""
    seeds = range(3)
    by = {
        "regular": arm("regular", dict.fromkeys(seeds, 80.0)),
        "fine": arm("fine", dict.fromkeys(seeds, 80.0), skipped=300),
        "random": arm("random", dict.fromkeys(seeds, 70.0), skipped=300),
        "fine (prune_fraction 0.5)": arm("fine", dict.fromkeys(seeds, 85.0), skipped=500),
        "random (prune_fraction 0.5)": arm("random", dict.fromkeys(seeds, 84.0), skipped=500),
    }
    found = paired.vs_control(by, "fine (prune_fraction 0.5)")
    assert found.arms == ("random (prune_fraction 0.5)",) and found.diffs == pytest.approx(dict.fromkeys(seeds, 1.0))
    assert paired.vs_control(by, "fine").diffs == pytest.approx(dict.fromkeys(seeds, 10.0))
    del by["random (prune_fraction 0.5)"]
    assert paired.vs_control(by, "fine (prune_fraction 0.5)") is None


def line_at(budgets, policy_skipped):
    """Regular at 80; frontier arms at the given skipped counts (of 1,000 sample-epochs: 10 a
    percent), each at 80 - its percent / 10; ucb at `policy_skipped`, at 80."""
    seeds = range(3)
    by = {
        "regular": arm("regular", dict.fromkeys(seeds, 80.0)),
        "ucb": arm("ucb", dict.fromkeys(seeds, 80.0), skipped=policy_skipped),
    }
    for k in budgets:
        name = f"random-every-{k // 10}"
        by[name] = arm("random", dict.fromkeys(seeds, 80.0 - k / 100), skipped=k, name=name)
    return by


def test_a_line_is_read_through_the_nearest_arms_on_either_side():
    """Arms at 10, 20, 40 and 50% around ucb's 30%: read between 20 and 40 (78.0 there), not 10 and 50."""
    found = paired.vs_line(line_at([100, 200, 400, 500], 300), "ucb", is_frontier)
    assert found.arms == ("random-every-20", "random-every-40")
    assert found.diffs == pytest.approx(dict.fromkeys(range(3), 3.0))


def test_an_arm_a_tenth_of_a_point_away_is_not_at_the_budget():
    """An arm at 29.9% is 0.1 pt from ucb's 30%, beyond SAME_BUDGET (0.05): the line is read between it
    and the arm at 40%, interpolated (its norm above 1), not taken from the 29.9% arm alone."""
    found = paired.vs_line(line_at([299, 400], 300), "ucb", is_frontier)
    assert found.arms == ("random-every-29", "random-every-40")
    assert all(n > 1.0 for n in found.norms.values())

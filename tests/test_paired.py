"""Per-seed differences (`analysis.group.paired`): always of runs of the same seed, whatever seeds each
arm has, and a variant's random control is the control of that variant."""

import pytest

from factories import make
from fineprune_cli.analysis.group import paired
from fineprune_cli.analysis.group.groups import is_frontier


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
    assert found.diffs == pytest.approx({2: 1.0}) and found.norms == {2: 2.0}  # two runs, coefficients +-1
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


def test_which_rows_are_baselines():
    """Regular, the random control (any variant of it) and the two frontiers' arms are what others
    are judged against; a policy, or a variant of one, is not."""
    for row in ("regular", "random", "random (prune_fraction 0.5)", "random-every-20", "shorter-30"):
        assert paired.is_baseline(row), row
    for row in ("fine", "ucb", "fine (prune_fraction 0.5)", "kakurenbo"):
        assert not paired.is_baseline(row), row


def test_a_budget_is_the_share_of_regulars_sample_epochs_not_trained():
    """Of regular's 10 epochs x 100 samples: a policy that skipped 300 left out 30%; a shorter arm of
    7 epochs left out 300 by training less (30%). Without a regular run to measure against, a
    shorter arm's name says its budget (shorter-30: 30%) and any other run counts its own skipped share."""
    short = make("regular", 0, 80.0, epochs=7, arm="shorter-30")
    by = {"regular": arm("regular", {0: 80.0}), "ucb": arm("ucb", {0: 80.0}, skipped=300), "shorter-30": {0: short}}
    assert paired.budget(by, by["ucb"][0]) == pytest.approx(30.0)
    assert paired.budget(by, short) == pytest.approx(30.0)
    alone = {"shorter-30": {0: short}, "ucb": arm("ucb", {0: 80.0}, skipped=250)}
    assert paired.budget(alone, short) == pytest.approx(30.0)
    assert paired.budget(alone, alone["ucb"][0]) == pytest.approx(25.0)


def test_a_plain_difference_has_norm_two():
    """regular and the policy each enter with coefficient 1: 1 + 1 = 2 per seed."""
    found = paired.vs_regular(uneven(), "ucb")
    assert found.norms == {1: 2.0, 2: 2.0} and found.norm_values() == [2.0, 2.0]


def test_a_seed_that_lacks_one_of_the_two_bracketing_arms_is_left_out():
    """ucb at 30% is read between the 20% and 40% arms; seed 1 has no 40% run: it is left out, not
    read off the 20% arm alone (nor off other arms)."""
    by = line_at([200, 400], 300)
    del by["random-every-40"][1]
    found = paired.vs_line(by, "ucb", is_frontier)
    assert found.arms == ("random-every-20", "random-every-40")
    assert found.diffs == pytest.approx({0: 3.0, 2: 3.0}) and found.left_out == {1: "no run of random-every-40"}


def test_no_line_or_no_policy_runs_is_no_comparison_not_a_miss():
    """Without frontier arms there is no line to miss; a policy without runs has no budget to read at."""
    by = line_at([], 300)
    assert paired.vs_line(by, "ucb", is_frontier) is None
    assert paired.vs_line(line_at([200, 400], 300), "egreedy", is_frontier) is None


def test_of_two_arms_at_the_budget_the_nearer_one_is_read():
    """100-epoch runs (a budget step of 0.01%): ucb at 30.00%, frontier arms at 29.96% (76.0) and
    30.02% (77.0), both within SAME_BUDGET of it: the line is the 30.02% arm alone, 80 - 77 = 3.0."""

    def runs(policy, final, skipped, name=""):
        return {s: make(policy, s, final, epochs=100, skipped=skipped, arm=name) for s in range(2)}

    by = {
        "regular": runs("regular", 80.0, 0),
        "ucb": runs("ucb", 80.0, 3000),
        "random-every-29": runs("random", 76.0, 2996, "random-every-29"),
        "random-every-30": runs("random", 77.0, 3002, "random-every-30"),
    }
    found = paired.vs_line(by, "ucb", is_frontier)
    assert found.arms == ("random-every-30",) and found.diffs == pytest.approx({0: 3.0, 1: 3.0})


def test_a_line_on_one_side_only_is_a_miss_that_names_its_arms():
    """Frontier arms at 10% and 20% only, ucb at 30%: the line exists but does not reach it."""
    found = paired.vs_line(line_at([100, 200], 300), "ucb", is_frontier)
    assert isinstance(found, paired.Miss) and found.against == paired.RANDOM_LINE
    assert found.reason == "its arms are at 10.0%, 20.0%, none at or beyond 30.0% on both sides"


def test_a_seed_beyond_the_bracketing_arms_reads_the_nearer_arm_not_an_extrapolation():
    """ucb skipped 25%, 45% and 10% in seeds 0-2 (mean 26.7%: the 20% and 40% arms bracket it, at
    78.0 and 76.0). Seed 0 reads 78 - 0.25 x 2 = 77.5 (norm 0.75^2 + 0.25^2 = 0.625, +1 for ucb);
    seed 1 at 45% reads the 40% arm, 76.0 (extrapolated it would be 75.5); seed 2 at 10% reads the
    20% arm, 78.0 (not 79.0)."""
    by = line_at([200, 400], 300)
    by["ucb"] = {s: make("ucb", s, 80.0, skipped=k) for s, k in enumerate((250, 450, 100))}
    found = paired.vs_line(by, "ucb", is_frontier)
    assert found.arms == ("random-every-20", "random-every-40")
    assert found.diffs == pytest.approx({0: 2.5, 1: 4.0, 2: 2.0})
    assert found.norms == pytest.approx({0: 1.625, 1: 2.0, 2: 2.0})


def test_a_seed_where_both_bracketing_arms_sit_at_one_budget_reads_the_lower_arm():
    """Arms whose budgets vary by seed: A at 20% and 30% in seeds 0 and 1 (mean 25%, 78.0), B at 40%
    and 30% (mean 35%, 76.0); ucb at 30% lies between them. Seed 0 reads halfway, 77.0 (diff 3.0,
    norm 1 + 0.25 + 0.25); in seed 1 both arms are at 30%, so no interpolation is possible: the lower
    arm's value is read (A: 78.0, diff 2.0), weight 0, norm 1 + 1."""
    regular = arm("regular", {0: 80.0, 1: 80.0})
    by = {
        "regular": regular,
        "ucb": arm("ucb", {0: 80.0, 1: 80.0}, skipped=300),
        "random-every-25": {
            s: make("random", s, 78.0, skipped=k, arm="random-every-25") for s, k in ((0, 200), (1, 300))
        },
        "random-every-35": {
            s: make("random", s, 76.0, skipped=k, arm="random-every-35") for s, k in ((0, 400), (1, 300))
        },
    }
    found = paired.vs_line(by, "ucb", is_frontier)
    assert found.arms == ("random-every-25", "random-every-35")
    assert found.diffs == pytest.approx({0: 3.0, 1: 2.0}) and found.norms == pytest.approx({0: 1.5, 1: 2.0})


def test_the_controls_a_policy_meets_are_those_with_a_seed_in_common():
    """fine (seeds 0, 1) against: the random control (seed 2 only: no seed in common, left out), the
    random frontier (10% and 20% arms, fine at 30%: a Miss, left out), no shorter line (None)."""
    by = line_at([100, 200], 300)
    by["fine"] = arm("fine", {0: 80.0, 1: 80.0}, skipped=300)
    by["random"] = arm("random", {2: 79.0}, skipped=300)
    assert paired.vs_controls(by, "fine") == []
    by["random"] = arm("random", {1: 79.0}, skipped=300)
    assert [p.against for p in paired.vs_controls(by, "fine")] == [paired.THE_CONTROL]

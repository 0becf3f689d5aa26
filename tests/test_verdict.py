"""The verdict's sentences: words from paired intervals, the margin, the one-seed case, the
time ranking among equivalent arms only, and random at a policy's own budget."""

import json

import pytest

from fineprune_cli.analysis.report import write_report
from fineprune_cli.analysis.runs import load_runs
from fineprune_cli.analysis import paired
from fineprune_cli.analysis.tables import Judging, group
from fineprune_cli.analysis.verdict import verdict
from test_report import make_run


def arm(root, policy, seed, final, train_s=100.0, skipped=0, machine="default", arm_name=None):
    """A 2-epoch run with final accuracy `final` and `skipped` of its 200 sample-epochs left out."""
    extra = {} if machine == "default" else {"machine": machine}
    path = make_run(root, "lenet", arm_name or policy, seed, train_s, [60.0, final],
                    skipped_epochs=(1, 2) if skipped else (), **extra)
    s = json.loads((path / "summary.json").read_text())
    s.update(policy=policy, arm=arm_name or "", samples_skipped=skipped)
    (path / "summary.json").write_text(json.dumps(s))
    lines = (path / "metrics.csv").read_text().splitlines()   # samples column: half the skip each epoch
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[2] = str(100 - skipped // 2)
    (path / "metrics.csv").write_text("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n")
    return path


def lines_for(root, **judging):
    return verdict(load_runs([root])[0], Judging(**judging))


def test_a_gap_wider_than_regulars_std_with_an_interval_over_zero_is_unresolved(tmp_path):
    """Today's verdict called this 'no policy stays within one std' and judged by means: regular's
    std is 0.10 pt, fine's mean change -0.30 pt, but its paired interval [-1.85, +1.25] holds 0."""
    for seed, (reg, fine, rand) in enumerate([(74.0, 73.2, 74.3), (74.2, 74.6, 73.9), (74.1, 73.6, 74.6)]):
        arm(tmp_path, "regular", seed, reg)
        arm(tmp_path, "fine", seed, fine, train_s=90.0, skipped=20)
        arm(tmp_path, "random", seed, rand, train_s=90.0, skipped=20)
    write_report([tmp_path], tmp_path / "out", with_plots=False)
    index = (tmp_path / "out" / "index.md").read_text()
    fine = next(l for l in index.splitlines() if l.startswith("  - fine-pruning"))
    assert "-0.30 [-1.85, +1.25] pt, unresolved against regular" in fine
    assert "better" not in fine and "worse" not in fine and "equivalent" not in fine
    control = index.splitlines()[index.splitlines().index(fine) + 1]
    assert control.startswith("    Against the random control at the same budget: -0.47 [")
    assert "unresolved against random" in control
    assert "No arm is shown equivalent to regular within ±0.3 pt" in index


@pytest.mark.parametrize("diffs, phrase, others", [
    ((1.0, 1.2, 0.9), "better than regular", ("worse", "equivalent", "unresolved")),
    ((-1.0, -1.2, -0.9), "worse than regular", ("better", "equivalent", "unresolved", "margin")),
    ((0.05, -0.05, 0.0), "equivalent to regular within ±0.3 pt", ("better", "worse", "unresolved")),
    ((0.5, -0.5, 0.1), "unresolved against regular", ("better", "worse", "equivalent")),
    ((-0.1, -0.15, -0.12), "worse than regular, by less than the ±0.3 pt margin", ("better", "unresolved")),
])
def test_each_verdict_word_from_a_constructed_case(tmp_path, diffs, phrase, others):
    for seed, d in enumerate(diffs):
        arm(tmp_path, "regular", seed, 80.0 + seed)
        arm(tmp_path, "ucb", seed, 80.0 + seed + d, skipped=60)
    line = next(l for l in lines_for(tmp_path) if l.startswith("  - UCB"))
    assert phrase in line and not any(w in line for w in others), line


def test_unresolved_says_how_many_seeds_would_resolve_it_and_the_noise_floor(tmp_path):
    # diffs 0.3, -0.3, 0: mean 0, paired std 0.3 -> 7 seeds resolve ±0.3 (see test_stats)
    for seed, d in enumerate((0.3, -0.3, 0.0)):
        arm(tmp_path, "regular", seed, 80.0 + 0.2 * seed)
        arm(tmp_path, "ucb", seed, 80.0 + 0.2 * seed + d, skipped=60)
    lines = lines_for(tmp_path)
    assert "regular's seed-to-seed std 0.20 pt" in lines[0] and "margin ±0.3 pt" in lines[0]
    ucb = next(l for l in lines if l.startswith("  - UCB"))
    assert "(paired std 0.30 pt; about 7 seeds would resolve it at this spread)" in ucb
    # a wider margin makes the same interval an equivalence: 4.303 * 0.3 / sqrt(3) = 0.745
    wide = next(l for l in lines_for(tmp_path, margin=0.8) if l.startswith("  - UCB"))
    assert "equivalent to regular within ±0.8 pt" in wide


def test_one_seed_claims_nothing_about_accuracy(tmp_path):
    """`make demo`'s case: one seed read 'no policy stays within one std of regular (0.00 pt)'
    and called a 0.02 pt gap 'better'."""
    arm(tmp_path, "regular", 0, 91.10)
    arm(tmp_path, "fine", 0, 91.12, skipped=20)
    arm(tmp_path, "random", 0, 91.00, skipped=20)
    lines = lines_for(tmp_path)
    assert "(1 seed;" in lines[0] and "noise floor: unknown with one seed" in lines[0]
    assert lines[1] == ("  - One seed: there is no interval, so nothing is claimed about accuracy; "
                        "run more seeds (`fineprune compare --seeds 0,1,2`).")
    text = "\n".join(lines[2:])
    assert "+0.02 pt in one seed; no interval, no verdict" in text
    for claim in ("better", "worse", "equivalent", "unresolved", "within one std", "saves the most"):
        assert claim not in text


def test_only_arms_equivalent_within_the_margin_are_ranked(tmp_path):
    """UCB saves 40% but its interval is unresolved; fine saves 10% and is equivalent: fine is named."""
    for seed, (ucb, fine) in enumerate([(0.6, 0.05), (-0.6, -0.05), (0.1, 0.0)]):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "ucb", seed, 80.0 + ucb, train_s=60.0, skipped=60)
        arm(tmp_path, "fine", seed, 80.0 + fine, train_s=90.0 - seed, skipped=20)
    best = lines_for(tmp_path)[1]
    # saved 10, 11, 12%: mean 11, sd 1, half 4.303 / sqrt(3) = 2.48
    assert best == ("  - Equivalent to regular within ±0.3 pt: fine-pruning. By the machine-independent cost, "
                    "fine-pruning trains the fewest sample-epochs (1.80 ± 0.00, 10.0 ± 0.0% skipped). "
                    "fine-pruning saves the most time: 11.00 [+8.52, +13.48]% against regular between runs of "
                    "one machine (3 seeds).")


@pytest.mark.parametrize("fine_s, random_s, says", [
    ((90.0, 89.0, 88.0), (70.0, 69.0, 71.0), "random control saves the most time: 30.00 [+27.52, +32.48]%"),
    ((90.0, 60.0, 88.0), (70.0, 69.0, 71.0), "none is resolved ahead in time saved (the highest mean: "
                                              "random control, 30.00 [+27.52, +32.48]% over 3 seeds)"),
])
def test_saves_the_most_time_only_when_its_interval_lies_above_the_others(tmp_path, fine_s, random_s, says):
    for seed in range(3):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "fine", seed, 80.0 + 0.01 * seed, train_s=fine_s[seed], skipped=20)
        arm(tmp_path, "random", seed, 80.0 - 0.01 * seed, train_s=random_s[seed], skipped=20)
    assert says in lines_for(tmp_path)[1]


def test_without_comparable_times_only_the_machine_independent_cost_ranks(tmp_path):
    for seed in range(3):
        arm(tmp_path, "regular", seed, 80.0, machine=None)
        arm(tmp_path, "ucb", seed, 80.0 + 0.01 * seed, train_s=60.0, skipped=60, machine=None)
        arm(tmp_path, "fine", seed, 80.0 - 0.01 * seed, train_s=50.0, skipped=20, machine=None)
    best = lines_for(tmp_path)[1]
    assert "UCB trains the fewest sample-epochs (1.40 ± 0.00, 30.0 ± 0.0% skipped)" in best
    assert best.endswith("Fewer than two seeds of each were timed on one machine, so none is said to save "
                         "the most time.")


def test_random_at_its_own_budget_reads_each_seeds_frontier(tmp_path):
    """Frontier arms at 10% and 20% per seed; fine at 15% is judged against the line between
    them in the same seed: seed 0 reads 79.5, seed 1 79.0, seed 2 80.0."""
    frontier = [((79.8, 79.2), 79.0), ((79.5, 78.5), 78.5), ((80.2, 79.8), 80.5)]
    for seed, ((at10, at20), fine) in enumerate(frontier):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "random", seed, at10, skipped=20, arm_name="random-every-10")
        arm(tmp_path, "random", seed, at20, skipped=40, arm_name="random-every-20")
        arm(tmp_path, "fine", seed, fine, skipped=30)
    lines = lines_for(tmp_path)
    i = next(i for i, l in enumerate(lines) if l.startswith("  - fine-pruning"))
    # fine - frontier: -0.5, -0.5, +0.5 -> mean -0.17
    assert lines[i + 1].startswith("    Against random pruning in every epoch at the same budget: -0.17 [")


def test_the_frontier_line_starts_at_the_lower_budget_arm(tmp_path):
    """Arms at 10% (80.0) and 30% (76.0) of sample-epochs skipped: the line reads 79.0 at 15% and
    77.0 at 25%. Catches: interpolating from the wrong end (77.0 at 15%, 79.0 at 25%), which the
    midpoint of the test above cannot tell apart."""
    arm(tmp_path, "random", 0, 80.0, skipped=20, arm_name="random-every-10")
    arm(tmp_path, "random", 0, 76.0, skipped=60, arm_name="random-every-30")
    [by_policy] = group(load_runs([tmp_path])[0]).values()
    assert paired.frontier_at(by_policy, 0, 15.0) == pytest.approx(79.0)
    assert paired.frontier_at(by_policy, 0, 25.0) == pytest.approx(77.0)
    assert paired.frontier_at(by_policy, 0, 30.0) == pytest.approx(76.0)
    assert paired.frontier_at(by_policy, 0, 35.0) is None and paired.frontier_at(by_policy, 1, 15.0) is None


def test_two_seeds_already_give_an_interval_and_a_noise_floor(tmp_path):
    """The one-seed case is n = 1 only. Catches: n <= 2 taken for one seed (no interval claimed)
    and the noise floor 'unknown' at two seeds."""
    for seed, (reg, fine) in enumerate([(80.0, 80.1), (80.2, 80.2)]):
        arm(tmp_path, "regular", seed, reg)
        arm(tmp_path, "fine", seed, fine, skipped=20)
    lines = lines_for(tmp_path, margin=5.0)
    assert "(2 seeds;" in lines[0] and "noise floor: regular's seed-to-seed std 0.14 pt" in lines[0]
    assert not any("One seed" in line for line in lines)
    assert lines[1].startswith("  - Equivalent to regular within ±5 pt: fine-pruning.")


def test_a_policy_outside_the_frontier_gets_no_random_comparison(tmp_path):
    for seed in range(2):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "random", seed, 79.5, skipped=60, arm_name="random-every-30")
        arm(tmp_path, "ucb", seed, 79.0 + seed * 0.1, skipped=60)
        arm(tmp_path, "infobatch", seed, 78.0, skipped=40)
    lines = lines_for(tmp_path)
    ucb = lines.index(next(l for l in lines if l.startswith("  - UCB")))
    assert lines[ucb + 1].startswith("    Against random pruning in every epoch at the same budget: -0.45 [")
    info = lines.index(next(l for l in lines if l.startswith("  - InfoBatch")))
    assert info + 1 == len(lines) or not lines[info + 1].startswith("    Against")


def shorter_case(root, lines_at=((80.0, 76.0), (78.0, 70.0), (82.0, 78.0)), fine_gap=1.0):
    """10-epoch regular; shorter-10 (9 epochs) and shorter-30 (7 epochs); fine skipping 150 of
    its 1,000 sample-epochs: budget 15%, a quarter of the way from 10% to 30%. Each seed's line
    at 15% is y10 + (y30 - y10) / 4: 79, 76, 81; reversed (3/4 of the way) it would read 77, 72,
    79, and another seed's line would give unequal differences."""
    for seed, (y10, y30) in enumerate(lines_at):
        line = y10 + (y30 - y10) / 4
        _recipe(make_run(root, "lenet", "regular", seed, 100.0, [50.0] * 9 + [y10 + 0.5]), 0.0)
        for name, epochs, y in (("shorter-10", 9, y10), ("shorter-30", 7, y30)):
            path = make_run(root, "lenet", name, seed, 100.0 * epochs / 10, [50.0] * (epochs - 1) + [y])
            s = json.loads((path / "summary.json").read_text())
            (path / "summary.json").write_text(json.dumps({**s, "policy": "regular", "arm": name}))
            config = path / "config.yaml"
            config.write_text(config.read_text().replace("enabled: true", "enabled: false"))
            _recipe(path, 1 - epochs / 10)
        _recipe(make_run(root, "lenet", "fine", seed, 90.0, [50.0] * 9 + [line + fine_gap],
                         skipped_epochs=(2, 3, 4, 5, 6)), 0.0)


def _recipe(path, budget):
    """The 10-epoch recipe, scaled as `compare --shorter` does: a shorter arm meets only the
    regular run whose schedule it scales (issue 31)."""
    import yaml
    from fineprune_cli.drivers.compare import shorter_schedule
    config = yaml.safe_load((path / "config.yaml").read_text())
    schedule = shorter_schedule(10, [3, 6, 8], 1.0, budget)
    config["train"] = dict(zip(("epochs", "milestones", "warmup_epochs"), schedule))
    (path / "config.yaml").write_text(yaml.safe_dump(config))


def test_each_policy_meets_the_shorter_schedule_at_its_own_budget_paired_by_seed(tmp_path):
    shorter_case(tmp_path)
    lines = lines_for(tmp_path)
    i = next(i for i, line in enumerate(lines) if line.startswith("  - fine-pruning (15.0 ± 0.0% of sample-epochs"))
    assert lines[i + 1] == ("    Against training fewer epochs at the same budget: +1.00 [+1.00, +1.00] pt, better "
                            "than training fewer epochs (paired std 0.00 pt).")


def test_the_shorter_arms_are_judged_against_regular_only(tmp_path):
    shorter_case(tmp_path)
    lines = lines_for(tmp_path)
    i = next(i for i, line in enumerate(lines) if line.startswith("  - 30% fewer epochs (30.0 ± 0.0% of sample-epochs"))
    assert "-5.83 [" in lines[i] and "than regular" in lines[i]   # 76-80.5, 70-78.5, 78-82.5
    assert not lines[i + 1].startswith("    Against")
    assert lines[-1] == ("  - Not measured here, so not claimed: how the policies compare with random pruning in "
                         "every epoch (`compare --frontier 0.1,0.3`) at their budgets.")


def test_a_policy_outside_the_shorter_line_gets_no_comparison_with_it(tmp_path):
    shorter_case(tmp_path)
    for seed in range(3):   # 5% of the sample-epochs: below the line's first arm (10%)
        _recipe(make_run(tmp_path, "lenet", "ucb", seed, 90.0, [50.0] * 9 + [79.0], skipped_epochs=(9,)), 0.0)
        path = tmp_path / "lenet-folder" / f"ucb-seed{seed}" / "summary.json"
        s = json.loads(path.read_text())
        path.write_text(json.dumps({**s, "samples_skipped": 50}))
    lines = lines_for(tmp_path)
    i = next(i for i, line in enumerate(lines) if line.startswith("  - UCB (5.0 ± 0.0%"))
    assert not lines[i + 1].startswith("    Against")


def test_the_tradeoff_plot_draws_both_frontiers_each_in_its_own_colour(tmp_path):
    from fineprune_cli.analysis.plots import tradeoff_figure
    shorter_case(tmp_path)
    for seed in range(3):
        arm(tmp_path, "random", seed, 79.0, skipped=20, arm_name="random-every-10")
    fig = tradeoff_figure(load_runs([tmp_path])[0])
    ax = fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    assert sorted(labels) == ["fewer epochs (shorter schedule)", "fine-pruning", "random pruning every epoch"]
    colours = [h.lines[0].get_color() if hasattr(h, "lines") else h.get_color() for h in handles]
    assert len(set(colours)) == 3
    assert ax.get_title() == "Accuracy change against budget (paired by seed, mean ± std)"

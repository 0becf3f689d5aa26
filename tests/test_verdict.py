"""The verdict's lines and the lines a decision reads: random and training less at a policy's own
budget, through the same arms in every seed; what is missing says why."""

import re

import pytest

from factories import make_run
from fineprune_cli.analysis.decide.judging import Judging
from fineprune_cli.analysis.group import paired
from fineprune_cli.analysis.group.groups import group, is_frontier, is_shorter
from fineprune_cli.analysis.read.quantum import quantum_of
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.verdict import build
from fineprune_cli.analysis.study import study
from fineprune_cli.arms import shorter_schedule


def arm(root, policy, seed, final, train_s=100.0, skipped=0, machine="default", arm_name=None):
    """A 2-epoch run with final accuracy `final` and `skipped` of its 200 sample-epochs left out,
    half in each epoch."""
    extra = {} if machine == "default" else {"machine": machine}
    return make_run(
        root,
        "lenet",
        policy,
        seed,
        train_s,
        [60.0, final],
        skipped_epochs=(1, 2) if skipped else (),
        kept=100 - skipped // 2,
        arm=arm_name or "",
        **extra,
    )


RULE = "skew-robust t, failed runs: more than 1 pt below their arm's median"  # today's defaults, as plans name them


def lines_for(root, **judging):
    found = build(study(load_runs([root])[0], Judging(**judging)))
    return found.markdown() if found else []


def by_policy_of(root):
    [by] = group(load_runs([root])[0]).values()
    return by


def test_random_at_its_own_budget_reads_each_seeds_frontier(tmp_path):
    """Frontier arms at 10% and 20% per seed; fine at 15% is judged against the line between
    them in the same seed: seed 0 reads 79.5, seed 1 79.0, seed 2 80.0."""
    frontier = [((79.8, 79.2), 79.0), ((79.5, 78.5), 78.5), ((80.2, 79.8), 80.5)]
    for seed, ((at10, at20), fine) in enumerate(frontier):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "random", seed, at10, skipped=20, arm_name="random-every-10")
        arm(tmp_path, "random", seed, at20, skipped=40, arm_name="random-every-20")
        arm(tmp_path, "fine", seed, fine, skipped=30)
    line = paired.vs_line(by_policy_of(tmp_path), "fine", is_frontier)
    assert line.diffs == pytest.approx({0: -0.5, 1: -0.5, 2: 0.5})
    assert line.arms == ("random-every-10", "random-every-20") and line.norms == pytest.approx({0: 1.5, 1: 1.5, 2: 1.5})
    chain = next(l for l in lines_for(tmp_path) if l.startswith("  - Against C(p), random pruning"))
    assert "-0.17 [" in chain and "over 3 seeds (0–2;" in chain


def test_the_frontier_line_starts_at_the_lower_budget_arm(tmp_path):
    """Arms at 10% (80.0) and 30% (76.0): the line reads 79.0 at 15% and 77.0 at 25%. Catches:
    interpolating from the wrong end (77.0 at 15%, 79.0 at 25%)."""
    arm(tmp_path, "regular", 0, 80.0)
    arm(tmp_path, "random", 0, 80.0, skipped=20, arm_name="random-every-10")
    arm(tmp_path, "random", 0, 76.0, skipped=60, arm_name="random-every-30")
    for name, skipped, want in (("ucb", 30, 79.0), ("egreedy", 50, 77.0)):
        arm(tmp_path, name, 0, 78.0, skipped=skipped)
        assert paired.vs_line(by_policy_of(tmp_path), name, is_frontier).diffs[0] == pytest.approx(78.0 - want)


def test_a_policy_outside_the_frontier_gets_no_random_comparison_and_a_reason(tmp_path):
    for seed in range(2):
        arm(tmp_path, "regular", seed, 80.0)
        arm(tmp_path, "random", seed, 79.5, skipped=60, arm_name="random-every-30")
        arm(tmp_path, "infobatch", seed, 78.0, skipped=40)
    miss = paired.vs_line(by_policy_of(tmp_path), "infobatch", is_frontier)
    assert isinstance(miss, paired.Miss) and "30.0%" in miss.reason
    text = "\n".join(lines_for(tmp_path))
    assert "Random pruning in every epoch does not reach 20.0%" in text and "`compare --frontier 0.2`" in text


def shorter_case(root, lines_at=((80.0, 76.0), (78.0, 70.0), (82.0, 78.0)), fine_gap=1.0):
    """10-epoch regular; shorter-10 (9 epochs) and shorter-30 (7 epochs); fine skipping 150 of
    its 1,000 sample-epochs: budget 15%, a quarter of the way from 10% to 30%. Each seed's line
    at 15% is y10 + (y30 - y10) / 4: 79, 76, 81; reversed (3/4 of the way) it would read 77, 72,
    79, and another seed's line would give unequal differences."""
    for seed, (y10, y30) in enumerate(lines_at):
        line = y10 + (y30 - y10) / 4
        make_run(root, "lenet", "regular", seed, 100.0, [50.0] * 9 + [y10 + 0.5], settings=recipe(0.0))
        for name, epochs, y in (("shorter-10", 9, y10), ("shorter-30", 7, y30)):
            make_run(
                root,
                "lenet",
                "regular",
                seed,
                100.0 * epochs / 10,
                [50.0] * (epochs - 1) + [y],
                arm=name,
                settings=recipe(1 - epochs / 10),
            )
        make_run(
            root,
            "lenet",
            "fine",
            seed,
            90.0,
            [50.0] * 9 + [line + fine_gap],
            skipped_epochs=(2, 3, 4, 5, 6),
            settings=recipe(0.0),
        )


def recipe(budget):
    """The 10-epoch recipe's settings, scaled as `compare --shorter` does: a shorter arm meets only
    the regular run whose schedule it scales (issue 31)."""
    schedule = shorter_schedule(10, [3, 6, 8], 1.0, budget)
    return dict(zip(("train.epochs", "train.milestones", "train.warmup_epochs"), schedule))


def test_each_policy_meets_the_shorter_schedule_at_its_own_budget_paired_by_seed(tmp_path):
    shorter_case(tmp_path)
    line = paired.vs_line(by_policy_of(tmp_path), "fine", is_shorter)
    assert line.diffs == pytest.approx({0: 1.0, 1: 1.0, 2: 1.0})  # reversed, seeds would differ
    # (1 - w)^2 + w^2 at w = 1/4, plus the policy's own 1
    assert line.norms == pytest.approx({s: 1 + 0.75**2 + 0.25**2 for s in range(3)})


def test_the_shorter_arms_are_baselines_not_decided(tmp_path):
    shorter_case(tmp_path)
    lines = lines_for(tmp_path)
    assert "One decision per policy, 1 in the family" in lines[0]
    assert not any(l.startswith("- **30% fewer epochs") for l in lines)
    assert lines[-2] == (
        "  - Not measured here, so not a C(p): random pruning in every epoch (`compare --frontier 0.1,0.3`)."
    )
    assert lines[-1].startswith("- **The shape of the per-seed differences**")


def test_a_policy_outside_the_shorter_line_gets_no_comparison_with_it(tmp_path):
    shorter_case(tmp_path)
    for seed in range(3):  # 5% of the sample-epochs: below the line's first arm (10%)
        make_run(
            tmp_path,
            "lenet",
            "ucb",
            seed,
            90.0,
            [50.0] * 9 + [79.0],
            skipped_epochs=(9,),
            kept=50,
            settings=recipe(0.0),
        )
    assert isinstance(paired.vs_line(by_policy_of(tmp_path), "ucb", is_shorter), paired.Miss)
    text = "\n".join(lines_for(tmp_path))
    assert "Training fewer epochs does not reach 5.0%" in text and "`compare --shorter 0.05`" in text


def test_the_tradeoff_plot_draws_both_frontiers_and_descriptive_intervals(tmp_path):
    from fineprune_cli.analysis.decide import decision
    from fineprune_cli.analysis.render.plots import tradeoff_figure

    shorter_case(tmp_path)
    for seed in range(3):
        arm(tmp_path, "random", seed, 79.0, skipped=20, arm_name="random-every-10")
    runs = load_runs([tmp_path])[0]
    fig = tradeoff_figure(study(runs))
    ax = fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    assert sorted(labels) == ["fewer epochs (shorter schedule)", "fine-pruning", "random pruning every epoch"]
    colours = [h.lines[0].get_color() if hasattr(h, "lines") else h.get_color() for h in handles]
    assert len(set(colours)) == 3
    assert ax.get_title() == "Accuracy change against budget (paired by seed, 90% intervals)"
    by = by_policy_of(tmp_path)
    e = decision.estimate(paired.vs_regular(by, "fine"), quantum_of(by))
    fine_bar = [c for c in ax.containers if c.lines[0].get_color() == colours[labels.index("fine-pruning")]]
    segments = [seg for c in ax.containers for coll in c.lines[2] for seg in coll.get_segments()]
    assert any(abs(seg[0][1] - e.low) < 1e-9 and abs(seg[1][1] - e.high) < 1e-9 for seg in segments), fine_bar


RANKING = re.compile(r"\b(most|fastest|quickest|cheapest|ranked|winner)\b|\bbest\b(?!-3)|\bsaves? more\b", re.I)


def test_no_policy_is_ranked_by_the_time_it_saves(tmp_path):
    """fine saves 15-45% of regular's time and random 10-30% (means 30% and 20%, per-seed savings
    overlapping): the report gives each row its saving and ranks none, in the decisions or the tables."""
    from fineprune_cli.analysis.render.report import write_report

    for seed, (fine_s, random_s) in enumerate(((55.0, 70.0), (70.0, 80.0), (85.0, 90.0))):
        arm(tmp_path / "runs", "regular", seed, 80.0 + 0.1 * seed)
        arm(tmp_path / "runs", "fine", seed, 79.9 + 0.1 * seed, train_s=fine_s, skipped=60)
        arm(tmp_path / "runs", "random", seed, 79.8 + 0.1 * seed, train_s=random_s, skipped=60)
    write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "fine-pruning: saved (same machine) | 30.00 ± 15.00%" in index
    assert "random control: saved (same machine) | 20.00 ± 10.00%" in index
    found = [line for line in index.splitlines() if RANKING.search(line)]
    assert not found, found


def test_seeds_are_written_as_a_range_only_from_three_consecutive():
    from fineprune_cli.analysis.render.verdict import seeds_text

    assert seeds_text([2, 0, 1]) == "0–2" and seeds_text([0, 1]) == "0, 1" and seeds_text([0, 2, 3]) == "0, 2, 3"


# The plan, and why decisions are post hoc ------------------------------------------------------


def planned_runs(root, seeds=range(3), runs_before=None, **judging):
    """regular, fine (15% skipped) and the random control over `seeds`, with a plan.json in `root`
    recorded under `judging` when `runs_before` (the complete runs it says existed) is given."""
    from fineprune_cli.analysis.decide import plan

    for seed in seeds:
        arm(root, "regular", seed, 80.0 + 0.1 * seed)
        arm(root, "fine", seed, 79.9 + 0.2 * seed, skipped=30)
        arm(root, "random", seed, 79.0 + 0.1 * seed, skipped=30)
    if runs_before is not None:
        plan.record(root, Judging(**judging), None, runs_before, plan.Family(("fine",), ("lenet",), ("d",)), seeds)
    return root


def index_of(out):
    return (out / "index.md").read_text()


def post_hoc_column(out):
    import csv

    with open(out / "summary.csv", newline="") as f:
        return {row["post_hoc"] for row in csv.DictReader(f) if row["decision"]}


def test_a_plan_recorded_after_runs_existed_makes_the_decisions_post_hoc(tmp_path):
    """The same runs and plan, recorded before any run and after nine: only the second is post hoc,
    and it says how many runs came first. Catches: runs_before read but not made a reason."""
    from fineprune_cli.analysis.render.report import write_report

    before = planned_runs(tmp_path / "before", runs_before=0)
    write_report([before], tmp_path / "rep-before", with_plots=False)
    text = index_of(tmp_path / "rep-before")
    assert "Post hoc" not in text and "recorded before the first run" in text and "these decisions keep to it" in text
    assert post_hoc_column(tmp_path / "rep-before") == {"no"}

    after = planned_runs(tmp_path / "after", runs_before=9)
    write_report([after], tmp_path / "rep-after", with_plots=False)
    text = index_of(tmp_path / "rep-after")
    assert "**Post hoc.** These decisions do not keep to a plan fixed before the data" in text
    assert "does not apply to them: the plan was recorded after 9 runs existed. Read them as a description." in text
    assert post_hoc_column(tmp_path / "rep-after") == {"yes"}


def test_a_report_with_another_margin_than_planned_says_it_judges_with_it(tmp_path):
    """A plan recorded before the first run with m 0.3; `report --margin 0.5` judges with 0.5 and
    says so beside the planned value (δ was recorded as 0.3, so it stays). Catches: the report's
    and the plan's values swapped, or the flag not compared with the plan."""
    from conftest import invoke

    runs = planned_runs(tmp_path / "runs", runs_before=0)
    result = invoke(["report", runs, "--out", tmp_path / "planned", "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "these decisions keep to it" in index_of(tmp_path / "planned")
    result = invoke(["report", runs, "--out", tmp_path / "other", "--no-plots", "--margin", "0.5"])
    assert result.exit_code == 0, result.output
    text = index_of(tmp_path / "other")
    assert "does not apply to them: this report judges with margin 0.5 (planned 0.3). Read them" in text
    assert "min_gain" not in text and "regular by 0.5 pt or more" in text


def test_folders_planned_differently_are_named_with_their_plans(tmp_path):
    """Two folders, seeds 0-2 planned with m 0.3 and seeds 3-5 with m 0.5, read together: no plan
    holds for both, and each is named with its own. Catches: the first folder's plan taken for all."""
    from fineprune_cli.analysis.render.report import write_report

    a = planned_runs(tmp_path / "a", runs_before=0)
    b = planned_runs(tmp_path / "b", seeds=range(3, 6), runs_before=0, margin=0.5, min_gain=0.3)
    write_report([a, b], tmp_path / "rep", with_plots=False)
    text = index_of(tmp_path / "rep")
    assert (
        f"does not apply to them: the folders read were planned differently: "
        f"{a / 'plan.json'}: m 0.3 pt, δ 0.3 pt, alpha 0.05, Bonferroni, own paired t, {RULE}, family fine on "
        f"lenet × d: k = 1, seeds 0–2; {b / 'plan.json'}: m 0.5 pt, δ 0.3 pt, alpha 0.05, Bonferroni, own paired "
        f"t, {RULE}, family fine on lenet × d: k = 1, seeds 3–5. Read them" in text
    )
    assert post_hoc_column(tmp_path / "rep") == {"yes"}

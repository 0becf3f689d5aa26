"""analysis.render.plots: titles say what the lines are (no 'mean' of one seed), no two lines share a colour."""

import pytest
from matplotlib.figure import Figure

from factories import make_run
from fineprune_cli.analysis.group.groups import group
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render import plots


@pytest.fixture
def saved(monkeypatch):
    """Each figure's axes titles and line colours, as it is saved."""
    figures = []

    def record(fig, *args, **kwargs):
        figures.append([(ax.get_title(), [line.get_color() for line in ax.get_lines()]) for ax in fig.axes])

    monkeypatch.setattr(Figure, "savefig", record)
    return figures


def two_frontier_arms(root, seeds):
    for seed in seeds:
        make_run(root, "lenet", "regular", seed, 100.0, [50.0, 60.0])
        for arm in ("random-every-10", "random-every-20"):
            make_run(root, "lenet", "random", seed, 90.0, [50.0, 59.0], skipped_epochs=(2,), arm=arm)


def test_one_seed_is_not_called_a_mean_and_frontier_arms_get_distinct_colours(tmp_path, saved):
    two_frontier_arms(tmp_path, [0])
    (by,) = group(load_runs([tmp_path])[0]).values()
    plots.curves(by, "LeNet", tmp_path / "c.png")
    plots.accuracy_by_cost(by, "LeNet", None, tmp_path / "a.png")
    (loss, acc), (cost,) = saved
    assert "mean" not in loss[0] and "mean" not in cost[0]
    assert len(loss[1]) == 3 and len(set(loss[1])) == 3  # the two random-every arms: two greys before


def test_several_seeds_say_mean(tmp_path, saved):
    two_frontier_arms(tmp_path, [0, 1])
    (by,) = group(load_runs([tmp_path])[0]).values()
    plots.curves(by, "LeNet", tmp_path / "c.png")
    assert saved[0][0][0] == "LeNet (mean over seeds)"


def test_row_colours_keep_the_policys_own_and_never_repeat():
    colours = plots.row_colors(
        ["fine", "fine (prune_fraction 0.5)", "random-every-10", "random-every-20", "shorter-10", "shorter-30"]
    )
    assert colours["fine"] == "#d62728" and colours["random-every-10"] == "#7f7f7f"
    assert len(set(colours.values())) == 6


def test_no_two_lines_look_alike_regulars_grey_beside_a_shorter_arms_black():
    """The curves drew regular (#444444) and a shorter arm (#000000) in two greys a reader mixed up."""
    from fineprune_cli.analysis.render.colors import alike

    rows = ["regular", "fine", "random-every-20", "shorter-10", "shorter-20", "selective-backprop", "ies", "orderdp"]
    colours = plots.row_colors(rows)
    assert colours["regular"] == "#444444" and colours["fine"] == "#d62728"
    assert not [(a, b) for i, a in enumerate(rows) for b in rows[i + 1 :] if alike(colours[a], colours[b])]
    assert alike("#444444", "#000000") and alike("#7f7f7f", "#999999") and not alike("#000000", "#d62728")


def test_points_at_one_budget_are_set_side_by_side_and_others_stay():
    """The random control's interval, at its policy's very budget, hid fine-pruning's."""
    xs = plots.dodged([12.0, 12.0, 30.0], axis=[0.0, 10.0, 12.0, 30.0, 50.0])
    assert xs[0] != xs[1] and abs(xs[1] - xs[0]) >= 0.5 and (xs[0] + xs[1]) / 2 == 12.0
    assert xs[2] == 30.0 and plots.dodged([], axis=[]) == []


def test_the_cost_axis_starts_where_the_lines_enter_the_view_not_at_zero(tmp_path, monkeypatch):
    """Every line entered the view near 9 sample-epochs, and the axis began at 0."""
    limits = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: limits.append(fig.axes[0].get_xlim()))
    accs = [10.0 * e for e in range(1, 11)]  # the view starts 3 points below the final 100%
    for seed in (0, 1):
        make_run(tmp_path, "lenet", "regular", seed, 100.0, accs)
    (by,) = group(load_runs([tmp_path])[0]).values()
    plots.accuracy_by_cost(by, "LeNet", None, tmp_path / "a.png")
    assert limits[0][0] == 9.0 and limits[0][1] > 10.0


def test_the_tradeoff_plot_sets_the_random_control_beside_its_policy_at_one_budget(tmp_path):
    """fine and its random control skip the same samples: their intervals were drawn on one x."""
    from fineprune_cli.analysis.study import study

    for seed, (fine, random) in enumerate([(79.0, 78.0), (80.0, 79.5), (78.5, 77.0)]):
        make_run(tmp_path, "lenet", "regular", seed, 100.0, [60.0, 80.0 + seed / 10])
        for policy, final in (("fine", fine), ("random", random)):
            make_run(tmp_path, "lenet", policy, seed, 90.0, [60.0, final], skipped_epochs=(1, 2), kept=85)
    fig = plots.tradeoff_figure(study(load_runs([tmp_path])[0]))
    xs = sorted(float(c.lines[0].get_xdata()[0]) for c in fig.axes[0].containers)
    assert len(xs) == 2 and xs[1] - xs[0] >= 0.15 and abs((xs[0] + xs[1]) / 2 - 15.0) < 1e-9, xs

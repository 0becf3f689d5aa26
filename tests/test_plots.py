"""analysis.plots: titles say what the lines are (no 'mean' of one seed), no two lines share a colour."""

import pytest
from matplotlib.figure import Figure

from fineprune_cli.analysis import plots
from fineprune_cli.analysis.groups import group
from fineprune_cli.analysis.runs import load_runs
from factories import make_run


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

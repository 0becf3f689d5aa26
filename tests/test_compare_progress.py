"""compare's progress (drivers/progress.py): an ETA from each model's own cost, a line per run."""

import re

import pytest

from conftest import invoke, tiny
from fineprune_cli.drivers.progress import Costs, MatrixProgress, Planned


class FakeBar:
    """Records what the matrix hands to the console's bar."""

    def __init__(self):
        self.advances, self.notes, self.resumes = [], [], []

    def advance(self, status="", seconds_left=None, untimed=0, label="", plan=""):
        self.advances.append((label, status, seconds_left, untimed))
        self.plan = plan

    def resumed(self, units):
        self.resumes.append(units)

    def note(self, message):
        self.notes.append(message)

    def steps(self, total, read, label):
        from contextlib import nullcontext

        return nullcontext()


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _epoch(run_bar, clock, seconds, status="acc 1.00%"):
    """One epoch as fit drives it: the step view opens, training runs, the epoch advances."""
    with run_bar.steps(10, lambda: 0, "epoch"):
        clock.t += seconds
    run_bar.advance(status)


def test_planned_looks_give_the_whole_plans_eta_beside_this_looks():
    """Look 1 of 3: its own runs, then the later looks' runs at the pace measured so far."""
    clock, bar = Clock(), FakeBar()
    later = [Planned("lenet", f"lenet, regular, seed {s}", 2) for s in (2, 3, 4)]
    matrix = MatrixProgress(bar, [Planned("lenet", "lenet, regular", 2)], clock=clock, later=later, looks="looks 2–3")
    with matrix.run(0) as run:
        clock.t += 1.0  # start-up
        _epoch(run, clock, 2.0)
        assert bar.advances[-1][2:] == (2.0, 0)  # this look: its last epoch
        assert bar.plan == " (this look); up to 0:00:17 with looks 2–3"  # 2 s + 3 runs x (1 s + 2 x 2 s)
        _epoch(run, clock, 2.0)
    alone = MatrixProgress(FakeBar(), [Planned("lenet", "lenet, regular", 1)], clock=clock)
    with alone.run(0) as run:
        _epoch(run, clock, 2.0)
    assert alone.bar.plan == ""  # no looks after it: the one ETA is the plan's


def test_a_script_runs_start_up_is_its_first_epoch_less_its_second():
    """A script's run shows no steps: its records alone advance the bar. Its start-up (torch's
    import, its data) took 20 s a run on a loaded CPU, and the ETA had left it out."""
    clock, bar = Clock(), FakeBar()
    matrix = MatrixProgress(bar, [Planned("s", "s, regular", 3), Planned("s", "s, fine", 3)], clock=clock)
    with matrix.run(0) as run:
        for seconds in (21.0, 1.0, 1.0):
            clock.t += seconds
            run.advance()
    assert matrix.costs.per_start("s") == 20.0 and bar.advances[-1][2] == 20.0 + 3 * 1.0


def test_eta_sums_each_models_own_epochs_not_one_pace_for_all():
    """LeNet epochs take 2 s, ResNet epochs 20 s. A pace over all epochs done (the old bar)
    would give 2 epochs x 26/3 s = 17.3 s after ResNet's first; the right figure is ResNet's
    last epoch (20 s) plus the LeNet run still to come (1 s start-up + 2 s)."""
    clock, bar = Clock(), FakeBar()
    matrix = MatrixProgress(
        bar,
        [
            Planned("lenet", "lenet, regular", 2),
            Planned("resnet", "resnet, regular", 2),
            Planned("lenet", "lenet, shorter-50", 1),
        ],
        clock=clock,
    )
    with matrix.run(0) as run:
        clock.t += 1.0  # start-up: data, model
        _epoch(run, clock, 2.0)
        assert bar.advances[-1][2:] == (2.0 + 0 + 1.0 + 2.0, 1)  # ResNet not timed yet: counted apart
        _epoch(run, clock, 2.0)
    with matrix.run(1) as run:
        clock.t += 1.0
        _epoch(run, clock, 20.0)
        assert bar.advances[-1][2:] == (pytest.approx(20.0 + 1.0 + 2.0), 0)
        _epoch(run, clock, 20.0)
    with matrix.run(2) as run:
        _epoch(run, clock, 2.0)
        assert bar.advances[-1][2:] == (0.0, 0)
    assert bar.advances[0][:2] == ("lenet, regular (run 1/3)", "epoch 1/2, acc 1.00%")
    assert bar.advances[-1][:2] == ("lenet, shorter-50 (run 3/3)", "epoch 1/1, acc 1.00%")
    assert bar.notes == [
        "done lenet, regular (run 1/3, 0:00:05)",
        "done resnet, regular (run 2/3, 0:00:41)",
        "done lenet, shorter-50 (run 3/3, 0:00:02)",
    ]


def test_a_run_that_fails_prints_no_done_line():
    bar = FakeBar()
    matrix = MatrixProgress(bar, [Planned("lenet", "lenet", 2)], clock=Clock())
    with pytest.raises(KeyboardInterrupt), matrix.run(0):
        raise KeyboardInterrupt
    assert bar.notes == []


def test_a_resumed_run_counts_only_its_remaining_epochs():
    clock, bar = Clock(), FakeBar()
    matrix = MatrixProgress(bar, [Planned("m", "a", 5), Planned("m", "b", 5)], clock=clock)
    with matrix.run(0) as run:
        run.resumed(3)
        _epoch(run, clock, 4.0)  # epoch 4 of 5 of run a, 5 of run b to come
        assert bar.resumes == [3]
        assert bar.advances[-1][1:3] == ("epoch 4/5, acc 1.00%", 4.0 * (1 + 5))


def test_costs_take_the_median_epoch_so_a_slow_first_epoch_does_not_set_the_pace():
    costs = Costs()
    costs.epoch_s["m"] += [30.0, 2.0, 3.0]  # compilation in the first epoch
    assert costs.per_epoch("m") == 3.0
    assert costs.seconds_left([("m", 2, True), ("other", 4, False), ("m", 0, False)]) == (6.0, 1)


@pytest.mark.slow
def test_compare_piped_prints_a_line_per_epoch_and_per_run_with_shorter_arms_shorter(tmp_path):
    result = invoke(["compare", *tiny(), "--policies", "regular", "--shorter", "0.5", "--out", tmp_path / "c"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    epochs = [
        re.search(
            r"\(run (\d)/2\): epoch (\d)/(\d), .*; compare \(2 runs\): (\d)/3 epochs, "
            r"elapsed \d+:\d\d:\d\d, eta ",
            line,
        )
        for line in lines
    ]
    assert [m.groups() for m in epochs if m] == [("1", "1", "2", "1"), ("1", "2", "2", "2"), ("2", "1", "1", "3")]
    done = [line for line in lines if line.startswith("done ")]
    assert [d.split(" (run ")[1].split(",")[0] for d in done] == ["1/2", "2/2"]
    assert "shorter-50" in done[1]

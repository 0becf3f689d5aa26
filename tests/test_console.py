"""What the console shows while training: the per-step bar on a terminal, one plain line per
epoch elsewhere, a stop as a plain line (fineprune_cli/console.py, the engine's hooks)."""

import io
import json
import re
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest
from rich.console import Console

from conftest import invoke, summary_of, tiny
from fineprune_cli import console

TINY = tiny(epochs=None)
LINE = re.compile(
    r"^lenet on synthetic: epoch (\d+)/3, acc \d+\.\d\d%, elapsed \d+:\d\d:\d\d, "
    r"eta (\d+:\d\d:\d\d)$"
)


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "-:--:--"),
        (-1.0, "-:--:--"),
        (float("nan"), "-:--:--"),
        (0.4, "0:00:00"),
        (59.6, "0:01:00"),
        (3 * 3600 + 62, "3:01:02"),
    ],
)
def test_clock(seconds, text):
    assert console.clock(seconds) == text


def test_train_piped_prints_one_line_per_epoch_on_stderr_and_nothing_extra_on_stdout(tmp_path):
    result = invoke(["train", *TINY, "--epochs", "3", "--out", tmp_path / "r"])
    assert result.exit_code == 0, result.output
    matches = [LINE.match(line) for line in result.stderr.splitlines()]
    assert [int(m.group(1)) for m in matches if m] == [1, 2, 3], result.stderr
    assert matches[2].group(2) == "0:00:00"  # nothing left after the last epoch
    assert "epoch 1/3" not in result.stdout  # results only on stdout


def test_json_stdout_stays_one_json_object_and_progress_stays_off(tmp_path):
    result = invoke(["train", *TINY, "--epochs", "2", "--out", tmp_path / "r", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["epochs_completed"] == 2
    assert "epoch 1/2" not in result.stderr


class _Counter:
    """A Python step counter, as the trainer's `steps`: the bar reads it, never a tensor."""

    def __init__(self):
        self.value = 0

    def read(self):
        assert type(self.value) is int
        return self.value


def _wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.02)
    return predicate()


def test_the_step_bar_moves_within_an_epoch_from_the_counter(monkeypatch):
    """Within one epoch (no advance), the terminal bar shows the counter's value a few times a
    second: a ResNet epoch of 8 minutes no longer sits at 0/2."""
    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=True, width=120))
    counter = _Counter()
    with console.progress(2, "resnet18 on cifar10") as bar:
        with bar.steps(469, counter.read, "epoch 1"):
            counter.value = 37
            assert _wait_for(lambda: " 37/469" in screen.getvalue()), screen.getvalue()[-400:]
            counter.value = 250
            assert _wait_for(lambda: "250/469" in screen.getvalue())
        assert bar.done == 0  # the epoch bar did not move meanwhile
        bar.advance("acc 50.00%")
    assert "1/2" in screen.getvalue()


def test_steps_without_a_terminal_start_no_thread_and_print_nothing(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=False))
    with console.progress(2, "lenet") as bar, bar.steps(10, lambda: 1 / 0, "epoch 1"):
        pass  # read() is never called
    assert screen.getvalue() == ""


def test_resumed_epochs_move_the_bar_but_not_the_rate(monkeypatch):
    """A run resumed after 8 of 10 epochs: the ETA comes from this process's epochs only, not
    from 9 epochs 'done' in the time of one."""
    lines = []
    monkeypatch.setattr(console, "info", lines.append)
    ticks = iter([100.0, 110.0, 110.0])  # start, the ETA's elapsed, the line's elapsed
    bar = console.Bar(10, "lenet on synthetic", "lines", now=lambda: next(ticks))
    bar.resumed(8)
    bar.advance("acc 1.00%")
    assert lines == ["lenet on synthetic: epoch 9/10, acc 1.00%, elapsed 0:00:10, eta 0:00:10"]


def test_a_comparisons_line_names_the_run_the_whole_and_the_runs_not_timed_yet(monkeypatch):
    lines = []
    monkeypatch.setattr(console, "info", lines.append)
    ticks = iter([0.0, 75.0])  # start, the line's elapsed (the ETA is given)
    bar = console.Bar(7, "compare (4 runs)", "lines", now=lambda: next(ticks))
    bar.advance("epoch 1/2, acc 8.57%", seconds_left=61.0, untimed=2, label="lenet, regular (run 1/4)")
    assert lines == [
        "lenet, regular (run 1/4): epoch 1/2, acc 8.57%; compare (4 runs): 1/7 epochs, "
        "elapsed 0:01:15, eta 0:01:01 + 2 runs not timed yet"
    ]


def test_a_callers_bar_without_steps_or_resumed_still_works():
    class Plain:
        def __init__(self):
            self.advances = 0

        def advance(self, status=""):
            self.advances += 1

    bar = Plain()
    console.resumed(bar, 3)
    with console.step_view(bar, 10, lambda: 0, "epoch 4"):
        pass
    assert bar.advances == 3


@pytest.mark.slow
def test_a_sigterm_stop_is_a_plain_line_not_an_error(tmp_path, forked):
    out = tmp_path / "run"
    args = ["-m", "fineprune_cli", "train", *TINY, "--epochs", "40", "--out", str(out)]
    proc = forked.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "metrics.csv").exists():  # training
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    last = err.strip().splitlines()[-1]
    assert proc.returncode == 130, err
    assert last.startswith("SIGTERM: stopped after epoch ") and not last.startswith("error:"), last
    assert "continue with: fineprune train --resume" in last
    assert summary_of(out)["status"] == "interrupted"


# --- the engine's hooks: what fit hands the bar --------------------------------------------


class StepBar:
    """A bar with a per-step view: records each epoch's (label, total, counter at the end)."""

    def __init__(self):
        self.epochs, self.advances = [], 0

    def advance(self, status=""):
        self.advances += 1

    @contextmanager
    def steps(self, total, read, label):
        assert read() == 0  # the counter starts at this epoch's first step
        yield
        assert type(read()) is int  # a Python int: reading it never syncs a device
        self.epochs.append((label, total, read()))


def test_fit_hands_the_bar_each_epochs_step_count_and_the_trainers_counter(tmp_path):
    """210 samples in batches of 50: 5 steps (the last one partial); the pruned epochs train
    fewer samples and so fewer steps. The counter read at the end equals the total."""
    from conftest import metrics_rows
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.runner import train

    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.data.subset, cfg.data.test_subset = "lenet", "synthetic", 210, 100
    cfg.train.epochs, cfg.train.batch_size, cfg.run.device, cfg.run.out = 4, 50, "cpu", str(tmp_path / "r")
    p = cfg.prune
    p.enabled, p.window, p.start, p.block, p.count, p.attenuation, p.prune_fraction = True, 2, 1, 1, 1, 1.0, 0.25
    bar = StepBar()
    train(cfg, show_progress=False, bar=bar)
    samples = [int(r["samples"]) for r in metrics_rows(tmp_path / "r")]
    assert samples[1] == 210 and samples[0] < 210
    assert bar.epochs == [(f"epoch {e}", -(-n // 50), -(-n // 50)) for e, n in enumerate(samples, 1)]
    assert bar.advances == 4


@pytest.mark.parametrize("size", [1, 2, 3])
def test_steps_in_counts_the_steps_step_slices_makes(size):
    """The bar's total per epoch: a short last batch is a step only where it gives this rank a sample."""
    from types import SimpleNamespace

    import torch

    from fineprune_cli.engine.training.trainer import Trainer
    from fineprune_cli.engine.training.world import World, step_slices

    world = World(rank=0, size=size)
    trainer = SimpleNamespace(cfg=SimpleNamespace(batch_size=6), world=world)
    for n in range(1, 40):
        assert Trainer.steps_in(trainer, n) == len(step_slices(torch.arange(n), 6, world)), n

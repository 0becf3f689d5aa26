"""`compare --script` checks the user's schedule (drivers/trainers/compressioncheck.py, issue 48): a shorter
arm whose learning rate is not regular's compressed to its epochs (a cosine with a fixed T_max) is
refused with one line as soon as a seed has both runs, before the rest of the matrix trains; one
whose T_max follows {epochs} is not."""

import math
from pathlib import Path

import pytest

from conftest import invoke, summary_of
from factories import make_run
from fineprune_cli.drivers.compare import Job
from fineprune_cli.drivers.executors.contract import Task
from fineprune_cli.drivers.trainers.compressioncheck import CompressionCheck
from fineprune_cli.errors import ConfigError

JOBS = [
    Job("cos", "folder", "regular", 0),
    Job("cos", "folder", "fine", 0),
    Job("cos", "folder", "regular", 0, None, 0.5),
]
REFUSED = r"shorter-50, seed 0: the script's learning rate is not regular's compressed to the arm's 5 epochs"


def cosine(epochs, t_max):
    return [0.05 * (1 + math.cos(math.pi * e / t_max)) for e in range(epochs)]


def _pair(root, t_max=None, lr=cosine):
    """Regular (10 epochs) and shorter-50 (5) of seed 0 as a script writes them; t_max None: each
    run's own epochs."""
    for arm, epochs in (("", 10), ("shorter-50", 5)):
        curve = lr(epochs, t_max or epochs)
        make_run(root, "cos", "regular", 0, 1.0, [50.0 + e for e in range(epochs)], arm=arm,
                 rows={e: {"lr": v} for e, v in enumerate(curve, 1)})  # fmt: skip


def test_a_pair_off_regulars_schedule_is_refused_once_it_is_complete(tmp_path):
    check = CompressionCheck(JOBS, str(tmp_path))
    _pair(tmp_path, t_max=10)
    check.after([JOBS[1]])  # fine completes no pair: nothing is read
    with pytest.raises(ConfigError, match=REFUSED) as refused:
        check.after([JOBS[2]])
    assert "T_max = epochs" in str(refused.value) and "\n" not in str(refused.value)
    task = Task("x", "cos-folder", "regular", 0, tmp_path / "x.yaml", JOBS[0].run_dir(tmp_path).resolve(), 10)
    with pytest.raises(ConfigError, match=REFUSED):  # an executor's run, found by its folder
        check.task_done(task)


def test_a_compressed_pair_or_one_that_logs_no_lr_goes_on(tmp_path):
    _pair(tmp_path / "follows")
    CompressionCheck(JOBS, str(tmp_path / "follows")).after(JOBS)
    _pair(tmp_path / "unlogged", t_max=10, lr=lambda n, t: [0.0] * n)  # the report says it was not checked
    CompressionCheck(JOBS, str(tmp_path / "unlogged")).after(JOBS)
    CompressionCheck(JOBS, str(tmp_path / "empty")).after(JOBS)  # nothing trained yet


SCRIPT = """
import argparse
import torch
import fineprune

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int)
ap.add_argument("--epochs", type=int)
ap.add_argument("--t-max", type=int, default=0)  # 0: T_max from --epochs
args = ap.parse_args()
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.t_max or args.epochs)
run = fineprune.start(num_train=100, seed=args.seed, epochs=args.epochs, classes=4, num_test=100)
for epoch in range(run.epochs):
    lr = sched.get_last_lr()[0]
    run.log(train_loss=1 / (epoch + 1) + args.seed / 1000, test_accuracy=50 + epoch + args.seed, lr=lr)
    opt.step()
    sched.step()
run.finish()
"""


def _compare(tmp_path, python, t_max, *more):
    script = tmp_path / "cos.py"
    script.write_text(SCRIPT)
    command = f"{python} {script} --seed {{seed}} --epochs {{epochs}}" + (f" --t-max {t_max}" if t_max else "")
    return invoke(["compare", "--script", command, "--epochs", "8", "--milestones", "", "--policies", "regular",
                   "--shorter", "0.5", "--seeds", "0,1", "--out", "cmp", *more])  # fmt: skip


@pytest.mark.slow  # script runs, each a process forked with torch imported
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_compare_script_refuses_a_fixed_t_max_before_the_next_seed_trains(
    tmp_path, monkeypatch, jobs, preloaded_python
):
    monkeypatch.chdir(tmp_path)
    done = _compare(tmp_path, preloaded_python, 8, *jobs)  # T_max 8 on the arm's 4 epochs: it stops at half the lr
    assert done.exit_code == 2, done.output
    said = " ".join(done.output.split())
    assert "shorter-50, seed 0: the script's learning rate is not regular's compressed" in said
    assert "T_max = epochs" in said and "Traceback" not in done.output
    runs = tmp_path / "cmp" / "cos-data"
    assert not (runs / "shorter-50-seed1").exists()  # seed 1's arm never started
    again = _compare(tmp_path, preloaded_python, 8, *jobs)  # refused before anything trains
    assert again.exit_code == 2 and "shorter-50, seed 0" in again.output
    assert not (runs / "shorter-50-seed1").exists()


@pytest.mark.slow
def test_compare_script_with_t_max_from_epochs_trains_and_reports_nothing_of_it(
    tmp_path, monkeypatch, preloaded_python
):
    monkeypatch.chdir(tmp_path)
    done = _compare(tmp_path, preloaded_python, None)
    assert done.exit_code == 0, done.output
    runs = Path("cmp") / "cos-data"
    for arm in ("regular-seed0", "regular-seed1", "shorter-50-seed0", "shorter-50-seed1"):
        assert summary_of(runs / arm)["status"] == "complete"
    report = invoke(["report", "cmp", "--out", "rep", "--no-plots"])
    assert report.exit_code == 0, report.output
    assert "Learning-rate schedules" not in (tmp_path / "rep" / "index.md").read_text()

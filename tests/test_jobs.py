"""`compare --jobs N`: runs at once in child processes, pinned to their own cores."""

import os
import signal
import subprocess
import time

import pytest

from conftest import invoke, metrics_rows, summary_of, tiny
from fineprune_cli.drivers.compare import load_compare
from fineprune_cli.drivers.executors.local import slots
from fineprune_cli.drivers.matrix import run_matrix
from fineprune_cli.drivers.parallel import RunsFailed
from fineprune_cli.engine.records.record import held
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.errors import ConfigError

CORES = len(os.sched_getaffinity(0))
TINY = tiny(test_subset=300, epochs=3, window=2, start=1, milestones=2)


def _cfg(tmp_path, name, **compare):
    cfg = build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "data.subset": 200,
            "data.test_subset": 300,
            "train.epochs": 3,
            "train.batch_size": 50,
            "train.milestones": [2],
            "run.device": "cpu",
            "prune.window": 2,
            "prune.start": 1,
        },
    )
    return cfg, load_compare(
        None, {"compare.out": str(tmp_path / name), **{f"compare.{k}": v for k, v in compare.items()}}
    )


def test_slots_split_the_cores_and_refuse_more_than_the_machine_has():
    assert slots(2, 0, [0, 1, 2, 3], None) == slots(2, 2, [0, 1, 2, 3], None)
    assert [s.cores for s in slots(2, 0, [0, 1, 2, 3], None)] == [(0, 1), (2, 3)]
    assert [s.cores for s in slots(3, 1, [4, 5, 6, 7], None)] == [(4,), (5,), (6,)]
    assert [s.gpu for s in slots(2, 1, [0, 1, 2], ["3", "5"])] == ["3", "5"]
    with pytest.raises(ConfigError, match="--jobs 3 is more than the 2 visible GPU"):
        slots(3, 0, list(range(8)), ["0", "1"])
    with pytest.raises(ConfigError, match="--jobs 5 is more than the 4 cores"):
        slots(5, 0, [0, 1, 2, 3], None)
    with pytest.raises(ConfigError, match="--jobs 2 x --threads 3 is more than the 4 cores"):
        slots(2, 3, [0, 1, 2, 3], None)


@pytest.mark.slow
@pytest.mark.skipif(CORES < 2, reason="two runs at once need two cores")
def test_a_run_beside_another_gives_the_same_metrics_as_alone(tmp_path):
    cfg, together = _cfg(tmp_path, "together", jobs=2, threads=1, policies=["regular", "fine"])
    both = run_matrix(cfg, together, show_progress=False)
    cfg, alone = _cfg(tmp_path, "alone", jobs=1, threads=1, policies=["regular", "fine"])
    single = run_matrix(cfg, alone, show_progress=False)
    for a, b in zip(both, single):
        assert summary_of(a)["status"] == summary_of(b)["status"] == "complete"
        assert metrics_rows(a, drop_timing=True) == metrics_rows(b, drop_timing=True)
        assert summary_of(a)["machine"]["concurrency"] == 2  # recorded: ran beside another
        assert "concurrency" not in summary_of(b)["machine"]  # alone: the signature of before
        assert summary_of(a)["machine"]["threads"] == summary_of(b)["machine"]["threads"] == 1
    # the fixture can tell: the pruned run differs from regular, so equal rows are not trivially equal
    assert metrics_rows(both[0], drop_timing=True) != metrics_rows(both[1], drop_timing=True)


@pytest.mark.slow
@pytest.mark.skipif(CORES < 2, reason="two runs at once need two cores")
def test_a_failing_run_is_reported_and_the_others_finish(tmp_path, capsys):
    cfg, c = _cfg(tmp_path, "cmp", jobs=2, threads=1, policies=["regular", "fine", "random"])
    blocked = tmp_path / "cmp" / "lenet-synthetic" / "fine-seed0"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the run folder goes")
    with pytest.raises(RunsFailed, match="1 of 3 runs failed"):
        run_matrix(cfg, c, show_progress=True)
    err = capsys.readouterr().err
    assert "error: lenet on synthetic, fine, seed 0: " in err and "fine-seed0" in err
    assert blocked.read_text() == "a file where the run folder goes"  # kept as it was
    for arm in ("regular", "random"):
        assert summary_of(tmp_path / "cmp" / "lenet-synthetic" / f"{arm}-seed0")["status"] == "complete"
        assert f"lenet on synthetic, {arm}, seed 0: done" in err  # one plain line per change


def test_jobs_beyond_the_machine_are_refused_in_one_line(tmp_path):
    for extra in (["--jobs", str(CORES + 1)], ["--jobs", "1", "--threads", str(CORES + 1)]):
        result = invoke(["compare", *TINY, "--out", tmp_path / "cmp", *extra])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: --jobs") and result.output.count("\n") == 1
        assert "Traceback" not in result.output
    assert not (tmp_path / "cmp").exists()  # nothing trained, no plan recorded


def test_the_grid_shows_each_run_and_a_line_per_change(tmp_path, capsys):
    from rich.console import Console

    from fineprune_cli.drivers.executors.contract import Task
    from fineprune_cli.drivers.grid import Grid

    def task(arm, seed):
        return Task(
            f"lenet on synthetic, {arm}, seed {seed}",
            "lenet-synthetic",
            arm,
            seed,
            tmp_path / f"{arm}{seed}.yaml",
            tmp_path / f"{arm}-seed{seed}",
            3,
        )

    tasks = [task(a, s) for s in (0, 1) for a in ("regular", "fine")]
    now = [0.0]
    grid = Grid(tasks, "lines", clock=lambda: now[0])
    grid.changed(tasks[0], "running")
    tasks[0].run_dir.mkdir()
    now[0] = 60.0
    (tasks[0].run_dir / "summary.json").write_text('{"epochs_completed": 2, "final_accuracy": 41.5}')
    grid.tick()
    grid.changed(tasks[1], "failed: boom (exit code 1)")
    (tasks[0].run_dir / "summary.json").write_text('{"epochs_completed": 3, "final_accuracy": 47.25}')
    grid.changed(tasks[0], "done")
    err = capsys.readouterr().err.splitlines()
    # 2 epochs in 60 s: 30 s an epoch for the 10 left (1 running, 3 queued runs of 3), 7 once one
    # failed; then 3 epochs in 60 s: 20 s for each of the 6 left
    assert err == [
        "lenet on synthetic, regular, seed 0: running epoch 0/3 (0/4 runs finished, elapsed 0:00:00, eta -:--:--)",
        "lenet on synthetic, regular, seed 0: running epoch 2/3, acc 41.50% (0/4 runs finished, elapsed 0:01:00, "
        "eta 0:05:00)",
        "error: lenet on synthetic, fine, seed 0: boom (exit code 1)",
        "lenet on synthetic, fine, seed 0: failed (1/4 runs finished, elapsed 0:01:00, eta 0:03:30)",
        "lenet on synthetic, regular, seed 0: done, acc 47.25% (2/4 runs finished, elapsed 0:01:00, eta 0:02:00)",
    ]
    # a line that names its run already (a script's failure, as its child says it) names it once (issue 57)
    grid.changed(tasks[3], "failed: lenet on synthetic, fine, seed 1: the script failed: x (exit code 1)")
    said = capsys.readouterr().err.splitlines()[0]
    assert said == "error: lenet on synthetic, fine, seed 1: the script failed: x (exit code 1)"
    console = Console(width=120, record=True)
    console.print(grid.table())
    shown = console.export_text()
    assert "seed 0" in shown and "seed 1" in shown and "failed" in shown and "queued" in shown


def test_the_grid_gives_the_whole_plans_eta_under_jobs_too(tmp_path, capsys):
    """Issue 49: `--until-decided` under --jobs gave the look's ETA only. The later looks' epochs
    (here 12) are counted at the pace measured, beside the look's own ETA."""
    from fineprune_cli.drivers.executors.contract import Task
    from fineprune_cli.drivers.grid import Grid

    tasks = [
        Task(
            "lenet on synthetic, regular, seed 0",
            "lenet-synthetic",
            "regular",
            0,
            tmp_path / "r.yaml",
            tmp_path / "regular-seed0",
            3,
        )
    ]
    now = [0.0]
    grid = Grid(tasks, "lines", clock=lambda: now[0], later=(12, "looks 2-3"))
    grid.changed(tasks[0], "running")
    tasks[0].run_dir.mkdir()
    now[0] = 60.0
    (tasks[0].run_dir / "summary.json").write_text('{"epochs_completed": 2, "final_accuracy": 41.5}')
    grid.tick()
    # 30 s an epoch: 1 epoch left in this look (0:00:30), 12 more in the later ones (6:00 more)
    assert capsys.readouterr().err.splitlines()[-1].endswith("eta 0:00:30 (this look); up to 0:06:30 with looks 2-3)")
    assert Grid(tasks, "off").plan_eta() == ""  # no later looks: the look's ETA alone


def _epochs_done(run):
    try:
        return summary_of(run)["epochs_completed"]
    except (OSError, ValueError, KeyError):  # not written yet, or being replaced
        return 0


@pytest.mark.slow
@pytest.mark.skipif(CORES < 2, reason="two runs at once need two cores")
@pytest.mark.parametrize("ctrl_c", [False, True], ids=["sigterm-to-compare", "ctrl-c-to-the-group"])
def test_a_stop_to_compare_jobs_stops_its_runs_after_their_epoch_in_one_line(tmp_path, ctrl_c, forked):
    """SIGTERM to `compare --jobs 2` killed it with no line and left its runs training on their
    own; Ctrl-C ended it with exit 130 and nothing said. Both: the runs stop after their epoch,
    one line says so, and `compare` again resumes them."""
    out = tmp_path / "cmp"
    args = ["-m", "fineprune_cli", "compare", *tiny(subset=300, test_subset=100, epochs=25)]
    args += ["--policies", "regular,fine", "--jobs", "2", "--threads", "1", "--out", str(out)]
    runs = [out / "lenet-synthetic" / f"{arm}-seed0" for arm in ("regular", "fine")]
    proc = forked.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not all(_epochs_done(r) >= 1 for r in runs):
        time.sleep(0.05)  # both runs have recorded an epoch: both in their loops
    assert proc.poll() is None, proc.communicate()
    if ctrl_c:  # the terminal sends it to the foreground group: compare's, not its runs'
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    sig = "SIGINT" if ctrl_c else "SIGTERM"
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == f"{sig}: stopped 2 runs after their epoch; compare again to continue", err
    assert "Traceback" not in err and "error:" not in err
    for run in runs:  # stopped, not left training: their locks are free and they say so
        assert not held(run) and summary_of(run)["status"] == "interrupted"
        assert (run / "checkpoint.pt").exists() and summary_of(run)["epochs_completed"] < 25
    stopped_at = [summary_of(r)["epochs_completed"] for r in runs]
    again = forked.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    for run, epochs in zip(runs, stopped_at):
        assert summary_of(run)["status"] == "complete"
        assert summary_of(run)["resumed_after_epochs"] == [epochs]  # resumed, not trained again


def test_a_ctrl_c_outside_a_training_loop_is_one_line_and_exit_130(monkeypatch):
    """typer turned a KeyboardInterrupt from a command into a silent exit 130."""
    from fineprune_cli.cli import views

    def pressed(as_json):
        raise KeyboardInterrupt

    monkeypatch.setattr(views, "show_policies", pressed)
    result = invoke(["policies"])
    assert result.exit_code == 130 and result.output == "interrupted\n", result.output


def test_a_run_killed_by_a_signal_says_which_and_why_it_may_have_come(tmp_path):
    """'exit code -9' dropped the cause: the kernel's OOM killer sends SIGKILL."""
    from fineprune_cli.drivers.executors.local import last_error

    log = tmp_path / "run.log"
    log.write_text("lenet on synthetic: epoch 3/40\n")
    assert last_error(log, -9) == (
        "lenet on synthetic: epoch 3/40 (killed by SIGKILL (signal 9); perhaps out of memory "
        f"(the kernel's OOM killer sends it); log: {log})"
    )
    assert "killed by SIGSEGV (signal 11);" in last_error(log, -11)
    assert "(exit code 1; " in last_error(log, 1)


def test_a_preempted_slurm_task_says_preempted_not_failed_during_processing():
    """SIGTERM alone (no signal before the kill) stops the run after its epoch: submitit reports
    that as 'failed during processing', which the line repeated."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from fineprune_cli.drivers.executors.slurmjobs import failure_line

    trace = (
        "Job (task=1) failed during processing with trace:\n----------------------\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "fineprune_cli.engine.training.checkpoint.Stopped: SIGTERM: stopped after epoch 2 of 4; continue with: "
        "fineprune train --resume out/lenet-synthetic/fine-seed0\n----------------------\n"
        "You can check full logs with 'job.stderr(1)'"
    )
    assert failure_line(FailedJobError(trace)) == (
        "preempted by Slurm (or cancelled) (SIGTERM: stopped after epoch 2 of 4); "
        "`compare` again resumes it from its checkpoint"
    )
    gone = UncompletedJobError("Job 4000_1 (task: 0) with path x.pkl\nhas not produced any output (state: PREEMPTED)")
    assert failure_line(gone).startswith("preempted by Slurm (or cancelled); ")
    crashed = "Job (task=0) failed during processing with trace:\n---\nValueError: bad pixels\n---"
    assert failure_line(FailedJobError(crashed)) == "bad pixels"


BETWEEN_RUNS = """
import os, signal, sys
from fineprune_cli.cli import main
from fineprune_cli.drivers import matrix
real, calls = matrix.train_job, []
def train_job(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:  # the first run finished, the second not yet begun: no training loop's stop
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
matrix.train_job = train_job
sys.argv = ["fineprune", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_a_sigterm_between_the_runs_of_a_one_job_compare_is_one_line(tmp_path, forked):
    """Between two runs no training loop holds SIGTERM, and its default action ended compare
    with no line (exit -15); now it ends as Ctrl-C does there, and compare again continues."""
    out = tmp_path / "cmp"
    args = ["compare", *tiny(), "--policies", "regular,fine", "--out", str(out)]
    result = forked.run(["-c", BETWEEN_RUNS, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "interrupted; compare again to continue", result.stderr
    assert summary_of(out / "lenet-synthetic" / "regular-seed0")["status"] == "complete"
    assert not (out / "lenet-synthetic" / "fine-seed0").exists()


def test_an_executors_notes_come_after_its_refusal_and_before_its_tasks(monkeypatch, capsys):
    # run_matrix hands run_tasks the arms it names (fine as its random control); they are said once
    # the executor is found. Catches: a note printed above a refusal's one line, or not at all.
    from fineprune_cli.drivers import parallel
    from fineprune_cli.drivers.executors import local

    c = load_compare(None, {"compare.jobs": 2})
    monkeypatch.setattr(parallel, "write_tasks", lambda *args: [])
    monkeypatch.setattr(local, "local_executor", lambda cfg, c: object())
    parallel.run_tasks(build_config(None, {}), c, [], None, False, notes=["lenet on synthetic, fine: named"])
    assert capsys.readouterr().err == "lenet on synthetic, fine: named\n"

    def refuse(cfg, c):
        raise ConfigError("--jobs 2 is more than this machine has")

    monkeypatch.setattr(local, "local_executor", refuse)
    with pytest.raises(ConfigError):
        parallel.run_tasks(build_config(None, {}), c, [], None, False, notes=["lenet on synthetic, fine: named"])
    assert capsys.readouterr().err == ""

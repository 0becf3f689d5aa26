"""Starting multi-process runs: settings refused before any data is loaded, signals passed on
to the launcher, a rank's real error in torchrun's report."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import free_port, invoke, tiny
from fineprune_cli import cli, runner
from fineprune_cli.distributed import launch
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.errors import ConfigError


def _cfg(mode="sync", batch=128, group=2):
    cfg = Config()
    cfg.run.dist_mode, cfg.train.batch_size, cfg.run.group_size = mode, batch, group
    return cfg


@pytest.mark.parametrize(
    "mode, size, batch, group, refused",
    [
        ("sync", 3, 128, 2, "over 3 processes"),
        ("sync", 4, 128, 2, None),
        ("sync", 1, 7, 2, None),
        ("async", 3, 127, 2, None),  # every worker trains whole batches of its own
        ("mixed", 3, 63, 2, "group of 2 workers"),  # workers 1+2: 63 does not split in two
        ("mixed", 4, 64, 2, None),  # workers 1+2, then 3 alone
        ("mixed", 5, 64, 3, "group of 3 workers"),  # workers 1-3, then 4 alone
    ],
)
def test_batch_size_checks_of_a_parallel_run(mode, size, batch, group, refused):
    if refused is None:
        launch.check_parallel(_cfg(mode, batch, group), size)
    else:
        with pytest.raises(ConfigError, match=refused):
            launch.check_parallel(_cfg(mode, batch, group), size)


def test_nproc_with_an_uneven_batch_is_refused_before_any_data_or_process(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "relaunch", lambda *a: pytest.fail("launched anyway"))
    # an empty --data-dir: loading the data would fail with another message
    base = [
        "train",
        "--model",
        "lenet",
        "--dataset",
        "fashion-mnist",
        "--data-dir",
        tmp_path,
        "--device",
        "cpu",
        "--out",
        tmp_path / "run",
    ]
    result = invoke([*base, "--nproc-per-node", "3", "--batch-size", "128"])
    assert result.exit_code == 2 and "--batch-size 128 must divide evenly over 3" in result.output
    result = invoke([*base, "--nproc-per-node", "3", "--dist-mode", "mixed", "--batch-size", "63"])
    assert result.exit_code == 2 and "mixed group of 2" in result.output
    assert list(tmp_path.iterdir()) == []


CHILD = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(20)
"""


@pytest.mark.slow
def test_sigterm_to_the_outer_process_reaches_the_launcher(tmp_path):
    mark = tmp_path / "child"
    outer = (
        "import sys; from fineprune_cli.distributed.launch import call_forwarding_signals as call; "
        f"sys.exit(call([sys.executable, '-c', {CHILD!r}, {str(mark)!r}]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", outer])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "child.ready").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the child never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7  # the child's own exit code comes back
        assert mark.read_text() == "SIGTERM"
    finally:
        proc.kill()


def test_a_ranks_uncaught_error_goes_to_torchruns_error_file(tmp_path, monkeypatch):
    """@record on the entry point: torchrun reports the rank's error, not just an exit code."""

    def boom(*args, **kwargs):
        raise RuntimeError("NCCL went away")

    monkeypatch.setattr(runner, "train", boom)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    monkeypatch.setattr(sys, "argv", ["fineprune", "train", "--model", "lenet", "--dataset", "synthetic"])
    with pytest.raises(RuntimeError):
        cli.main()
    report = json.loads((tmp_path / "error.json").read_text())
    assert report["message"]["message"] == "RuntimeError: NCCL went away"


def test_max_restarts_goes_to_torchrun_and_every_attempt_writes_one_named_folder(monkeypatch):
    """--max-restarts is torchrun's, not the ranks'; without --out the launcher names the run
    folder once, so a restarted rank finds the folder its first attempt wrote."""
    launched = []
    monkeypatch.setattr(launch, "call_forwarding_signals", lambda cmd: launched.append(cmd) or 0)
    args = ["train", "--model", "lenet", "--dataset", "synthetic", "--nproc-per-node", "2", "--max-restarts", "3"]
    monkeypatch.setattr(sys, "argv", ["fineprune", *args])
    assert invoke(args).exit_code == 0
    cmd = launched[0]
    launcher, ranks = cmd[: cmd.index("-m", 3)], cmd[cmd.index("--") + 1 :]
    assert launcher[launcher.index("--max-restarts") + 1] == "3"
    assert "--max-restarts" not in ranks and "--nproc-per-node" not in ranks
    out = ranks[ranks.index("--out") + 1]
    assert out.startswith("results/runs/") and out.endswith("-lenet-synthetic")


def test_a_resume_with_nproc_goes_to_torchrun_as_the_resume_alone(tmp_path, monkeypatch):
    """`train --resume RUN --nproc-per-node 4`: torchrun starts 4 processes of `train --resume
    RUN` (each continues the folder in its saved mode: test_paramserver's resume after SIGKILL)."""
    launched = []
    monkeypatch.setattr(launch, "call_forwarding_signals", lambda cmd: launched.append(cmd) or 0)
    args = ["train", "--resume", str(tmp_path / "run"), "--nproc-per-node", "4"]
    monkeypatch.setattr(sys, "argv", ["fineprune", *args])
    assert invoke(args).exit_code == 0
    cmd = launched[0]
    launcher, ranks = cmd[: cmd.index("-m", 3)], cmd[cmd.index("--") + 1 :]
    assert launcher[1:3] == ["-m", "fineprune_cli.distributed.torchrun"]
    assert launcher[launcher.index("--nproc-per-node") + 1] == "4"
    assert ranks == ["train", "--resume", str(tmp_path / "run")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nproc-per-node", "2", "--max-restarts", "-1"], "--max-restarts must be"),
        (["--max-restarts", "1"], "--max-restarts needs --nproc-per-node"),
    ],
)
def test_bad_max_restarts_is_one_line(args, message, monkeypatch):
    monkeypatch.setattr(launch, "call_forwarding_signals", lambda cmd: pytest.fail("launched anyway"))
    result = invoke(["train", "--model", "lenet", "--dataset", "synthetic", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def _folder(tmp_path, cfg, *files):
    """A run folder as a first attempt leaves it: config.yaml of `cfg` and `files`."""
    import yaml

    from fineprune_cli.engine.setup.config import validate

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(validate(cfg).to_dict(), sort_keys=False))
    for name in files:
        (tmp_path / name).write_text("{}")
    return tmp_path


def _run_cfg(out, **train):
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.run.out = "lenet", "synthetic", str(out)
    for key, value in train.items():
        setattr(cfg.train, key, value)
    return cfg


def test_a_restarted_rank_continues_its_own_checkpointed_folder_only(tmp_path):
    run = tmp_path / "run"
    first, restart = {}, {"TORCHELASTIC_RESTART_COUNT": "1"}
    cfg = _run_cfg(run)
    _folder(run, cfg, "summary.json", "checkpoint.pt")
    assert launch.restarted(cfg, restart, main=True) == run
    assert launch.restarted(cfg, first, main=True) is None  # a first start never resumes
    assert launch.restarted(_run_cfg(run, lr=0.05), restart, main=True) is None  # another run's folder
    assert (run / "summary.json").exists()  # left to the fresh start to refuse
    assert launch.restarted(_run_cfg(tmp_path / "none"), restart, main=True) is None  # died before any record


def test_a_restarted_rank_without_a_checkpoint_starts_afresh_in_its_folder(tmp_path):
    cfg = _run_cfg(tmp_path / "run")
    run = _folder(tmp_path / "run", cfg, "summary.json", "metrics.csv")
    restart = {"TORCHELASTIC_RESTART_COUNT": "2"}
    assert launch.restarted(cfg, restart, main=False) is None
    assert (run / "summary.json").exists()  # only the main rank clears
    assert launch.restarted(cfg, restart, main=True) is None
    assert not (run / "summary.json").exists() and not (run / "metrics.csv").exists()
    assert (run / "config.yaml").exists()


def _descendants(pid):
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out, todo = out + kids, todo + kids
    return out


def _rank_pid(launcher_pid, rank):
    """The process of torchrun's first attempt that is `rank`."""
    want = {f"RANK={rank}".encode(), b"TORCHELASTIC_RESTART_COUNT=0"}
    for pid in _descendants(launcher_pid):
        try:
            env = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if want <= env:
            return pid
    return None


@pytest.mark.slow
def test_a_rank_killed_under_max_restarts_resumes_from_the_checkpoint_and_completes(tmp_path, forked):
    out, epochs = tmp_path / "run", 3
    cmd = [  # forked: the command that starts torchrun (torchrun and its ranks are new interpreters)
        "-m",
        "fineprune_cli",
        "train",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        *tiny(subset=4096, test_subset=200, epochs=epochs, batch_size=64),
        "--out",
        str(out),
        "--json",
    ]
    env = dict(os.environ, MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    proc = forked.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while not (out / "checkpoint.pt").exists():  # epoch 1 is checkpointed
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.05)
        victim = _rank_pid(proc.pid, 1)
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["epochs_completed"] == epochs
    assert len(summary["resumed_after_epochs"]) == 1 and 1 <= summary["resumed_after_epochs"][0] < epochs
    assert stdout.count('"status": "complete"') == 1


@pytest.mark.slow
def test_a_signal_to_the_launcher_ends_it_in_one_line(tmp_path, forked):
    """torchrun turned SIGTERM into a SignalException traceback and exit 1, though its ranks
    stopped cleanly (`make gpu`'s time limit and every scheduler stop SIGTERM it). The
    launcher is forked from the fork server (torch imported): a real process, signalled."""
    ready = tmp_path / "ready"
    rank = f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    proc = forked.popen(
        [
            "-m",
            "fineprune_cli.distributed.torchrun",
            "--standalone",
            "--nproc-per-node",
            "1",
            "--no-python",
            sys.executable,
            "-c",
            rank,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the rank never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert "torchrun: stopped by SIGTERM" in err


def test_the_launcher_is_torchrun_behind_that_one_line(monkeypatch):
    launched = []
    monkeypatch.setattr(launch, "call_forwarding_signals", lambda cmd: launched.append(cmd) or 0)
    launch.relaunch(["train", "--model", "lenet"], 2, None, None, None)
    assert launched[0][1:3] == ["-m", "fineprune_cli.distributed.torchrun"]

"""A `compare --script` run's report describes the script's runs as what they are: no paper rows
for a script named after a paper model, the script's own version as the code, commands that make
each run again with its arm, and the saving on the user's clock beside the training-time saving."""

import subprocess
import sys
import time
from types import SimpleNamespace

import fineprune
import torch

from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.drivers.compare import Job, job_config
from fineprune_cli.engine.setup import yamlvalues
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.harness import COMMAND_ENV, JOB_ENV, RUN_DIR_ENV
from fineprune_cli.harness import run as harness_run
from fineprune_cli.harness.version import script_version

COMPARE = "fineprune compare --script 'python main.py --seed {seed}' --policies regular,fine --seeds 0"


class Clock:
    """perf_counter for the harness: each epoch's training, then its test pass, as told."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _script_run(tmp_path, monkeypatch, clock, policy, seed, train_s, test_s):
    """One run of a script 'main.py' as compare runs it: train_s seconds of training and test_s
    of testing each epoch, the script reporting its training time (train_seconds=)."""
    cfg = Config()
    cfg.script.command, cfg.train.epochs, cfg.train.milestones = "python main.py --seed {seed}", 4, []
    cfg.prune.start_epoch, cfg.prune.window = 1, 2
    job_cfg = job_config(cfg, Job("lenet", "cifar10-jpeg", policy, seed), str(tmp_path / "cmp"))
    path = tmp_path / f"{policy}-{seed}.yaml"
    path.write_text(yamlvalues.dump(job_cfg.to_dict()))
    monkeypatch.setenv(JOB_ENV, str(path))
    monkeypatch.setenv(RUN_DIR_ENV, job_cfg.run.out)
    monkeypatch.setenv(COMMAND_ENV, COMPARE)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "main.py"), "--seed", str(seed)])
    run = fineprune.start(num_train=100, seed=seed, epochs=4)
    sampler = run.sampler()  # a pruning policy acts only through it: an epoch not drawn from it fails
    for epoch in range(4):
        sampler.set_epoch(epoch)
        sampler.loss(torch.arange(100), torch.ones(100))
        seconds = train_s(epoch)
        clock.now += seconds + test_s
        run.log(train_loss=1.0, test_accuracy=50.0 + epoch, samples=100, train_seconds=seconds)
    run.finish()


def _report(tmp_path, monkeypatch):
    clock = Clock()
    # the CPU clock as the wall clock: the script had its core to itself
    monkeypatch.setattr(
        harness_run, "time", SimpleNamespace(perf_counter=clock, process_time=clock, strftime=time.strftime)
    )
    (tmp_path / "main.py").write_text("print('a training script')\n")
    for seed in (0, 1):
        _script_run(tmp_path, monkeypatch, clock, "regular", seed, lambda e: 6.0, 4.0)
        _script_run(tmp_path, monkeypatch, clock, "fine", seed, lambda e: 6.0 if e % 2 else 0.0, 4.0)
    write_report([tmp_path / "cmp"], tmp_path / "report", with_plots=False)
    return (tmp_path / "report" / "index.md").read_text()


def test_a_script_named_after_a_paper_model_gets_no_paper_rows(tmp_path, monkeypatch):
    index = _report(tmp_path, monkeypatch)
    tables = index.split("## Table 1", 1)[1]
    assert "| Paper " not in tables and "Paper rows" not in tables


def test_the_code_is_the_scripts_version_and_each_run_is_made_again_with_its_arm(tmp_path, monkeypatch):
    index = _report(tmp_path, monkeypatch)
    digest = script_version(tmp_path / "main.py")
    assert digest.startswith("main.py, sha256 ")
    assert f"Code: the script {digest} (run by fineprune " in index
    made = index.split("Made with:", 1)[1]
    assert f"    {COMPARE}\n" in made  # compare's command names the arms the script's line lacks
    alone = f"FINEPRUNE_JOB=<its folder>/config.yaml FINEPRUNE_RUN_DIR=<a new folder> {sys.executable} {tmp_path / 'main.py'} --seed 1"
    assert alone in made


def test_a_script_in_a_git_work_tree_is_named_by_its_commit(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "main.py").write_text("print(1)\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "main.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert script_version(tmp_path / "main.py") == f"main.py at git commit {commit}"
    (tmp_path / "models.py").write_text("x = 1\n")  # untracked beside it: not the script's code
    assert script_version(tmp_path / "main.py") == f"main.py at git commit {commit}"
    subprocess.run([*git, "add", "models.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "y"], check=True)
    commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "models.py").write_text("x = 2\n")  # a module it may import changed
    assert script_version(tmp_path / "main.py").startswith(f"main.py at git commit {commit}, changed since")
    subprocess.run([*git, "checkout", "-q", "models.py"], check=True)
    (tmp_path / "main.py").write_text("print(2)\n")  # the commit alone would name another script
    assert script_version(tmp_path / "main.py").startswith(f"main.py at git commit {commit}, changed since (sha256 ")
    assert script_version("-c") == ""


def test_the_report_gives_the_saving_on_the_users_clock_beside_the_training_saving(tmp_path, monkeypatch):
    """Half the training left out is 30% of a clock on which the test passes take 40%."""
    index = _report(tmp_path, monkeypatch)
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in index.splitlines()
        if line.startswith("| ") and "saved" in line
    }
    assert rows["fine-pruning: saved (same machine)"] == "50.00 ± 0.00%"
    assert rows["fine-pruning: whole run saved (same machine, test passes included)"] == "30.00 ± 0.00%"


def test_edited_script_records_read_as_not_recorded_not_a_traceback(tmp_path, monkeypatch):
    import json

    _report(tmp_path, monkeypatch)
    for run in (tmp_path / "cmp").glob("*/fine-seed*"):
        data = json.loads((run / "summary.json").read_text())
        data.update(script_version={"a": 1}, compare_command=5, wall_seconds=float("inf"))
        (run / "summary.json").write_text(json.dumps(data))
    write_report([tmp_path / "cmp"], tmp_path / "again", with_plots=False)
    index = (tmp_path / "again" / "index.md").read_text()
    assert "its version not recorded" in index and f"    {COMPARE}\n" in index
    assert "| fine-pruning: whole run saved (same machine, test passes included) | not recorded |" in index

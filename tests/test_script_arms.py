"""A `compare --script` run's shorter arms pair with its regular runs (issue 55): a script run's
config.yaml lists only what a script uses, so the report's grouping must not fill in the trainer's
default warm-up (1.0) and then demand 0.8 of a shorter-20 arm; it describes each arm only by the
settings the run had. The runs here are written by the harness itself (`fineprune.start()`, as a
script under compare calls it, from the job config compare writes)."""

import sys

import fineprune
import pytest
import torch

from fineprune_cli.analysis.group.groups import group, settings
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.drivers.compare import Job, job_config
from fineprune_cli.engine.setup import yamlvalues
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.harness import JOB_ENV, RUN_DIR_ENV

EPOCHS, MILESTONES = 10, [5, 8]


def _script_run(tmp_path, monkeypatch, job, accuracy):
    """One run of a script 'train.py' as compare --script runs it: its lr halves at each milestone."""
    cfg = Config()
    cfg.script.command = "python train.py --seed {seed} --epochs {epochs} --milestones {milestones}"
    cfg.train.epochs, cfg.train.milestones = EPOCHS, MILESTONES
    job_cfg = job_config(cfg, job, str(tmp_path / "runs"))
    path = tmp_path / f"{job.arm}-{job.seed}.yaml"
    path.write_text(yamlvalues.dump(job_cfg.to_dict()))
    monkeypatch.setenv(JOB_ENV, str(path))
    monkeypatch.setenv(RUN_DIR_ENV, job_cfg.run.out)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "train.py")])
    t = job_cfg.train
    run = fineprune.start(num_train=100, seed=job.seed, epochs=t.epochs, milestones=t.milestones, num_test=100)
    sampler, losses = run.sampler(), torch.rand(100, generator=torch.Generator().manual_seed(job.seed))
    for epoch in range(t.epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(iter(sampler)))
        sampler.loss(idx, losses[idx])
        samples = len(idx)
        lr = 0.1 * 0.5 ** sum(epoch >= m for m in t.milestones)
        run.log(train_loss=1.0 / (epoch + 1), test_accuracy=accuracy - (t.epochs - 1 - epoch), lr=lr, samples=samples)
    run.finish()


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Seeds 0-2 of regular, fine, random, shorter-10 and shorter-20 ('train' on 'data')."""
    (tmp_path / "train.py").write_text("print('a training script')\n")
    for seed in range(3):
        _script_run(tmp_path, monkeypatch, Job("train", "data", "regular", seed), 80.0 + seed)
        _script_run(tmp_path, monkeypatch, Job("train", "data", "fine", seed), 80.0 + seed)
        _script_run(tmp_path, monkeypatch, Job("train", "data", "random", seed), 79.0 + seed)
        for budget in (0.1, 0.2):
            _script_run(tmp_path, monkeypatch, Job("train", "data", "regular", seed, shorter=budget), 78.0 + seed)
    return tmp_path / "runs"


def test_a_script_runs_settings_are_only_those_it_recorded(runs):
    found = {r.policy: settings(r) for r in load_runs([runs])[0]}
    assert "train.warmup_epochs" not in found["shorter-20"] and "train.lr" not in found["regular"]
    assert found["shorter-20"]["train.epochs"] == 8 and found["shorter-20"]["train.milestones"] == [4, 6]


def test_its_shorter_arms_meet_its_regular_and_are_named_by_nothing_they_lacked(runs):
    """Catches the trainer's default warm-up filled in: the arms were a context of their own,
    'no regular run whose schedule shorter-20 scales', named 'warmup_epochs 1.0'."""
    (context,) = group(load_runs([runs])[0])  # one context: every arm judged against regular
    assert not context.variant
    by = group(load_runs([runs])[0])[context]
    assert set(by) == {"regular", "fine", "random", "shorter-10", "shorter-20"}


def test_the_decisions_read_c_p_from_the_shorter_arms(runs, tmp_path):
    report = write_report([runs], tmp_path / "report", with_plots=False)
    (decision,) = report.study.decisions
    assert decision.cheap is not None and decision.cheap.against.startswith("training fewer epochs")
    assert decision.cheap.arms == ("shorter-10", "shorter-20") and sorted(decision.cheap.diffs) == [0, 1, 2]
    index = (tmp_path / "report" / "index.md").read_text()
    table = index.split("## Decisions", 1)[1].split("\n- **", 1)[0]
    assert "| fewer epochs |" in table
    assert "warmup_epochs" not in index and "no regular run whose schedule" not in index
    assert "compare --shorter" not in index  # no advice to add the arms it was given

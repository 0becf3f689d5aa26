"""The runs a report leaves out, named in their rows (`analysis.read.leftout`, `analysis.decide.leftout`, `analysis.render.leftout`), and two records of one
run given to one report (`analysis.render.report.repeats`): no seed vanishes from a decision without a
word, a policy with diverged runs is not decided on the rest, and two different records of one
seed are refused rather than one kept by its path."""

import shutil

import pytest

from factories import make_run
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.errors import ConfigError

ACCS = {0: [50.0, 60.0, 70.0], 1: [51.0, 61.0, 71.0], 2: [50.0, 62.0, 72.0]}


def _context(root, diverged=(), implausible=()):
    """regular and fine over seeds 0-2; fine's `diverged` seeds diverged at epoch 2."""
    for seed, accs in ACCS.items():
        make_run(root, "lenet", "regular", seed, 9.0, accs)
        status = "diverged" if seed in diverged else "complete"
        summary = {"diverged_epoch": 2, "epochs_completed": 2} if seed in diverged else None
        rows = {3: {"test_accuracy": 250.0}} if seed in implausible else None
        make_run(root, "lenet", "fine", seed, 8.0, [a - 0.1 for a in accs], skipped_epochs=(2,), status=status,
                 summary=summary, rows=rows)  # fmt: skip


def _fine_row(report):
    rows = [r for r in report.verdict.rows if r[0].startswith("fine-pruning")]
    assert len(rows) == 1, report.verdict.rows
    return rows[0]


def test_every_run_of_a_policy_diverged_gets_its_row_saying_why(tmp_path):
    _context(tmp_path / "runs", diverged=(0, 1, 2))
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    word = _fine_row(report)[-1]
    assert word.startswith("can't tell yet (no run to judge") and "seed 0 diverged" in word and "seed 2" in word
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "its loss stopped being finite at epoch 2" in index


def test_a_policy_with_one_diverged_run_is_not_decided_on_the_rest(tmp_path):
    _context(tmp_path / "runs", diverged=(1,))
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    word = _fine_row(report)[-1]
    assert word.startswith("can't tell yet (runs left out: seed 1 diverged") and "not judged on the rest" in word
    assert "seed 1 diverged" in (tmp_path / "rep" / "index.md").read_text()


def test_a_run_left_out_as_implausible_is_named_in_its_row(tmp_path):
    _context(tmp_path / "runs", implausible=(2,))
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    assert "runs left out: seed 2 implausible" in _fine_row(report)[-1]


def test_rows_without_left_out_runs_read_as_before(tmp_path):
    _context(tmp_path / "runs")
    report = write_report([tmp_path / "runs"], tmp_path / "rep", with_plots=False)
    assert "left out" not in _fine_row(report)[-1]


def test_one_seed_from_two_machines_with_different_results_is_refused_naming_both(tmp_path):
    make_run(tmp_path / "m1", "lenet", "regular", 0, 9.0, [50.0, 60.0])
    make_run(tmp_path / "m2", "lenet", "regular", 0, 7.0, [50.0, 61.0])
    with pytest.raises(
        ConfigError, match=r"regular seed 0 is recorded twice with different results, in .*m1.* and .*m2"
    ):
        write_report([tmp_path / "m1", tmp_path / "m2"], tmp_path / "rep", with_plots=False)


def test_identical_records_of_one_seed_are_kept_once_saying_so(tmp_path):
    first = make_run(tmp_path / "m1", "lenet", "regular", 0, 9.0, [50.0, 60.0])
    make_run(tmp_path / "m2", "lenet", "regular", 0, 7.0, [50.0, 60.0])  # another machine's times
    shutil.copytree(first.parent, tmp_path / "m3" / first.parent.name)
    report = write_report([tmp_path / "m1", tmp_path / "m2", tmp_path / "m3"], tmp_path / "rep", with_plots=False)
    assert len(report.runs) == 1 and [p.status for p in report.problems] == ["duplicate", "duplicate"]
    assert "an identical record of the run in" in (tmp_path / "rep" / "index.md").read_text()


DIVERGING = """import os, sys
import torch
import fineprune
seed, epochs = int(sys.argv[1]), int(sys.argv[2])
run = fineprune.start(num_train=8, seed=seed, epochs=epochs)
sampler = run.sampler()
for e in range(run.epochs):
    sampler.set_epoch(e)
    idx = torch.tensor(list(sampler))
    sampler.loss(idx, torch.ones(len(idx)))
    lost = os.environ['P'] != 'regular' and seed == 0
    run.log(train_loss=float('nan') if lost else 1.0 / (e + 1 + seed), test_accuracy=50.0 + e + seed)
run.finish()
"""


@pytest.mark.slow  # four runs of a script, each a process importing torch
def test_planned_looks_train_no_more_seeds_of_a_policy_whose_runs_diverged(tmp_path, monkeypatch):
    import sys

    from conftest import invoke

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text(DIVERGING)
    command = f"env P={{policy}} {sys.executable} s.py {{seed}} {{epochs}}"
    done = invoke(["compare", "--script", command, "--epochs", "2", "--milestones", "", "--policies", "regular,fine",
                   "--window", "2", "--start", "1", "--until-decided", "--looks", "2,3", "--out", "cmp"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "seeds 0 diverged; more seeds cannot decide it" in done.output
    runs = sorted(p.name for p in (tmp_path / "cmp" / "s-data").iterdir())
    assert runs == ["fine-seed0", "fine-seed1", "regular-seed0", "regular-seed1"]  # no look 2
    assert "runs left out: seed 0 diverged" in done.output

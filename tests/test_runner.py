"""The front door of a run (fineprune_cli/runner.py): a lone process never passes through
distributed/, a launched one does; the config is validated once, where it is built; a run
whose last checkpoint is its final epoch is finished on resume without training again."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import invoke, metrics_rows, tiny, tiny_config
from fineprune_cli import runner
from fineprune_cli.engine.records.record import RunRecord, Status, read_summary
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.engine.training.world import SINGLE, World

LAUNCH_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    runner.RESTART_COUNT,
)
TINY = tiny(subset=64, test_subset=32, batch_size=32, milestones="")


def _cfg(out, **extra):
    small = {"data.subset": 64, "data.test_subset": 32, "train.batch_size": 32, "train.milestones": []}
    return tiny_config(out, **small, **extra)


@pytest.mark.slow
def test_a_single_process_train_imports_nothing_of_distributed(tmp_path):
    """`fineprune train` in one process, as a user runs it: the run completes and not one
    module of fineprune_cli.distributed was imported."""
    script = (
        "import sys\nfrom fineprune_cli.cli import main\n"
        f"sys.argv = ['fineprune', 'train', *{TINY!r}, '--out', {str(tmp_path / 'run')!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('DISTRIBUTED', sorted(m for m in sys.modules if m.startswith('fineprune_cli.distributed')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DISTRIBUTED []" in done.stdout, done.stdout[-2000:]
    assert read_summary(tmp_path / "run").status == Status.COMPLETE


def test_the_front_door_imports_distributed_only_inside_the_launched_path():
    """The static half of the rule above: no module-level import of distributed/ in the
    runner (the engine below it cannot import it at all: tests/test_layers.py)."""
    tree = ast.parse(Path(runner.__file__).read_text())
    top = [n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert "engine.training.session" in top  # the walk sees the runner's real imports
    assert not [m for m in top if "distributed" in m], top


def test_a_process_is_launched_under_torchrun_even_alone_or_as_a_rank():
    assert not runner.launched(SINGLE, {})
    assert runner.launched(SINGLE, {runner.RESTART_COUNT: "0"})  # torchrun --nproc-per-node 1
    assert runner.launched(World(1, 2), {})  # a rank of a 2-process srun step


def test_a_lone_process_skips_the_launch_checks_a_launched_one_makes(tmp_path, monkeypatch):
    from fineprune_cli.distributed import launch

    checked = []
    monkeypatch.setattr(launch, "check_parallel", lambda cfg, size, per_node: checked.append((size, per_node)))
    for var in LAUNCH_ENV:
        monkeypatch.delenv(var, raising=False)
    runner.train(_cfg(tmp_path / "lone"), show_progress=False)
    assert checked == []
    monkeypatch.setenv(runner.RESTART_COUNT, "0")
    summary = runner.train(_cfg(tmp_path / "launched"), show_progress=False)
    assert checked == [(1, 1)] and summary.status == Status.COMPLETE


def test_batch_per_worker_sets_a_lone_process_batch(tmp_path, monkeypatch):
    """Weak scaling in one process: --batch-per-worker 16 trains 64 samples in 4 steps an epoch
    (the recorded config says 16), not in the 2 of --batch-size 32."""
    for var in LAUNCH_ENV:
        monkeypatch.delenv(var, raising=False)
    steps = []
    original = Trainer.train_epoch

    def counted(self, *args, **kwargs):
        before = self.steps
        out = original(self, *args, **kwargs)
        steps.append(self.steps - before)
        return out

    monkeypatch.setattr(Trainer, "train_epoch", counted)
    runner.train(_cfg(tmp_path / "r", **{"train.batch_per_worker": 16}), show_progress=False)
    assert steps == [4, 4]
    assert "batch_size: 16" in (tmp_path / "r" / "config.yaml").read_text()


def test_train_validates_its_config_once(tmp_path, monkeypatch):
    """A valid run: one validation (the front door's, none in the command before it nor in the
    engine after it); a bad one: refused by that one validation, in one line, before any
    folder is made."""
    from fineprune_cli.engine.setup import config as config_module

    calls = []
    validate = config_module.validate

    def counting(cfg):
        calls.append(cfg.model.widen)
        return validate(cfg)

    monkeypatch.setattr(config_module, "validate", counting)
    monkeypatch.setattr(runner, "validate", counting)
    for var in LAUNCH_ENV:
        monkeypatch.delenv(var, raising=False)
    result = invoke(["train", *TINY, "--out", tmp_path / "ok", "--json"])
    assert result.exit_code == 0, result.output
    assert calls == [None]
    calls.clear()
    result = invoke(["train", *TINY, "--widen", "2", "--out", tmp_path / "bad"])
    assert result.exit_code == 2 and result.output.strip() == "error: --widen applies to wrn models only"
    assert calls == [2] and not (tmp_path / "bad").exists()


def _finished_but_not_marked(path):
    """A run killed after its final epoch's checkpoint, before its summary said 'complete'."""
    summary = read_summary(path)
    summary.status, summary.finished = Status.INCOMPLETE, None
    record = RunRecord(path)
    record.write_summary(summary)
    record.close()


def _no_training(monkeypatch):
    monkeypatch.setattr(Trainer, "train_epoch", lambda *a, **k: pytest.fail("an epoch was trained again"))


def test_resuming_a_run_checkpointed_at_its_final_epoch_trains_nothing_and_completes(tmp_path, monkeypatch):
    path = tmp_path / "r"
    runner.train(_cfg(path), show_progress=False)
    before = metrics_rows(path, drop_timing=True)
    _finished_but_not_marked(path)
    _no_training(monkeypatch)
    summary = runner.resume(path, show_progress=False)
    assert summary.status == Status.COMPLETE and summary.epochs_completed == 2
    assert summary.resumed_after_epochs == [2]
    assert metrics_rows(path, drop_timing=True) == before
    assert read_summary(path).status == Status.COMPLETE


@pytest.mark.parametrize("complete", [True, False])
def test_a_restarted_process_finds_its_final_epoch_done(tmp_path, monkeypatch, complete):
    """torchrun restarts every process after one failed: a run complete in its folder is
    returned as it is; one checkpointed at its final epoch but not yet marked complete is
    finished without training (either way, no epoch again and no 'already holds a run')."""
    path = tmp_path / "r"
    for var in LAUNCH_ENV:
        monkeypatch.delenv(var, raising=False)
    runner.train(_cfg(path), show_progress=False)
    if not complete:
        _finished_but_not_marked(path)
    _no_training(monkeypatch)
    monkeypatch.setenv(runner.RESTART_COUNT, "1")
    summary = runner.train(_cfg(path), show_progress=False)
    assert summary.status == Status.COMPLETE and summary.epochs_completed == 2
    assert summary.resumed_after_epochs == ([] if complete else [2])

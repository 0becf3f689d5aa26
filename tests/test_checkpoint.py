"""Interrupted runs: resume exactness, graceful signals, SIGKILL, divergence, safe loading."""

import json
import os
import signal
import subprocess
import time

import pytest
import torch
from typer.testing import CliRunner

from conftest import SignalAt, metrics_rows, summary_of, tiny
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.cli import app
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.engine.training import checkpoint
from fineprune_cli.engine.training.checkpoint import CHECKPOINT, Interrupted
from fineprune_cli.errors import ConfigError
from fineprune_cli.runner import resume, train


def _cfg(out, prune, every=1, epochs=6):
    return build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "data.subset": 300,
            "data.test_subset": 200,
            "train.epochs": epochs,
            "train.batch_size": 64,
            "train.milestones": [4],
            "run.device": "cpu",
            "run.seed": 3,
            "run.out": str(out),
            "run.checkpoint_every": every,
            "prune.enabled": prune,
            "prune.window": 4,
            "prune.start": 1,
            "prune.attenuation": 1,
            "prune.block": 1,
        },
    )


def _weights(path):
    return torch.load(path / CHECKPOINT, weights_only=True)["trainer"]["model"]


@pytest.mark.slow
@pytest.mark.parametrize("prune, every", [(False, 1), (True, 1), (True, 0)])
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, prune, every):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train(_cfg(whole, prune), show_progress=False)
    # epoch 2 lies inside the first window's pruning epochs (1, 2, 3): counts carry over
    with pytest.raises(Interrupted, match="stopped after epoch 2 of 6"):
        train(_cfg(cut, prune, every), show_progress=False, bar=SignalAt(2))
    s = summary_of(cut)
    assert s["status"] == "interrupted" and s["epochs_completed"] == 2
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers are put back
    resume(cut, show_progress=False)
    assert metrics_rows(drop_timing=True, run_dir=cut) == metrics_rows(drop_timing=True, run_dir=whole)
    for name, tensor in _weights(whole).items():
        assert torch.equal(tensor, _weights(cut)[name]), name
    s = summary_of(cut)
    assert s["status"] == "complete" and s["resumed_after_epochs"] == [2]
    if prune:
        assert s["pruning_epochs"] == summary_of(whole)["pruning_epochs"] == [1, 2, 3, 5, 6]


def test_restore_rng_puts_back_the_cpu_generator_the_checkpoint_saved(tmp_path):
    """A model's dropout draws from torch's global CPU generator, which our LeNet runs above never
    use: a resumed run must go on drawing where the checkpoint left off, whatever the process drew
    since. Catches: restore_rng not setting the CPU state."""
    with torch.random.fork_rng():
        torch.manual_seed(5)
        checkpoint.save(tmp_path, {})
        expected = torch.rand(4)
        torch.rand(100)  # the interrupted (or a new) process draws on
        checkpoint.restore_rng(checkpoint.load(tmp_path, torch.device("cpu")))
        assert torch.equal(torch.rand(4), expected)


def test_resume_refuses_complete_runs_and_missing_checkpoints(tmp_path):
    train(_cfg(tmp_path / "r", False, epochs=1), show_progress=False)
    with pytest.raises(ConfigError, match="already complete"):
        resume(tmp_path / "r", show_progress=False)
    s = summary_of(tmp_path / "r")
    s["status"] = "incomplete"
    (tmp_path / "r" / "summary.json").write_text(json.dumps(s))
    (tmp_path / "r" / CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="unreadable or corrupt"):
        resume(tmp_path / "r", show_progress=False)
    (tmp_path / "r" / CHECKPOINT).unlink()
    with pytest.raises(ConfigError, match="no checkpoint.pt"):
        resume(tmp_path / "r", show_progress=False)


def test_checkpoint_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo owned",))

    torch.save({"trainer": Evil()}, tmp_path / CHECKPOINT)
    with pytest.raises(ConfigError, match="checkpoint.pt is refused: it holds posix.system, and a run folder"):
        checkpoint.load(tmp_path, torch.device("cpu"))


def test_diverged_run_keeps_its_record(tmp_path):
    cfg = _cfg(tmp_path / "d", False, epochs=3)
    cfg.train.lr, cfg.train.warmup_epochs = 1e12, 0.0
    with pytest.raises(checkpoint.Diverged, match="diverged at epoch 1"):
        train(cfg, show_progress=False)
    s = summary_of(tmp_path / "d")
    assert s["status"] == "diverged" and s["diverged_epoch"] == 1 and s["epochs_completed"] == 1
    runs, problems = load_runs([tmp_path])
    assert not runs and problems[0].status == "diverged"
    result = CliRunner().invoke(app, ["train", "--resume", str(tmp_path / "d"), "--json"])
    assert result.exit_code != 0 and "Traceback" not in result.output


@pytest.mark.slow
def test_sigkill_keeps_incomplete_and_resume_finishes(tmp_path, forked):
    out = tmp_path / "run"
    args = [
        "-m",
        "fineprune_cli",
        "train",
        *tiny(subset=300, test_subset=200, epochs=40, batch_size=64),
        "--out",
        str(out),
        "--json",
    ]
    proc = forked.popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        # the summary is an epoch's last write (after metrics and checkpoint): wait for it,
        # or a kill between the writes finds a summary one epoch behind the metrics
        if (out / "summary.json").exists() and summary_of(out)["epochs_completed"] >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = summary_of(out)
    assert s["status"] == "incomplete" and 2 <= s["epochs_completed"] < 40
    _, problems = load_runs([tmp_path])
    assert [p.status for p in problems] == ["incomplete"]
    result = CliRunner().invoke(app, ["train", "--resume", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert summary_of(out)["status"] == "complete"
    assert [int(r["epoch"]) for r in metrics_rows(drop_timing=True, run_dir=out)] == list(range(1, 41))


@pytest.mark.slow
def test_sigint_subprocess_stops_cleanly_with_exit_130(tmp_path, forked):
    out = tmp_path / "run"
    args = [
        "-m",
        "fineprune_cli",
        "train",
        *tiny(subset=300, test_subset=200, epochs=40, batch_size=None),
        "--checkpoint-every",
        "0",
        "--out",
        str(out),
    ]
    proc = forked.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metrics.csv").exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    *progress, last = err.decode().strip().splitlines()
    assert proc.returncode == 130, err.decode()
    # stderr is a pipe: one progress line per epoch done, then the stop as a plain line, not an error
    assert progress and all(line.startswith("lenet on synthetic: epoch ") for line in progress)
    assert last.startswith("SIGINT: stopped after epoch ") and "continue with: fineprune train --resume" in last
    assert summary_of(out)["status"] == "interrupted" and (out / CHECKPOINT).exists()


def test_train_refuses_a_folder_that_holds_a_run(tmp_path):
    cfg = _cfg(tmp_path / "r", False, epochs=1)
    train(cfg, show_progress=False)
    with pytest.raises(ConfigError, match="already holds a run: continue it with `fineprune train --resume"):
        train(_cfg(tmp_path / "r", True, epochs=1), show_progress=False)


def test_resume_refuses_a_checkpoint_of_other_settings(tmp_path):
    """An edited config.yaml (or a run started over another's checkpoint) is not spliced on."""
    cfg = _cfg(tmp_path / "r", True, epochs=4)
    with pytest.raises(Interrupted):
        train(cfg, show_progress=False, bar=SignalAt(2))
    config = (tmp_path / "r" / "config.yaml").read_text()
    (tmp_path / "r" / "config.yaml").write_text(config.replace("subset: 300", "subset: 280"))
    with pytest.raises(ConfigError, match="checkpoint was made with other settings"):
        resume(tmp_path / "r", show_progress=False)


def test_one_writer_per_run_folder(tmp_path):
    from fineprune_cli.engine.records.record import RunRecord

    first = RunRecord(tmp_path / "r")
    # the lock names this process: a second writer here is a second start(), not another process
    with pytest.raises(ConfigError, match="already open for writing in this same process"):
        RunRecord(tmp_path / "r")
    (tmp_path / "r" / ".lock").write_text("")  # a lock naming no holder: another process's run
    with pytest.raises(ConfigError, match="being written by another fineprune process"):
        RunRecord(tmp_path / "r")
    first.close()  # released (as it is when a writer dies)
    RunRecord(tmp_path / "r").close()


def test_two_runs_started_together_on_one_folder_do_not_both_write(tmp_path):
    """Both pass the 'already holds a run' check before either takes the lock; the second to
    take it must look again and refuse, not overwrite the first's records."""
    from fineprune_cli.engine.records.record import RunRecord

    first = RunRecord(tmp_path / "r", fresh=True, open_now=False)
    second = RunRecord(tmp_path / "r", fresh=True, open_now=False)
    first.open()
    first.write_config({"model": "first"})
    (tmp_path / "r" / "summary.json").write_text("{}")
    first.close()
    with pytest.raises(ConfigError, match="already holds a run"):
        second.open()
    assert (tmp_path / "r" / "config.yaml").read_text() == "model: first\n"
    RunRecord(tmp_path / "r").close()  # the refusal released the lock


def test_a_failed_start_leaves_no_folder_and_a_killed_write_no_orphan(tmp_path):
    cfg = _cfg(tmp_path / "never", False)
    cfg.data.dataset, cfg.data.data_dir = "folder", str(tmp_path / "no-such-images")
    with pytest.raises(Exception, match="does not exist"):
        train(cfg, show_progress=False)
    assert not (tmp_path / "never").exists()
    cfg = _cfg(tmp_path / "r", True, epochs=3)
    with pytest.raises(Interrupted):
        train(cfg, show_progress=False, bar=SignalAt(1))
    orphan = tmp_path / "r" / ".checkpoint.pt.x1y2.tmp"  # as a SIGKILL mid-write leaves it
    orphan.write_bytes(b"half")
    resume(tmp_path / "r", show_progress=False)
    assert not orphan.exists() and summary_of(tmp_path / "r")["status"] == "complete"


@pytest.mark.slow
def test_disk_full_mid_run_is_one_line_keeps_whole_records_and_resumes(tmp_path, monkeypatch):
    from fineprune_cli.engine.records import files

    out, real = tmp_path / "r", files.atomic_write_bytes
    writes = {"metrics.csv": 0}

    def full_at_third_metrics(path, data):
        if path.name == "metrics.csv":
            writes["metrics.csv"] += 1
            if writes["metrics.csv"] == 3:
                raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full_at_third_metrics)
    cfg = _cfg(out, True, epochs=4)
    result = CliRunner().invoke(
        app,
        ["train", *tiny(subset=300, test_subset=200, epochs=4, batch_size=64), "--seed", "3", "--out", str(out)],
    )
    *progress, last = result.output.strip().splitlines()
    assert result.exit_code == 1, result.output
    assert [line.split(",")[0] for line in progress] == [
        "lenet on synthetic: epoch 1/4",
        "lenet on synthetic: epoch 2/4",
    ]
    assert "No space left on device" in last and f"fineprune train --resume {out}" in last
    assert len(metrics_rows(out)) == 2 and summary_of(out)["status"] == "incomplete"
    monkeypatch.setattr(files, "atomic_write_bytes", real)  # space again
    resume(out, show_progress=False)
    assert summary_of(out)["status"] == "complete" and len(metrics_rows(out)) == 4
    assert cfg.train.epochs == 4


@pytest.fixture
def terminal_sigint():
    """Ctrl-C as in a terminal: a background job of a non-interactive shell (CI, nohup) starts
    with SIGINT ignored, and then a second signal is ignored too."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
def test_a_second_ctrl_c_says_what_was_lost_and_how_to_resume(tmp_path, terminal_sigint):
    class TwoSignals(SignalAt):
        def advance(self, status=""):
            ours = signal.getsignal(signal.SIGINT)
            super().advance(status)
            if self.seen == self.epoch:
                # two signals before Python's handler runs would count as one: wait for the first
                while signal.getsignal(signal.SIGINT) is ours:
                    pass
                os.kill(os.getpid(), signal.SIGINT)  # the impatient second press

    out = tmp_path / "r"
    with pytest.raises(
        Interrupted,
        match=rf"again before the epoch's checkpoint; no epoch was checkpointed "
        rf"yet: delete {out} and train again",
    ):
        train(_cfg(out, True, epochs=4), show_progress=False, bar=TwoSignals(1, signal.SIGINT))
    out = tmp_path / "r2"
    with pytest.raises(
        Interrupted,
        match=r"again before the epoch's checkpoint; continue with: fineprune "
        rf"train --resume {out} \(from its last checkpoint\)",
    ):
        train(_cfg(out, True, epochs=4), show_progress=False, bar=TwoSignals(2, signal.SIGINT))
    assert summary_of(out)["status"] == "incomplete"
    resume(out, show_progress=False)  # epoch 2 is trained again from epoch 1's checkpoint
    assert [int(r["epoch"]) for r in metrics_rows(out)] == [1, 2, 3, 4]


def test_a_moved_run_folder_knows_where_it_is(tmp_path):
    from fineprune_cli.engine.records.record import read_summary

    train(_cfg(tmp_path / "old", False, epochs=1), show_progress=False)
    (tmp_path / "old").rename(tmp_path / "new")
    assert read_summary(tmp_path / "new").run_dir == str(tmp_path / "new")


def test_a_nan_test_loss_in_the_last_epoch_marks_the_run_diverged(tmp_path, monkeypatch):
    """Weights that blow up in the last epoch gave a finite train loss, a NaN test loss and
    status 'complete'."""
    from fineprune_cli.engine.training.trainer import Trainer

    real = Trainer.evaluate
    monkeypatch.setattr(
        Trainer, "evaluate", lambda self: (float("nan"), 10.0) if self.steps >= 15 else real(self)
    )  # 300 samples / 64 = 5 steps an epoch: epoch 3
    with pytest.raises(checkpoint.Diverged, match="diverged at epoch 3"):
        train(_cfg(tmp_path / "d", False, epochs=3), show_progress=False)
    assert summary_of(tmp_path / "d")["status"] == "diverged"


def _tensors(tree, path=()):
    """(path, tensor) for every tensor in a nested dict/list."""
    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif isinstance(tree, dict):
        for k, v in tree.items():
            yield from _tensors(v, (*path, k))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _tensors(v, (*path, i))


def test_a_checkpoint_loaded_for_another_device_keeps_generator_states_on_the_cpu(tmp_path):
    """Generator.set_state takes a CPU ByteTensor only, also for a CUDA generator: loading the
    whole checkpoint onto the GPU made every CUDA resume fail ('does not fit'). The meta
    device stands in for the GPU: every other tensor goes there, the generator states do not."""
    train(_cfg(tmp_path / "run", prune=True, epochs=2), show_progress=False)
    state = checkpoint.load(tmp_path / "run", torch.device("meta"))
    generators = [(p, t) for p, t in _tensors(state) if "generator" in p or p[0] == "rng"]
    others = [(p, t) for p, t in _tensors(state) if not ("generator" in p or p[0] == "rng")]
    assert {p[0] for p, _ in generators} == {"trainer", "policy", "rng"}
    assert all(t.device.type == "cpu" and t.dtype == torch.uint8 for _, t in generators), [
        (p, t.device) for p, t in generators
    ]
    assert others and all(t.device.type == "meta" for _, t in others)
    torch.Generator().set_state(state["trainer"]["generator"])  # what resume hands it
    torch.Generator().set_state(state["policy"]["generator"])


def test_resume_refuses_a_run_whose_class_folders_were_swapped(tmp_path):
    """The same files, every label flipped: the checkpoint's weights and counts belong to other labels."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "reliability"))
    from crafted import grey_folder, swap_class_folders

    grey_folder(tmp_path / "imgs")
    cfg = _cfg(tmp_path / "r", True, epochs=3)
    cfg.data.dataset, cfg.data.data_dir, cfg.data.subset, cfg.data.test_subset = (
        "folder",
        str(tmp_path / "imgs"),
        None,
        None,
    )
    cfg.train.batch_size = 4
    with pytest.raises(Interrupted):
        train(cfg, show_progress=False, bar=SignalAt(1))
    assert summary_of(tmp_path / "r")["data"]["train"].startswith("12 files, ")
    swap_class_folders(tmp_path / "imgs" / "train")
    with pytest.raises(
        ConfigError,
        match=r"r: the train images in .*imgs changed since the run started "
        r"\(12 files, content \w+ then, 12 files, content \w+ now.*resume refused",
    ):
        resume(tmp_path / "r", show_progress=False)
    swap_class_folders(tmp_path / "imgs" / "train")  # put back: the same data again
    resume(tmp_path / "r", show_progress=False)
    assert summary_of(tmp_path / "r")["status"] == "complete"

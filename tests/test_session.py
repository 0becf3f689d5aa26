"""The session: building a run, the fit loop's bookkeeping, and what a run folder says."""

import json
import time

import pytest

from conftest import invoke, metrics_rows, tiny, tiny_config
from fineprune_cli.engine.records.record import RunSummary, Status, read_summary
from fineprune_cli.engine.training.totals import best3
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning.policies.fine import FinePruning
from fineprune_cli.runner import resume, train


def _cfg(out, **extra):
    return tiny_config(out, **{"train.milestones": [], **extra})


def test_best3_is_the_mean_of_the_three_best():
    assert best3([50.0, 80.0, 70.0, 75.0]) == pytest.approx(75.0)
    assert best3([60.0, 62.0]) == pytest.approx(61.0)
    # the best three are not the last three (70) nor the first three (73.3): catches accuracies[-3:]
    assert best3([90.0, 50.0, 80.0, 70.0, 60.0]) == pytest.approx(80.0)


def test_overhead_is_the_time_spent_inside_the_policy(tmp_path, monkeypatch):
    observe = FinePruning.observe

    calls = []

    def slow(self, *args):
        calls.append(1)
        time.sleep(0.005)
        observe(self, *args)

    monkeypatch.setattr(FinePruning, "observe", slow)
    summary = train(_cfg(tmp_path / "f", **{"prune.enabled": True}), show_progress=False)
    assert len(calls) >= 2 * 200 // 50 - 1  # a pruned epoch takes fewer steps
    assert summary.overhead_seconds >= len(calls) * 0.005
    assert sum(float(r["overhead_seconds"]) for r in metrics_rows(tmp_path / "f")) == pytest.approx(
        summary.overhead_seconds, abs=1e-3
    )
    regular = train(_cfg(tmp_path / "r"), show_progress=False)
    assert regular.overhead_seconds < len(calls) * 0.005  # nothing observed: only plan/sync bookkeeping


def test_resume_refuses_a_diverged_run_with_a_reason(tmp_path):
    cfg = _cfg(tmp_path / "d", **{"train.lr": 1e12, "train.warmup_epochs": 0.0, "run.checkpoint_every": 1})
    with pytest.raises(Exception, match="diverged"):
        train(cfg, show_progress=False)
    assert read_summary(tmp_path / "d").status == Status.DIVERGED
    result = invoke(["train", "--resume", tmp_path / "d"])
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert "diverged at epoch 1: resuming it would diverge again" in result.output


def test_status_says_what_can_be_resumed():
    assert [s.value for s in Status if s.resumable] == ["incomplete", "interrupted"]
    assert Status.of("something else") == Status.INCOMPLETE


def test_summary_round_trip_and_schema_1(tmp_path):
    s = RunSummary(
        model="lenet",
        dataset="synthetic",
        epochs=3,
        seed=1,
        policy="random",
        final_accuracy=70.5,
        best3_accuracy=70.0,
        extra={"staleness_max": 4},
    )
    data = s.to_dict()
    assert data["schema"] == 3 and data["pruning"] is True and data["staleness_max"] == 4
    assert RunSummary.from_dict(json.loads(json.dumps(data))) == s
    # schema 1 (first release): no policy key, pruning on meant fine-pruning
    old = {
        "model": "lenet",
        "dataset": "fashion-mnist",
        "epochs": 3,
        "seed": 0,
        "pruning": True,
        "status": "complete",
        "train_seconds": 4.5,
    }
    assert RunSummary.from_dict(old).policy == "fine"
    assert RunSummary.from_dict({**old, "pruning": False}).policy == "regular"
    with pytest.raises(ConfigError, match="'train_seconds' has the wrong type"):
        RunSummary.from_dict({**old, "train_seconds": "4.2"})
    with pytest.raises(ConfigError, match="lacks seed"):
        RunSummary.from_dict({k: v for k, v in old.items() if k != "seed"})


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 8589934592 bytes."
        ),
        MemoryError(),
    ],
)
def test_running_out_of_memory_mid_run_is_one_line(tmp_path, monkeypatch, error):
    """The up-front memory check is a floor (a model's layers come on top): an allocation that
    fails later ended in the allocator's traceback."""

    from fineprune_cli.engine.training.trainer import Trainer

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(Trainer, "train_epoch", fail)
    result = invoke(["train", *tiny(epochs=1), "--out", tmp_path / "run"])
    assert result.exit_code == 1 and "out of memory while training" in result.output, result.output
    assert "lower --batch-size or --image-size" in result.output and len(result.output.strip().splitlines()) == 1


def test_other_runtime_errors_are_not_called_out_of_memory(tmp_path, monkeypatch):
    from fineprune_cli.engine.training.trainer import Trainer

    monkeypatch.setattr(Trainer, "train_epoch", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        train(tiny_config(tmp_path / "r", **{"train.epochs": 1}), show_progress=False)


def test_the_summary_records_the_machine_and_its_load(tmp_path, monkeypatch):
    import os

    import torch

    from fineprune_cli.engine.training import device

    monkeypatch.setattr(os, "getloadavg", lambda: (1.504, 0.25, 3.0))
    monkeypatch.setattr(device, "_cpu_model", lambda: "Test CPU 9000")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    train(_cfg(tmp_path / "r", **{"train.epochs": 1}), show_progress=False)
    s = read_summary(tmp_path / "r")
    assert s.machine == {"processor": "Test CPU 9000", "threads": 3, "torch": torch.__version__, "device": "cpu"}
    assert s.load_average == [1.5, 0.25, 3.0] and s.schema == 3
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["machine"]["threads"] == 3


class _StopAfterFirstEpoch:
    def advance(self, status=""):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGTERM)


def test_a_run_resumed_on_another_machine_has_a_mixed_signature(tmp_path, monkeypatch):
    from fineprune_cli.engine.training import session
    from fineprune_cli.engine.training.checkpoint import Interrupted

    cfg = _cfg(tmp_path / "r", **{"run.checkpoint_every": 1})
    with pytest.raises(Interrupted):
        train(cfg, show_progress=False, bar=_StopAfterFirstEpoch())
    first = read_summary(tmp_path / "r").machine
    other = {**first, "processor": "another CPU"}
    monkeypatch.setattr(session, "machine_signature", lambda device: other)
    resume(tmp_path / "r", show_progress=False)
    assert read_summary(tmp_path / "r").machine == {"mixed": [first, other]}

"""The one end of an epoch (engine/training/epochend.py): both loops go through it, and what it records
on a normal epoch, a divergence and a stop."""

import time

import pytest
import torch

from conftest import NoPeers, metrics_rows, tiny_config, toy_trainer
from fineprune_cli.engine.records.record import RunRecord, Status, read_summary
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.engine.training import checkpoint
from fineprune_cli.engine.training.epochend import EpochEnd, Measured
from fineprune_cli.engine.training.totals import Totals, new_summary
from fineprune_cli.engine.training.world import SINGLE, World
from fineprune_cli.pruning import create
from fineprune_cli.runner import train


def _chief_epoch(out):
    """One epoch of a parameter-server run, served by its chief in this process: the workers'
    end of epoch 1 is handed to the chief as RPC would hand it."""
    from fineprune_cli.distributed.chief import serve_epoch
    from fineprune_cli.distributed.layout import Shards, flatten
    from fineprune_cli.distributed.server import Chief

    trainer = toy_trainer()
    policy = create("regular", trainer.data.num_train)
    chief = Chief(trainer, Shards(list(trainer.model.parameters()), 1), policy, pushers=1, timeout_s=5.0)
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.train.epochs = "lenet", "synthetic", 1
    record = RunRecord(out, fresh=True)
    summary = new_summary(cfg, trainer.device, record.path, trainer.data.num_train, 2)
    peers = NoPeers()
    chief.begin_epoch(1)
    chief.end_epoch(1, [], 96 * 1.5, 96, flatten(list(trainer.model.buffers())))
    try:
        with checkpoint.StopRequest() as stop:
            serve_epoch(cfg, chief, peers, record, summary, Totals(), 1, stop, World(0, 2))
    finally:
        record.close()
    return peers


def test_a_change_to_the_epoch_end_reaches_both_loops(tmp_path, monkeypatch):
    """The epoch end changed once (it stamps the summary) is what the single-process loop and
    the parameter-server chief both record: neither keeps a copy of its own."""
    close = EpochEnd.close
    seen = []

    def stamped(self, m):
        seen.append(m.epoch)
        self.summary.extra["stamp"] = f"end of epoch {m.epoch}"
        close(self, m)

    monkeypatch.setattr(EpochEnd, "close", stamped)
    train(tiny_config(tmp_path / "single"), show_progress=False)
    assert seen == [1, 2] and read_summary(tmp_path / "single").extra["stamp"] == "end of epoch 2"
    peers = _chief_epoch(tmp_path / "chief")
    assert seen == [1, 2, 1] and read_summary(tmp_path / "chief").extra["stamp"] == "end of epoch 1"
    assert [r["train_loss"] for r in metrics_rows(tmp_path / "chief")] == ["1.5"] and not peers.finished


def _end(tmp_path, world=SINGLE, epochs=4, every=1, **hooks):
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.train.epochs, cfg.run.checkpoint_every = "lenet", "synthetic", epochs, every
    record = RunRecord(tmp_path / "run", write=world.main, fresh=True)
    summary = new_summary(cfg, torch.device("cpu"), record.path, 10, world.size)
    policy = create("regular", 10)
    return EpochEnd(cfg, record, summary, Totals(), policy, world, checkpoint.StopRequest(), lambda: {}, **hooks)


def _measured(epoch, loss=2.0, policy_s=None, samples=10):
    now = time.perf_counter()
    return Measured(epoch, 0.1, samples, loss * samples, False, now - 1.5, now, 1.0, 50.0, policy_s)


def test_the_row_and_the_totals_come_from_what_the_loop_measured(tmp_path):
    end = _end(tmp_path)
    end.close(_measured(1, policy_s=0.25, samples=8))
    end.close(_measured(2, policy_s=0.75))
    first, second = end.totals.rows
    assert first.train_loss == 2.0 and first.samples == 8 and first.train_seconds == pytest.approx(1.5, abs=1e-3)
    # each row its epoch's share of the policy time the loop measured since the run began
    assert (first.overhead_seconds, second.overhead_seconds) == (0.25, 0.5) and end.totals.overhead_s == 0.75
    assert end.totals.train_s == pytest.approx(3.0, abs=1e-3)
    assert end.summary.epochs_completed == 2 and end.summary.samples_skipped == 2
    assert [r["epoch"] for r in metrics_rows(tmp_path / "run")] == ["1", "2"]
    assert read_summary(tmp_path / "run").epochs_completed == 2


def test_a_checkpoint_when_due_and_on_the_last_epoch(tmp_path):
    end = _end(tmp_path, epochs=3, every=2)
    saved = []
    end.state = lambda: saved.append(len(end.totals.rows)) or {"own": len(end.totals.rows)}
    for epoch in (1, 2, 3):
        end.close(_measured(epoch))
    assert saved == [2, 3]
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert state["own"] == 3 and len(state["totals"]["rows"]) == 3 and "fingerprint" in state


def test_only_the_main_process_writes_the_checkpoint(tmp_path):
    end = _end(tmp_path, world=World(1, 2))
    end.state = lambda: pytest.fail("a rank other than 0 built a checkpoint")
    end.close(_measured(1))
    assert not (tmp_path / "run").exists()


def test_a_divergence_is_recorded_before_the_others_are_released(tmp_path):
    released = []
    end = _end(tmp_path, release=lambda: released.append(read_summary(tmp_path / "run").status))
    with pytest.raises(checkpoint.Diverged, match="diverged at epoch 1"):
        end.close(_measured(1, loss=float("nan")))
    assert released == [Status.DIVERGED] and not (tmp_path / "run" / "checkpoint.pt").exists()


@pytest.mark.parametrize("world, hint", [(SINGLE, ""), (World(0, 4), " --nproc-per-node 4")])
def test_a_stop_checkpoints_and_names_the_command_that_resumes(tmp_path, world, hint):
    released = []
    end = _end(tmp_path, world=world, release=lambda: released.append(read_summary(tmp_path / "run").status))
    end.stop.requested = "SIGTERM"
    with pytest.raises(checkpoint.Stopped) as err:
        end.close(_measured(1))
    path = tmp_path / "run"
    assert (
        str(err.value) == f"SIGTERM: stopped after epoch 1 of 4; continue with: fineprune train --resume {path}{hint}"
    )
    assert released == [Status.INTERRUPTED] and (path / "checkpoint.pt").exists()


def test_a_stop_asked_elsewhere_says_who_asked_and_the_last_epoch_just_ends(tmp_path):
    end = _end(tmp_path, epochs=2, agree=lambda wish: True, others="a worker")
    with pytest.raises(checkpoint.Stopped, match="^a signal to a worker: stopped after epoch 1 of 2"):
        end.close(_measured(1))
    end.close(_measured(2))  # the last epoch: the run is over, nothing to stop
    assert len(end.totals.rows) == 2


def test_the_resume_hint_of_a_run_on_several_machines_names_each_machines_share():
    """A run of 2 machines x 4 processes was told to continue with --nproc-per-node 8, which
    would start 8 processes on one machine; torchrun says how many machines (GROUP_WORLD_SIZE)."""
    from types import SimpleNamespace

    from fineprune_cli.engine.training.epochend import resume_command
    from fineprune_cli.engine.training.world import from_env

    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_PORT": "29500"}
    world = from_env(env)
    assert world == World(5, 8, 1, 2)
    record = SimpleNamespace(path="runs/x")
    assert resume_command(record, world) == (
        "continue with, on each of its 2 machines: fineprune train --resume runs/x --nproc-per-node 4 "
        "--nnodes 2 --node-rank NODE_RANK --rdzv-endpoint HOST:PORT"
    )
    alone = from_env({**env, "GROUP_WORLD_SIZE": "1"})
    assert resume_command(record, alone) == "continue with: fineprune train --resume runs/x --nproc-per-node 8"

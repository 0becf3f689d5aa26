"""--tensorboard (engine/training/scalars.py): the epoch rows as TensorBoard scalars in the run folder."""

import signal
import sys

import pytest

from conftest import invoke, metrics_rows, tiny
from fineprune_cli.engine.records.fingerprint import fingerprint
from fineprune_cli.engine.records.record import EpochRow
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.engine.training import scalars
from fineprune_cli.engine.training.checkpoint import Interrupted
from fineprune_cli.runner import resume, train

TINY = tiny(epochs=None)
COLUMNS = [c for c in EpochRow.columns() if c != "epoch"]


class FakeWriter:
    """Stands in for SummaryWriter: what was logged, and how each writer was opened."""

    opened: list = []

    def __init__(self, log_dir, purge_step=None):
        self.log_dir, self.purge_step, self.scalars, self.closed = log_dir, purge_step, [], False
        FakeWriter.opened.append(self)

    def add_scalar(self, tag, value, global_step):
        assert type(value) is float
        self.scalars.append((tag, global_step, value))

    def flush(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def fake_writer(monkeypatch):
    FakeWriter.opened = []
    monkeypatch.setattr(scalars, "writer_class", lambda: FakeWriter)
    return FakeWriter


def _cfg(out, epochs=3):
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.data.subset, cfg.data.test_subset = "lenet", "synthetic", 200, 100
    cfg.train.epochs, cfg.train.batch_size, cfg.run.device = epochs, 50, "cpu"
    cfg.run.out, cfg.run.tensorboard = str(out), True
    return cfg


def test_missing_package_is_one_line_and_nothing_is_trained(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if absent
    result = invoke(["train", *TINY, "--epochs", "1", "--tensorboard", "--out", tmp_path / "r"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --tensorboard needs the tensorboard package, which is not installed: "
        "pip install 'fineprune[tensorboard]' (or pip install tensorboard)"
    ]
    assert not (tmp_path / "r").exists()


def test_every_column_of_every_epoch_is_logged_as_in_metrics_csv(tmp_path, fake_writer):
    train(_cfg(tmp_path / "r"), show_progress=False)
    (writer,) = fake_writer.opened
    assert writer.log_dir == str(tmp_path / "r") and writer.purge_step is None and writer.closed
    expected = [(c, int(row["epoch"]), float(row[c])) for row in metrics_rows(tmp_path / "r") for c in COLUMNS]
    assert sorted(writer.scalars) == sorted(expected)


class StopAfter:
    def __init__(self, epoch):
        self.epoch, self.done = epoch, 0

    def advance(self, status=""):
        self.done += 1
        if self.done == self.epoch:
            signal.raise_signal(signal.SIGTERM)


def test_a_resumed_run_logs_only_its_new_epochs_and_hides_the_old_tail(tmp_path, fake_writer):
    with pytest.raises(Interrupted):
        train(_cfg(tmp_path / "r"), show_progress=False, bar=StopAfter(1))
    resume(tmp_path / "r", show_progress=False)
    first, second = fake_writer.opened
    assert sorted({step for _, step, _ in first.scalars}) == [1]
    # epoch 1 was checkpointed: the new process starts at 2 and hides any step >= 2 from before
    assert second.purge_step == 2 and sorted({step for _, step, _ in second.scalars}) == [2, 3]


def test_off_by_default_and_no_part_of_what_makes_two_runs_the_same(tmp_path, fake_writer):
    cfg = _cfg(tmp_path / "r", epochs=1)
    cfg.run.tensorboard = False
    train(cfg, show_progress=False)
    assert fake_writer.opened == []
    on = Config()
    on.run.tensorboard = True
    assert fingerprint(on.to_dict()) == fingerprint(Config().to_dict())


def test_real_event_files_hold_the_metrics(tmp_path):
    pytest.importorskip(
        "tensorboard", reason="the tensorboard extra is not installed (pip install 'fineprune[tensorboard]')"
    )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = invoke(["train", *TINY, "--epochs", "2", "--tensorboard", "--out", tmp_path / "r"])
    assert result.exit_code == 0, result.output
    events = EventAccumulator(str(tmp_path / "r"))
    events.Reload()
    logged = [(e.step, round(e.value, 4)) for e in events.Scalars("test_accuracy")]
    assert logged == [(int(r["epoch"]), round(float(r["test_accuracy"]), 4)) for r in metrics_rows(tmp_path / "r")]

"""A script's records checked as they are logged (`harness.logged`, `ScriptRun.log`), and the
driver's side of a script that cannot run or fails: a figure outside its meaning fails the run
naming it, a loss no longer finite records a diverged run, a command that cannot run is refused
once, and a failed attempt is told by its own last words, bounded."""

import math

import fineprune
import numpy as np
import pytest
import torch

from conftest import summary_of
from fineprune_cli.drivers.compare import Job, job_config
from fineprune_cli.drivers.trainers.scriptjob import last_words, probe, script_name
from fineprune_cli.engine.records.files import size_text
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.errors import ConfigError
from fineprune_cli.harness import ScriptError


def _run(tmp_path, **kw):
    return fineprune.start(num_train=8, seed=0, epochs=2, out=tmp_path / "run", **kw)


@pytest.mark.parametrize(
    "given, said",
    [
        ({"lr": math.nan}, "lr nan"),
        ({"lr": math.inf}, "lr inf"),
        ({"lr": -0.1}, "lr -0.1"),
        ({"lr": "0.1"}, "lr '0.1' is not a number"),
        ({"train_seconds": -1.0}, "train_seconds -1.0"),
        ({"train_seconds": math.nan}, "train_seconds nan"),
        ({"train_seconds": 1e30}, "train_seconds 1e+30"),
        ({"samples": -3}, "samples -3"),
        ({"samples": 10**30}, f"samples {10**30}"),
        ({"samples": 9}, "samples 9 is not between 0 and the run's 8"),
        ({"samples": 2.5}, "samples 2.5 is not a whole number"),
        ({"samples": True}, "samples True"),
        ({"train_loss": -2.0}, "train_loss -2.0 is below 0"),
        ({"test_loss": -1.0}, "test_loss -1.0 is below 0"),
        ({"test_accuracy": math.nan}, "test_accuracy nan"),
        ({"train_loss": None}, "train_loss None is not a number"),
    ],
)
def test_a_figure_outside_its_meaning_fails_the_run_as_it_is_logged(tmp_path, given, said):
    run = _run(tmp_path)
    with pytest.raises(ScriptError, match="run.log\\(\\): " + said.replace("(", "\\(").replace("+", "\\+")):
        run.log(**{"train_loss": 1.0, "test_accuracy": 50.0, **given})
    run.close()
    metrics = tmp_path / "run" / "metrics.csv"
    assert not metrics.exists() or len(metrics.read_text().splitlines()) == 1  # nothing of it recorded


def test_counts_of_other_integer_types_and_an_unmeasured_test_loss_are_kept(tmp_path):
    run = _run(tmp_path)
    run.log(train_loss=1.0, test_accuracy=50.0, samples=np.int64(6), test_loss=math.nan)
    run.log(train_loss=torch.tensor(0.5), test_accuracy=50.0, samples=torch.tensor(8), lr=np.float32(0.1))
    summary = run.finish()
    assert (summary.status.value, summary.samples_seen, summary.samples_skipped) == ("complete", 14, 2)


def test_an_accuracy_is_a_whole_number_of_the_test_images_the_script_declared(tmp_path):
    run = _run(tmp_path, num_test=7)
    with pytest.raises(ScriptError, match="test_accuracy 50.0 is no whole number of the run's 7 test images"):
        run.log(train_loss=1.0, test_accuracy=50.0)
    run.log(train_loss=1.0, test_accuracy=100 * 3 / 7)
    run.close()


@pytest.mark.parametrize(
    "given",
    [{"train_loss": math.nan}, {"train_loss": math.inf}, {"train_loss": 1e30}, {"test_loss": math.inf}],
)
def test_a_loss_no_longer_finite_records_the_run_as_diverged(tmp_path, given):
    run = _run(tmp_path)
    run.log(train_loss=1.0, test_accuracy=50.0)
    run.log(**{"train_loss": 1.0, "test_accuracy": 50.0, **given})
    assert run.diverged
    run.log(train_loss=1.0, test_accuracy=60.0)  # after it: not recorded
    summary = run.finish()
    on_disk = summary_of(tmp_path / "run")
    assert (summary.status.value, on_disk["status"], on_disk["diverged_epoch"]) == ("diverged", "diverged", 2)
    assert len((tmp_path / "run" / "metrics.csv").read_text().splitlines()) == 3  # header and its 2 epochs


def _cfg(tmp_path, command):
    cfg = Config()
    cfg.script.command, cfg.train.epochs = command, 2
    return job_config(cfg, Job(script_name(command), "data", "regular", 0), str(tmp_path / "cmp"))


@pytest.mark.parametrize(
    "command, said",
    [
        ("nosuchprogram {epochs}", "nosuchprogram is no program on PATH"),
        ("./bin/train {seed}", "./bin/train does not exist"),
        ("/tmp {seed}", "/tmp is not an executable file"),
        ("python3 nosuch.py {seed}", "nosuch.py does not exist"),
        ("python3 -u nosuch.py {seed}", "nosuch.py does not exist"),
    ],
)
def test_a_command_that_cannot_run_is_refused_by_the_probe(tmp_path, monkeypatch, command, said):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=said):
        probe(_cfg(tmp_path, command))


def test_a_script_file_without_the_execute_bit_is_refused_and_one_with_it_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("print(1)\n")
    with pytest.raises(ConfigError, match="./s.py is not an executable file"):
        probe(_cfg(tmp_path, "./s.py {seed}"))
    (tmp_path / "s.py").chmod(0o755)
    probe(_cfg(tmp_path, "./s.py {seed}"))
    probe(_cfg(tmp_path, "python3 s.py {seed}"))


@pytest.mark.parametrize(
    "command, name",
    [
        ("python -m mytrain {epochs}", "mytrain"),
        ("python -m pkg.train --seed {seed}", "pkg.train"),
        ("python examples/own_script.py {seed}", "own_script"),
        ("./train {seed} {epochs}", "train"),
        ("{seed}", "script"),
    ],
)
def test_runs_are_filed_under_the_script_never_a_placeholder(command, name):
    assert script_name(command) == name


def test_a_failed_attempt_is_told_by_its_own_last_words_bounded(tmp_path):
    log = tmp_path / "s.script.log"
    log.write_text("error: the first attempt ran out of disk\n")
    start = log.stat().st_size
    with open(log, "a") as f:
        f.write("Traceback (most recent call last):\n  ...\nMemoryError\n")
    assert last_words(log, start) == "MemoryError"
    assert last_words(log) == "the first attempt ran out of disk"  # its error: line, read from the start
    with open(log, "a") as f:
        f.write("x" * 5_000_000 + "the end\n")
    said = last_words(log, start)
    assert said.endswith("the end") and said.startswith("…") and len(said) <= 2001


@pytest.mark.parametrize(
    "size, text",
    [(64 * 2**10, "64 KiB"), (64 * 2**20, "64 MiB"), (1 << 20, "1 MiB"), (3 * 2**29, "1.5 GiB"), (500, "500 bytes")],
)
def test_sizes_are_written_in_their_unit(size, text):
    assert size_text(size) == text

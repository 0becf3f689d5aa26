"""Helpers shared by the test files."""

import csv
import json
import os
import shlex
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fineprune_cli.cli import app

# make test runs two pytest-xdist workers on CI's two cores: torch's default, a thread per core
# in each worker and in each process a test starts, put four or more threads on two cores, which
# then spin-wait on each other in every parallel op (test_compare + test_checkpoint, one worker,
# loaded machine: 151 s of CPU at 2 threads, 35 s at 1). Set before torch is imported (children
# inherit it); a test of the unset default pops it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

TIMING = {"train_seconds", "overhead_seconds", "cpu_seconds"}  # columns that differ between identical runs
# a LeNet run of seconds on synthetic data: test_subset trims the synthetic set's 10,000 test
# images (seconds of evaluation an epoch)
TINY_FLAGS = {
    "model": "lenet",
    "dataset": "synthetic",
    "subset": 200,
    "test_subset": 100,
    "epochs": 2,
    "device": "cpu",
    "batch_size": 50,
}


# fine-pruning's schedule in epochs 1, 3, 5 ...: windows of 2 epochs from epoch 1, all in one block
PRUNE_ODD_EPOCHS = {"prune": True, "window": 2, "start": 1, "block": 1, "attenuation": 1}


def tiny(**overrides):
    """The flags of a tiny run (the CLI tests add --out and what they check): `name=value`
    sets --name value (`test_subset`: --test-subset; a list is joined by commas; True: the
    flag alone), None leaves the flag out."""
    args = []
    for name, value in {**TINY_FLAGS, **overrides}.items():
        flag = f"--{name.replace('_', '-')}"
        if value is True:
            args.append(flag)
        elif value is not None:
            args += [flag, ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)]
    return args


TINY = tiny()
# the same run as a config's settings
TINY_SETTINGS = {
    "model.name": "lenet",
    "data.dataset": "synthetic",
    "data.subset": 200,
    "data.test_subset": 100,
    "train.epochs": 2,
    "train.batch_size": 50,
    "run.device": "cpu",
}


def tiny_config(out=None, **settings):
    """The Config of a tiny run writing to `out`; `settings` by their keys, e.g.
    `**{"train.epochs": 4}`."""
    from fineprune_cli.engine.setup.config import build_config

    return build_config(None, {**TINY_SETTINGS, **({"run.out": str(out)} if out else {}), **settings})


_runner = CliRunner()


@pytest.fixture(autouse=True, scope="session")
def _own_cache_folder(tmp_path_factory):
    """Image-folder caches go to a temporary folder, not the user's ~/.cache (subprocesses too)."""
    os.environ["FINEPRUNE_CACHE"] = str(tmp_path_factory.mktemp("cache"))


# what the tests' fork server imports once: torch, its compiler (torch.optim's constructor imports
# it: ~2 s a process) and the CLI; the decisions' statistics (scipy, statsmodels: 0.9 s) and pyplot
# (0.4 s), which compare and report import late and every hostile group imports; not
# fineprune_cli.__main__ (runpy would warn that `-m` finds it loaded)
FORK_PRELOAD = ["torch", "torch._dynamo", "fineprune_cli.cli", "fineprune_cli.runner", "fineprune_cli.drivers.compare",
                "fineprune_cli.analysis.study", "matplotlib.pyplot"]  # fmt: skip


_FORK_SERVERS: list = []  # this worker's, started on first use


def fork_server():
    """This worker's fork server, which imported FORK_PRELOAD once (started on first use; the
    session's end closes it): see `forked`."""
    if not _FORK_SERVERS:
        from fineprune_cli.drivers.executors.forkclient import ForkServer

        _FORK_SERVERS.append(ForkServer(FORK_PRELOAD))
    return _FORK_SERVERS[0]


def pytest_sessionfinish(session):
    while _FORK_SERVERS:
        _FORK_SERVERS.pop().close()


@pytest.fixture(scope="session")
def forked(_own_cache_folder):
    """A fork server of this worker's that imported FORK_PRELOAD once: a test whose subject is a
    real process (its signals, exit code, leftovers, streams) starts `python ARGS` forked from it
    (`forked.popen(ARGS, ...)`, `forked.run(ARGS, ...)`: Popen's and run's options) in a fraction
    of a second, not a new interpreter's seconds of imports. Tests of what a fresh interpreter
    imports, and one or two of the installed entry point (test_cli), start `sys.executable`."""
    return fork_server()


# `python` for the script of a `compare --script` command: tests/forkrun runs the script forked
# from the `forked` server (the `preloaded_python` fixture names it), where the script process,
# its signals or its death, is not what the test is about
FORKRUN = f"{shlex.quote(sys.executable)} {Path(__file__).with_name('forkrun')}"


@pytest.fixture
def preloaded_python(forked, monkeypatch):
    """FORKRUN, with this worker's fork server's socket in the environment compare passes on."""
    monkeypatch.setenv("FINEPRUNE_TEST_FORK", forked.address)
    return FORKRUN


def synthetic_on_disk():
    """The synthetic set in this worker's cache before a test starts processes that load it: a
    first use generates it (~4 CPU s, one rank while the others wait), inside the run's start-up
    and its --dist-timeout; here once, kept in memory for this worker's in-process runs too."""
    from fineprune_cli.engine.inputs.data import make_synthetic

    make_synthetic()


def invoke(args):
    """Run the CLI in-process; returns click's Result (exit_code, output)."""
    return _runner.invoke(app, [str(a) for a in args])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_rows(run_dir, drop_timing=False):
    with open(Path(run_dir) / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows] if drop_timing else rows


def summary_of(run_dir):
    return json.loads((Path(run_dir) / "summary.json").read_text())


def trained_samples(out, **settings):
    """Each epoch's samples of a LeNet run through the engine's loop on 100 synthetic samples (8
    epochs, batch 25), written to `out`; `settings` by their keys with '__' for '.'."""
    from fineprune_cli.engine.setup.config import build_config
    from fineprune_cli.runner import train

    base = {"model.name": "lenet", "data.dataset": "synthetic", "data.subset": 100, "data.test_subset": 50}
    base |= {"train.epochs": 8, "train.batch_size": 25, "run.device": "cpu", "run.out": str(out)}
    train(build_config(None, {**base, **{k.replace("__", "."): v for k, v in settings.items()}}), show_progress=False)
    return [int(r["samples"]) for r in metrics_rows(out)]


class NoPeers:
    """The parameter-server chief's peers when it is alone (--num-ps 1): nothing to fetch, load
    or finish; `finished` says whether the chief released them."""

    finished = False

    def states(self):
        return []

    def load(self, states):
        pass

    def finish(self):
        self.finished = True


def spawn_ranks(rank_main, size, tmp_path, seconds=120):
    """Run rank_main(rank, size, init_file, out_dir) in `size` processes that meet through a
    file; each saves `rank<r>.pt` in out_dir, returned in rank order. The processes are forked
    from the fork server (a spawned one spent ~3 s importing torch and the test module before
    its rank began). A rank that fails fails the test with its output; a hang fails it too,
    instead of blocking CI."""
    import subprocess
    import time

    import torch

    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"from {rank_main.__module__} import {rank_main.__name__} as main; "
        f"main(int(sys.argv[1]), {size}, {str(tmp_path / 'rdzv')!r}, {str(tmp_path)!r})"
    )
    logs = [tmp_path / f"rank{r}.log" for r in range(size)]
    procs = []
    for rank, log in enumerate(logs):
        with open(log, "w") as out:
            procs.append(fork_server().popen(["-c", code, str(rank)], stdout=out, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + seconds
    try:
        while (codes := [p.poll() for p in procs]) != [0] * size:
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                pytest.fail(f"rank {failed[0]} exited {codes[failed[0]]}:\n{logs[failed[0]].read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"distributed ranks did not finish within {seconds} s")
            time.sleep(0.05)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(size)]


# --- suite order, tiny trainer and signal helpers (test_trainer, test_checkpoint, test_kakurenbo, test_stream) ---


def pytest_collection_modifyitems(config, items):
    """Slow tests first (a stable sort: file order within each kind): under pytest-xdist the
    longest start at once and the short ones fill in around them, not one long test left
    running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


class SignalAt:
    """A progress bar that sends this process a signal once `epoch` epochs are done."""

    def __init__(self, epoch, sig=None):
        import signal

        self.epoch, self.sig, self.seen = epoch, signal.SIGTERM if sig is None else sig, 0

    def advance(self, status=""):
        self.seen += 1
        if self.seen == self.epoch:
            os.kill(os.getpid(), self.sig)


def toy_dataset(n=96, channels=3, size=32, seed=0):
    """Four classes whose pixel level grows with the label: learnable in a few steps."""
    import torch

    from fineprune_cli.engine.inputs.data import Dataset

    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 4
    x = (torch.rand(n, channels, size, size, generator=g) * 60 + y.view(-1, 1, 1, 1) * 40).to(torch.uint8)
    return Dataset("toy", x, y, x[:32].clone(), y[:32].clone(), 4, ["a", "b", "c", "d"])


def toy_trainer(seed=0, augment=True, static=None, **train):
    """A LeNet Trainer on toy_dataset (batch 20, eval batch 16, milestone 2); `train` overrides TrainConfig."""
    import torch

    from fineprune_cli import models
    from fineprune_cli.engine.inputs.devicedata import DeviceData
    from fineprune_cli.engine.setup.config import TrainConfig
    from fineprune_cli.engine.training.trainer import Trainer

    torch.manual_seed(seed)
    model = models.create("lenet", 3, 4)
    cfg = TrainConfig(**{"batch_size": 20, "lr": 0.05, "milestones": [2], "eval_batch_size": 16, **train})
    return Trainer(
        model,
        DeviceData.build(toy_dataset(), torch.device("cpu"), augment),
        cfg,
        torch.device("cpu"),
        seed,
        static_batches=static,
    )

"""Asynchronous and mixed parameter-server modes (torch.distributed.rpc, gloo, CPU)."""

import csv
import json
import re
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

from fineprune_cli import models
from fineprune_cli.engine.config import TrainConfig
from fineprune_cli.engine.data import make_synthetic
from fineprune_cli.distributed.server import PeerLost, Server
from fineprune_cli.pruning import PruneConfig, create
from fineprune_cli.engine.trainer import DeviceData, Trainer
from conftest import free_port



def _run(tmp_path, mode, nproc, *extra, lr="0.03", epochs="4", subset="2048", name=None):
    out = tmp_path / (name or mode)
    cmd = [sys.executable, "-m", "fineprune_cli", "train", "--nproc-per-node", str(nproc), "--dist-mode", mode,
           "--group-size", "2", "--model", "lenet", "--dataset", "synthetic", "--subset", subset,
           "--test-subset", "500", "--epochs", epochs, "--lr", lr, "--batch-size", "64", "--device", "cpu",
           "--out", str(out), *extra]
    env = dict(os.environ, MASTER_PORT=str(free_port()))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return json.loads((out / "summary.json").read_text()), rows


def test_async_trains_and_reports_staleness(tmp_path):
    s, rows = _run(tmp_path, "async", 3)
    losses = [float(r["train_loss"]) for r in rows]
    assert s["status"] == "complete" and s["dist_mode"] == "async" and s["workers"] == 2
    # below its start (ln 10 = 2.30: pushes that were not applied would leave it there); how far
    # it falls in 4 epochs depends on staleness, i.e. on how busy the machine is
    assert min(losses[1:]) < 0.99 * losses[0]   # unapplied pushes: constant to ~0.1%
    assert s["updates"] == 4 * 2048 // 64                       # one push per worker batch
    # two workers push concurrently: some gradients were computed on weights the other had
    # already replaced (a single worker's would all be fresh)
    assert s["staleness_max"] >= 1 and 0 < s["staleness_mean"] <= s["staleness_max"]


def test_mixed_groups_push_averaged_gradients_with_pruning(tmp_path):
    # stale, momentum-carrying updates need a smaller lr than the synchronous recipe
    s, rows = _run(tmp_path, "mixed", 3, "--prune", "--window", "2", "--start", "1", "--block", "1",
                   "--attenuation", "1", lr="0.01", epochs="5")
    losses = [float(r["train_loss"]) for r in rows]
    assert s["groups"] == 1 and s["workers"] == 2               # workers 1+2 average, 1 pushes
    assert min(losses[1:]) < 0.9 * losses[0]
    assert s["pruning_epochs"] == [1, 3, 5] and [r["pruned"] for r in rows] == ["1", "0", "1", "0", "1"]
    assert int(rows[0]["samples"]) < 2048 - 600 and int(rows[1]["samples"]) > 2048 - 64
    # one push per group batch: 2 full epochs of 2048 / 64 = 32, 3 pruned of ceil(1434 / 64) = 23;
    # one group pushes alone, so nothing is stale
    assert s["updates"] == 2 * 32 + 3 * 23 and s["staleness_max"] == 0


@pytest.mark.slow
def test_async_counts_with_the_tolerance_given(tmp_path):
    """One worker trains deterministically, and the tolerance changes only what is counted: the
    same epoch counted with --tolerance 0.05 must count a subset of what 0 counts, and less."""
    prune = ["--prune", "--window", "2", "--start", "1", "--block", "1", "--attenuation", "1"]
    counts = {}
    for tol in ("0", "0.05"):
        _run(tmp_path, "async", 2, *prune, "--tolerance", tol, epochs="1", subset="512", name=tol)
        counts[tol] = torch.load(tmp_path / tol / "dropping_counts_window0.pt")
    assert bool((counts["0.05"] <= counts["0"]).all())
    assert 0 < counts["0.05"].sum() < counts["0"].sum()


def _server(timeout_s=1800.0):
    device = torch.device("cpu")
    data = DeviceData.build(make_synthetic(num_train=64, num_test=16), device, augment=False)
    trainer = Trainer(models.create("lenet"), data, TrainConfig(milestones=[], warmup_epochs=0), device)
    cfg = PruneConfig(enabled=True, window=2, start=1, attenuation=1, block=1, count=1, prune_fraction=0.25)
    policy = create("fine", 64, cfg)
    return Server(trainer, policy, pushers=2, timeout_s=timeout_s), trainer, policy


def test_server_waits_are_bounded_by_silence_not_by_the_epochs_length():
    server, trainer, _ = _server(timeout_s=0.6)
    grads = [torch.zeros_like(p) for p in trainer.model.parameters()]
    buffers = list(trainer.model.buffers())
    server.begin_epoch(1)
    server.end_epoch(1, [], 1.0, 8)                 # one worker ends its epoch; the other pushes ...

    def pushing():
        for _ in range(6):
            time.sleep(0.2)
            server.push(grads, buffers, server.version)
    thread = threading.Thread(target=pushing)
    thread.start()
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="epoch 1: 1 of 2 workers"):
        server.wait_epoch(1)                        # ... for 1.2 s, then falls silent (dies)
    waited = time.monotonic() - t0
    thread.join()
    assert 1.2 + 0.6 - 0.15 < waited < 1.2 + 0.6 + 1.5    # alive while pushing, failed 0.6 s after
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="did not close epoch 1"):
        server.begin_epoch(2)                       # a worker waiting for an epoch nobody closes
    assert time.monotonic() - t0 < 0.6 + 1.5
    server.heard -= 10                              # a long evaluation: the workers waited for it
    server.close_epoch(1)
    threading.Timer(0.3, lambda: [server.end_epoch(2, [], 1.0, 8) for _ in range(2)]).start()
    assert server.wait_epoch(2) == (2.0, 16)        # their silence then was not a death


def test_server_applies_pushes_and_measures_staleness():
    server, trainer, policy = _server()
    keep, pruned, weights, version = server.begin_epoch(1)
    assert version == 0 and len(keep) == 48 and pruned          # epoch 1 prunes (position 1 >= start 1)
    grads = [torch.ones_like(p) for p in trainer.model.parameters()]
    buffers = [b.clone() for b in trainer.model.buffers()]
    before = next(trainer.model.parameters()).detach().clone()
    server.push(grads, buffers, version)
    new, v2 = server.push(grads, buffers, version)             # computed on version 0, applied on 1
    assert v2 == 2 and server.staleness == [0, 1]
    assert not torch.equal(before, next(trainer.model.parameters()))
    counts = torch.zeros(64, dtype=torch.int32)
    counts[:5] = 3
    server.end_epoch(1, [counts], 10.0, 20)
    server.end_epoch(1, [counts], 6.0, 28)
    assert server.wait_epoch(1) == (16.0, 48)
    assert policy.scores[:5].tolist() == [6] * 5 and policy.scores[5:].sum() == 0  # both pushers' counts summed


@pytest.mark.slow
def test_a_dead_worker_ends_the_job_within_the_timeout(tmp_path):
    """Three processes started by hand (as srun would: no torchrun to notice a death); worker 2
    is killed once the run has started: the server and worker 1 end within --dist-timeout
    (plus start-up slack), with one line naming the cause, instead of waiting forever."""
    out, port = tmp_path / "run", str(free_port())
    cmd = [sys.executable, "-m", "fineprune_cli", "train", "--dist-mode", "async", "--model", "lenet",
           "--dataset", "synthetic", "--subset", "512", "--test-subset", "100", "--epochs", "3",
           "--batch-size", "64", "--device", "cpu", "--dist-timeout", "10", "--out", str(out), "--json"]
    procs = []
    for rank in range(3):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="3", LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True))
    try:
        deadline = time.monotonic() + 120
        while not (out / "config.yaml").exists():   # the server is serving: every rank has joined
            assert time.monotonic() < deadline and procs[0].poll() is None, procs[0].stderr.read()[-2000:]
            time.sleep(0.2)
        procs[2].kill()
        killed = time.monotonic()
        codes = [p.wait(timeout=90) for p in procs[:2]]
        assert time.monotonic() - killed < 60
        errors = [p.stderr.read().strip().splitlines() for p in procs[:2]]
        assert codes == [1, 1], errors
        # the kill lands in whichever epoch is running (start-up time varies with the machine)
        assert re.search(r"epoch \d: 1 of 2 workers \(groups\) ended it", errors[0][-1]), errors[0]
        assert "died or hangs" in errors[0][-1]
        assert "lost the parameter server" in errors[1][-1] or re.search(r"did not close epoch \d", errors[1][-1])
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] != "complete" and summary["epochs_completed"] < 3
    finally:
        for p in procs:
            p.kill()

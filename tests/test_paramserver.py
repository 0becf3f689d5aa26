"""Asynchronous and mixed parameter-server modes (torch.distributed.rpc, gloo, CPU)."""

import csv
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import PRUNE_ODD_EPOCHS, NoPeers, free_port, invoke, synthetic_on_disk, tiny
from fineprune_cli import models
from fineprune_cli.distributed.layout import Shards, flatten
from fineprune_cli.distributed.server import Chief, PeerLost, Server
from fineprune_cli.distributed.worker import worker_step
from fineprune_cli.engine.inputs.data import make_synthetic
from fineprune_cli.engine.inputs.devicedata import DeviceData
from fineprune_cli.engine.setup.config import TrainConfig
from fineprune_cli.engine.training.lrschedule import lr_at
from fineprune_cli.engine.training.trainer import Trainer
from fineprune_cli.pruning import PruneConfig, create


def _launch(forked, argv, timeout=300):
    """`fineprune ARGV` (a `--nproc-per-node` launch) on a port of its own, forked from the fork
    server: the command that starts torchrun needs no interpreter of its own (torchrun and its
    ranks are new ones, as a user's are)."""
    synthetic_on_disk()
    env = dict(os.environ, MASTER_PORT=str(free_port()))
    return forked.run(["-m", "fineprune_cli", *argv], capture_output=True, text=True, timeout=timeout, env=env)


def _ranks(forked, argv, size):
    """`fineprune ARGV` as `size` ranks forked from the fork server, each with the variables
    torchrun gives its ranks, meeting on a port of their own: a run whose subject is what the
    ranks do together, not how they were launched (the launch's own tests start torchrun).
    Each rank's stderr goes to a file beside the run folder (--out, or --resume), `proc.log` (no
    pipe to fill)."""
    flag = "--out" if "--out" in argv else "--resume"
    out = Path(argv[argv.index(flag) + 1])
    synthetic_on_disk()
    port = str(free_port())
    procs = []
    for rank in range(size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(size))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, TORCHELASTIC_RESTART_COUNT="0", OMP_NUM_THREADS="1")
        log = out.parent / f"{out.name}{flag}-rank{rank}.err"
        with open(log, "w") as err:
            proc = forked.popen(["-m", "fineprune_cli", *argv], env=env, stdout=subprocess.DEVNULL, stderr=err)
        proc.log = log
        procs.append(proc)
    return procs


def _ranks_ran(procs, timeout=300):
    """Wait for every rank; each must end with exit 0 (else the test fails with its stderr)."""
    deadline = time.monotonic() + timeout
    try:
        for rank, p in enumerate(procs):
            code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert code == 0, (rank, p.log.read_text()[-3000:])
    finally:
        for p in procs:
            p.kill()


def _args(out, mode, *extra, lr="0.03", epochs="4", subset="2048", **flags):
    return [
        "train",
        "--dist-mode",
        mode,
        "--group-size",
        "2",
        *tiny(subset=subset, test_subset=500, epochs=epochs, batch_size=64, **flags),
        "--lr",
        lr,
        "--out",
        str(out),
        *extra,
    ]


def _results(out):
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return json.loads((out / "summary.json").read_text()), rows


@pytest.mark.slow
def test_mixed_groups_push_averaged_gradients_with_pruning(tmp_path, forked):
    """Launched as a user launches it (`train --nproc-per-node 3`, through torchrun)."""
    # stale, momentum-carrying updates need a smaller lr than the synchronous recipe
    # no milestones: the default 30/60/80% of 5 epochs would cut the lr after epoch 2
    argv = _args(tmp_path / "mixed", "mixed", "--milestones", "", lr="0.01", epochs="5", **PRUNE_ODD_EPOCHS)
    proc = _launch(forked, [*argv, "--nproc-per-node", "3"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    s, rows = _results(tmp_path / "mixed")
    losses = [float(r["train_loss"]) for r in rows]
    assert s["groups"] == 1 and s["workers"] == 2  # workers 1+2 average, 1 pushes
    assert min(losses[1:]) < 0.9 * losses[0]
    assert s["pruning_epochs"] == [1, 3, 5] and [r["pruned"] for r in rows] == ["1", "0", "1", "0", "1"]
    assert int(rows[0]["samples"]) < 2048 - 600 and int(rows[1]["samples"]) > 2048 - 64
    # one push per group batch: 2 full epochs of 2048 / 64 = 32, 3 pruned of ceil(1434 / 64) = 23;
    # one group pushes alone, so nothing is stale
    assert s["updates"] == 2 * 32 + 3 * 23 and s["staleness_max"] == 0


@pytest.mark.slow
def test_every_mode_counts_as_one_process_does_with_the_tolerance_given(tmp_path, forked):
    """One batch of the whole (unaugmented) subset and an lr too small to move the weights:
    each sample's loss and its batch's mean are the same however the batch is split, so every
    mode must count exactly what one process counts with --tolerance 0.05, and that differs
    from what tolerance 0 counts (a mode that dropped the tolerance would be caught)."""
    common = [
        *tiny(subset=256, epochs=1, batch_size=256, **PRUNE_ODD_EPOCHS),
        "--lr",
        "1e-9",
        "--set",
        "data.augment=none",
        "--set",
        "run.group_size=2",
    ]
    # sync: tests/test_distributed.py checks its counts against one process
    runs = {"single": 1, "async": 2, "mixed": 3, "tolerance 0": 1}
    launched = {}
    counts = {}
    for name, size in runs.items():
        out = tmp_path / name.replace(" ", "")
        tol = "0" if name == "tolerance 0" else "0.05"
        argv = ["train", *common, "--tolerance", tol, "--out", str(out)]
        if size > 1:  # ranks of their own, both modes at once
            launched[name] = _ranks(forked, [*argv, "--dist-mode", name], size)
        else:  # one process: in this one (a process start costs seconds of imports)
            result = invoke(argv)
            assert result.exit_code == 0, (name, result.output[-2000:])
    for procs in launched.values():
        _ranks_ran(procs)
    for name in runs:
        counts[name] = torch.load(tmp_path / name.replace(" ", "") / "dropping_counts_window0.pt")
    assert 0 < counts["single"].sum() < counts["tolerance 0"].sum()
    for mode in ("async", "mixed"):
        assert torch.equal(counts[mode], counts["single"]), mode


def _trainer(num_train=64):
    device = torch.device("cpu")
    data = DeviceData.build(make_synthetic(num_train=num_train, num_test=16), device, augment=False)
    torch.manual_seed(0)
    return Trainer(models.create("lenet"), data, TrainConfig(milestones=[], warmup_epochs=0, lr=0.05), device)


def _chief(timeout_s=1800.0):
    trainer = _trainer()
    cfg = PruneConfig(enabled=True, window=2, start=1, attenuation=1, block=1, count=1, prune_fraction=0.25)
    policy = create("fine", 64, cfg)
    shards = Shards(list(trainer.model.parameters()), 1)
    return Chief(trainer, shards, policy, pushers=2, timeout_s=timeout_s), trainer, policy


@pytest.mark.slow
def test_server_waits_are_bounded_by_silence_not_by_the_epochs_length():
    chief, trainer, _ = _chief(timeout_s=0.6)
    grads = chief.shards.flatten([torch.zeros_like(p) for p in trainer.model.parameters()])
    buffers = flatten(list(trainer.model.buffers()))
    chief.begin_epoch(1)
    chief.end_epoch(1, [], 1.0, 8, buffers)  # one worker ends its epoch; the other pushes ...

    def pushing():
        for _ in range(6):
            time.sleep(0.2)
            chief.push(grads, chief.version, 1)

    thread = threading.Thread(target=pushing)
    thread.start()
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="epoch 1: 1 of 2 workers"):
        chief.wait_epoch(1)  # ... for 1.2 s, then falls silent (dies)
    waited = time.monotonic() - t0
    thread.join()
    assert 1.2 + 0.6 - 0.15 < waited < 1.2 + 0.6 + 1.5  # alive while pushing, failed 0.6 s after
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="did not close epoch 1"):
        chief.begin_epoch(2)  # a worker waiting for an epoch nobody closes
    assert time.monotonic() - t0 < 0.6 + 1.5
    chief.heard -= 10  # a long evaluation: the workers waited for it
    chief.close_epoch(1)
    threading.Timer(0.3, lambda: [chief.end_epoch(2, [], 1.0, 8, buffers) for _ in range(2)]).start()
    assert chief.wait_epoch(2) == (2.0, 16, False)  # their silence then was not a death
    other = Server(trainer, chief.shards, 0, timeout_s=0.4)
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="no call for 0.4 s"):
        other.wait_finished()  # a second server whose chief died
    assert 0.35 < time.monotonic() - t0 < 1.5


def test_server_applies_pushes_and_measures_staleness():
    chief, trainer, policy = _chief()
    keep, weights, pruned, _, lr, halt = chief.begin_epoch(1)
    assert len(keep) == 48 and pruned and weights is None and not halt  # epoch 1 prunes (1 >= start)
    grads = chief.shards.flatten([torch.ones_like(p) for p in trainer.model.parameters()])
    before = next(trainer.model.parameters()).detach().clone()
    chief.push(grads, 0, 1)
    new, v2 = chief.push(grads, 0, 1)  # computed on version 0, applied on 1
    assert v2 == 2 and chief.stale == {"sum": 1, "count": 2, "max": 1}
    assert not torch.equal(before, next(trainer.model.parameters()))
    assert torch.equal(new, chief.shards.flatten(list(trainer.model.parameters())))
    buffers = flatten(list(trainer.model.buffers()))
    counts = torch.zeros(64, dtype=torch.int32)
    counts[:5] = 3
    chief.end_epoch(1, [counts], 10.0, 20, buffers)
    chief.end_epoch(1, [counts], 6.0, 28, buffers, stop=True)
    assert chief.wait_epoch(1) == (16.0, 48, True)  # a worker was asked to stop
    assert policy.scores[:5].tolist() == [6] * 5 and policy.scores[5:].sum() == 0  # both pushers' counts summed
    chief.close_epoch(1, stop=True)
    assert chief.begin_epoch(2)[-1] is True  # the workers are told to return


def test_two_servers_make_the_same_updates_as_one():
    """Each of K servers steps SGD (momentum, weight decay, lr) on its shard only: pushing each
    its part of the same gradients must give exactly the one-server weights."""
    one, two = _trainer(), _trainer()
    single = Server(one, Shards(list(one.model.parameters()), 1), 0)
    shards = Shards(list(two.model.parameters()), 2)
    assert all(shards.members) and sorted(shards.order) == list(range(len(shards.owner)))
    pair = [Server(two, shards, k) for k in range(2)]
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        grads = [torch.randn(p.shape, generator=gen) for p in one.model.parameters()]
        single.push(single.shards.flatten(grads), step, 1)
        full = shards.flatten(grads)
        fresh = torch.cat([pair[k].push(shards.part(full, k).clone(), step, 1)[0] for k in range(2)])
        assert torch.equal(fresh, shards.flatten(list(two.model.parameters())))
    for a, b in zip(one.model.parameters(), two.model.parameters()):
        assert torch.equal(a, b)
    state = pair[1].state_dict()
    pair[1].push(shards.part(full, 1).clone(), 3, 1)
    pair[1].load_state_dict(state)  # a resumed server continues from its state
    assert pair[1].version == 3 and torch.equal(pair[1].pull()[0], state["weights"])


def test_a_worker_step_runs_on_bf16_data_under_autocast():
    """CUDA keeps the data in bf16; the parameter-server step must autocast as the synchronous
    loop does ('Input type (BFloat16) and bias type (float)' otherwise), reproduced on CPU."""
    trainer = _trainer()
    trainer.data.train_x = trainer.data.train_x.to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="type"):
        worker_step(trainer, torch.arange(8))  # without autocast: the reported failure
    trainer.bf16 = True
    losses, _ = worker_step(trainer, torch.arange(8), torch.full((64,), 2.0))
    assert losses.shape == (8,) and torch.isfinite(losses).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in trainer.model.parameters())


# the death tests' --dist-timeout: what the survivors wait before they end. The ranks read the
# synthetic set from the cache and are forked (no imports): the chief serves within a second of
# the start, so 5 s leaves margin on a loaded 2-core machine, and a hang still fails the test
DEAD_TIMEOUT = 5


def _by_hand(forked, out, size, *extra, epochs="3"):
    """Processes started by hand (as srun would: no torchrun to notice a death), forked from
    the fork server: real processes, killed for real, without an interpreter's imports each."""
    argv = [
        "train",
        "--dist-mode",
        "async",
        *tiny(subset=512, epochs=epochs, batch_size=64),
        "--dist-timeout",
        str(DEAD_TIMEOUT),
        "--out",
        str(out),
        "--json",
        *extra,
    ]
    procs = _ranks(forked, argv, size)
    deadline = time.monotonic() + 120
    while not (out / "config.yaml").exists():  # the chief is serving: every rank has joined
        assert time.monotonic() < deadline and procs[0].poll() is None, procs[0].log.read_text()[-2000:]
        time.sleep(0.2)
    return procs


def _survivors_end(procs, victim):
    """Kill `victim`; every other process must end with exit 1 within --dist-timeout plus
    slack; returns their last stderr lines."""
    procs[victim].kill()
    killed = time.monotonic()
    rest = [p for i, p in enumerate(procs) if i != victim]
    codes = [p.wait(timeout=90) for p in rest]
    assert time.monotonic() - killed < 60
    errs = [p.log.read_text() for p in rest]
    for err in errs:  # shown only if the test fails: where a stray traceback came from
        print(err[-3000:])
    lines = [(err.strip().splitlines() or [""])[-1] for err in errs]
    assert codes == [1] * len(rest), lines
    return lines


@pytest.mark.slow
def test_a_dead_worker_ends_the_job_within_the_timeout(tmp_path, forked):
    """Worker 2 is killed once the run has started: the server and worker 1 end within
    --dist-timeout, with one line naming the cause, instead of waiting forever."""
    procs = _by_hand(forked, tmp_path / "run", 3)
    try:
        chief, worker = _survivors_end(procs, victim=2)
        # the kill lands in whichever epoch is running (start-up time varies with the machine)
        assert re.search(r"epoch \d: 1 of 2 workers \(groups\) ended it", chief) and "died or hangs" in chief
        assert "lost parameter server 0" in worker or re.search(r"did not close epoch \d", worker)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["status"] != "complete" and summary["epochs_completed"] < 3
    finally:
        for p in procs:
            p.kill()


@pytest.mark.slow
def test_a_dead_chief_server_ends_the_other_server_and_the_workers(tmp_path, forked):
    """--num-ps 2: the chief (rank 0) dies; the second server hears nobody and the workers
    lose their server: all end within the timeout, each with one line."""
    procs = _by_hand(forked, tmp_path / "run", 4, "--num-ps", "2", epochs="20")
    try:
        # once an epoch is recorded every process is past new_group, which needs the chief's
        # store (a death before that is test_a_chief_that_dies_while_a_worker_builds_its_groups)
        deadline = time.monotonic() + 120
        while not _rows(tmp_path / "run"):
            assert time.monotonic() < deadline and procs[0].poll() is None
            time.sleep(0.1)
        server, *workers = _survivors_end(procs, victim=0)
        assert f"parameter server 1: no call for {DEAD_TIMEOUT} s" in server
        assert all("lost parameter server" in w for w in workers), workers
    finally:
        for p in procs:
            p.kill()


@pytest.mark.slow
def test_async_with_two_servers_trains_and_resumes_after_sigkill(tmp_path, forked):
    """Two servers, two workers. SIGKILL to the whole job after an epoch's checkpoint; `train
    --resume --nproc-per-node` continues from it: the checkpointed epochs kept as they were,
    the rest trained, the update count carried on; the loss falls and some pushes are stale.
    Both jobs' four ranks are forked (`_ranks`, with torchrun's variables): the ranks' resume is
    the subject here; test_launch checks that `train --resume --nproc-per-node` hands torchrun
    `train --resume RUN`, and test_mixed_groups_push_averaged_gradients_with_pruning launches a
    parameter-server run through torchrun itself."""
    out = tmp_path / "run"
    argv = [
        "train",
        "--dist-mode",
        "async",
        "--num-ps",
        "2",
        *tiny(subset=1024, epochs=6, batch_size=64),
        "--lr",
        "0.03",
        "--out",
        str(out),
    ]
    job = _ranks(forked, argv, 4)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.pt").exists() or len(_rows(out)) < 2:
            assert time.monotonic() < deadline and job[0].poll() is None, job[0].log.read_text()[-2000:]
            time.sleep(0.1)
    finally:
        for p in job:  # SIGKILL to every process of the job
            p.kill()
        for p in job:
            p.wait()
    saved = torch.load(out / "checkpoint.pt", weights_only=True)["totals"]["rows"]
    before = _rows(out)
    _ranks_ran(_ranks(forked, ["train", "--resume", str(out)], 4))
    s, after = json.loads((out / "summary.json").read_text()), _rows(out)
    assert s["status"] == "complete" and s["resumed_after_epochs"] == [len(saved)] and len(saved) >= 1
    assert after[: len(saved)] == before[: len(saved)] and len(after) == 6
    assert s["workers"] == 2 and s["servers"] == 2
    assert s["updates"] == 6 * 1024 // 64  # one push per worker batch, across the restart
    losses = [float(r["train_loss"]) for r in after]
    # below its start (ln 10 = 2.30: pushes that were not applied would leave it there)
    assert min(losses[1:]) < 0.99 * losses[0]
    # two workers push concurrently: some gradients were computed on weights the other had
    # already replaced (a single worker's would all be fresh)
    assert s["staleness_max"] >= 1 and 0 < s["staleness_mean"] <= s["staleness_max"]


def _rows(out):
    try:
        with open(out / "metrics.csv") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("ending", ["diverged", "stop asked"])
def test_the_chief_records_a_stop_and_releases_the_workers(tmp_path, ending):
    """A non-finite loss ends the run 'diverged'; a worker's SIGTERM ends it 'interrupted' with a
    checkpoint and the resume command. Either way the workers' next epoch returns 'stop' and the
    other servers are finished, so every process leaves in order."""
    from fineprune_cli.distributed.chief import serve_epoch
    from fineprune_cli.engine.records.record import RunRecord
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.engine.training import checkpoint
    from fineprune_cli.engine.training.totals import Totals, new_summary
    from fineprune_cli.engine.training.world import World

    chief, trainer, _ = _chief(timeout_s=5.0)  # unreleased workers: PeerLost in 5 s, not a hang
    chief.pushers = 1
    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.train.epochs = "lenet", "synthetic", 3
    record = RunRecord(tmp_path / "run", fresh=True)
    summary = new_summary(cfg, trainer.device, record.path, 64, 3)
    chief.begin_epoch(1)
    loss = float("nan") if ending == "diverged" else 40.0
    chief.end_epoch(1, [], loss, 48, flatten(list(trainer.model.buffers())), stop=ending == "stop asked")
    peers = NoPeers()
    expected = checkpoint.Diverged if ending == "diverged" else checkpoint.Interrupted
    with checkpoint.StopRequest() as stop, pytest.raises(expected) as err:
        serve_epoch(cfg, chief, peers, record, summary, Totals(), 1, stop, World(0, 3))
    record.close()
    status = json.loads((record.path / "summary.json").read_text())["status"]
    assert chief.begin_epoch(2)[-1] is True and peers.finished
    if ending == "diverged":
        assert status == "diverged" and "diverged at epoch 1" in str(err.value)
    else:
        assert status == "interrupted" and (record.path / "checkpoint.pt").exists()
        assert f"fineprune train --resume {record.path} --nproc-per-node 3" in str(err.value)


def test_a_failed_teardown_does_not_hide_why_the_run_ended(monkeypatch):
    """A worker that lost its server leaves RPC while the store's host (rank 0) is dead: the
    teardown's 'Broken pipe' must not replace the 'lost parameter server' line (it did, as a
    traceback); after a normal finish a teardown failure is still an error."""
    from fineprune_cli.distributed import paramserver

    def broken(graceful):
        raise RuntimeError("Broken pipe")

    monkeypatch.setattr(paramserver.rpc, "shutdown", broken)
    paramserver.stop(finished=False)
    with pytest.raises(RuntimeError, match="Broken pipe"):
        paramserver.stop(finished=True)


def test_a_send_that_fails_at_once_names_the_server(monkeypatch):
    from fineprune_cli.distributed import paramserver

    def refused(to, fn, args):
        raise RuntimeError("Broken pipe\nmore detail")

    monkeypatch.setattr(paramserver.rpc, "rpc_async", refused)
    with pytest.raises(PeerLost, match=r"^lost parameter server 1: Broken pipe$"):
        paramserver.call(1, paramserver._pull)


@pytest.mark.parametrize(
    "error, line",
    [
        (torch.distributed.DistNetworkError, r"^lost parameter server 0, which holds .*store: Broken pipe$"),
        (torch.distributed.DistBackendError, r"^lost a process of the group: Broken pipe$"),
    ],
)
def test_a_chief_that_dies_while_a_worker_builds_its_groups_is_named(monkeypatch, error, line):
    """The chief can be serving (and die) while a slow worker is still in new_group, which
    talks to the store on rank 0: that 'Broken pipe' ended the worker in a traceback (CI). A
    store error names the chief; another group error only says a process is gone."""
    import types

    from fineprune_cli.distributed import paramserver
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.engine.training.world import World

    def store_gone(ranks, **kwargs):
        raise error("Broken pipe\ntraceback of the store")

    stopped = []
    trainer = types.SimpleNamespace(model=torch.nn.Linear(2, 2))
    monkeypatch.setattr(paramserver, "start", lambda world, cfg: [[1]])
    monkeypatch.setattr(paramserver, "build_on_own_device", lambda cfg, world: (trainer, None))
    monkeypatch.setattr(paramserver.dist, "new_group", store_gone)
    monkeypatch.setattr(paramserver, "stop", stopped.append)
    with pytest.raises(PeerLost, match=line):
        paramserver.train_ps(Config(), World(1, 2), None)
    assert stopped == [False]  # left without waiting for the dead peers


def test_a_peer_that_dies_while_the_chief_shares_the_sizes_is_one_line(monkeypatch):
    """A peer gone during the first collective (a server timed out on a loaded machine): gloo
    raises a plain RuntimeError there, not a DistError, and the chief ended in a traceback.
    Any other RuntimeError is a bug and keeps its traceback."""
    import types

    from fineprune_cli.distributed import paramserver
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.engine.training.world import World

    def closed(objects, src):
        raise RuntimeError("[gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:41707.\nmore")

    trainer = types.SimpleNamespace(channels=1, classes=10, data=types.SimpleNamespace(num_train=64))
    monkeypatch.setattr(paramserver, "start", lambda world, cfg: [[1]])
    monkeypatch.setattr(paramserver, "build_on_own_device", lambda cfg, world: (trainer, None))
    monkeypatch.setattr(paramserver.dist, "new_group", lambda ranks, **kwargs: None)
    monkeypatch.setattr(paramserver.dist, "get_rank", lambda: 0)
    monkeypatch.setattr(paramserver, "stop", lambda finished: None)
    monkeypatch.setattr(paramserver.dist, "broadcast_object_list", closed)
    with pytest.raises(PeerLost, match=r"^lost a process of the group: \[gloo.*Connection closed by peer .*41707\.$"):
        paramserver.train_ps(Config(), World(0, 2), None)

    def timed_out(objects, src):  # the chief's build took longer than --dist-timeout (CI)
        raise RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation")

    monkeypatch.setattr(paramserver.dist, "broadcast_object_list", timed_out)
    with pytest.raises(PeerLost, match=r"^waited 1800 s \(--dist-timeout\) for the other processes: .*Timed out"):
        paramserver.train_ps(Config(), World(0, 2), None)

    def bug(objects, src):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(paramserver.dist, "broadcast_object_list", bug)
    with pytest.raises(RuntimeError, match="^shape mismatch$"):
        paramserver.train_ps(Config(), World(0, 2), None)


class OnGpu(torch.Tensor):
    """A CPU tensor that says it lives on a GPU until it is moved: stands in for CUDA state,
    which RPC (no device maps set) refuses to carry."""

    @property
    def device(self):
        return torch.device("cuda", 0)

    def to(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).to(*args, **kwargs)


def _all_on_host(tree):
    if isinstance(tree, torch.Tensor):
        return type(tree) is torch.Tensor and tree.device.type == "cpu"
    if isinstance(tree, dict):
        return all(_all_on_host(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return all(_all_on_host(v) for v in tree)
    return True


def test_a_servers_state_is_handed_out_on_the_cpu_wherever_its_shard_lives():
    """The chief fetches every server's state (momentum buffers on that server's GPU) over RPC
    each epoch: with --num-ps 2 on CUDA the first epoch ended in a false 'lost parameter server 1'."""
    chief, trainer, _ = _chief()
    grads = chief.shards.flatten([torch.ones_like(p) for p in trainer.model.parameters()])
    chief.push(grads, 0, 1)
    for state in chief.optimizer.state.values():
        state["momentum_buffer"] = state["momentum_buffer"].as_subclass(OnGpu)
    state = chief.state_dict()
    assert state["optimizer"]["state"] and _all_on_host(state)
    chief.load_state_dict(state)  # and it loads back onto the shard's device
    assert all(type(s["momentum_buffer"]) is torch.Tensor for s in chief.optimizer.state.values())


def test_what_is_sent_to_a_server_is_on_the_cpu(monkeypatch):
    """A resumed chief sends each server its state from the checkpoint, which was loaded onto
    the run's device: CUDA tensors over RPC."""
    from fineprune_cli.distributed import paramserver

    sent = []

    def capture(to, fn, args):
        sent.append(args)
        done = torch.futures.Future()
        done.set_result(None)
        return done

    monkeypatch.setattr(paramserver.rpc, "rpc_async", capture)
    state = {
        "weights": torch.ones(3).as_subclass(OnGpu),
        "optimizer": {"state": {0: {"m": torch.ones(2).as_subclass(OnGpu)}}},
    }
    paramserver.call(1, paramserver._load_shard, state)
    assert _all_on_host(sent) and torch.equal(sent[0][0]["weights"], torch.ones(3))


def test_a_worker_trains_through_the_compiled_forward():
    """--compile: async/mixed workers called the eager model, so `scale` set compiled DDP
    against eager workers."""
    trainer = _trainer()
    eager, calls = trainer.forward, []
    trainer.forward = lambda x: calls.append(x.shape[0]) or eager(x)
    worker_step(trainer, torch.arange(8))
    assert calls == [8]


def test_a_server_other_than_the_chief_loads_no_data(monkeypatch):
    """Every server loaded the whole dataset (and took a GPU): now only the chief does; the
    others build the model from the sizes the chief sends, initialised as the chief's."""
    from fineprune_cli.distributed import paramserver
    from fineprune_cli.engine.setup.config import build_config
    from fineprune_cli.engine.training import build
    from fineprune_cli.engine.training.world import World

    cfg = build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "run.dist_mode": "async",
            "run.num_ps": 2,
            "run.device": "cpu",
            "train.batch_size": 32,
        },
    )
    served = []

    class Serving:
        def __init__(self, host, shards, k, timeout_s):
            served.append((host, shards, k))

        def wait_finished(self):
            pass

    monkeypatch.setattr(build, "load_data", lambda *a: pytest.fail("a server loaded the data"))
    monkeypatch.setattr(paramserver, "start", lambda world, cfg: [[2]])
    monkeypatch.setattr(paramserver.dist, "new_group", lambda ranks, **kw: None)
    monkeypatch.setattr(paramserver, "share_sizes", lambda trainer: (3, 10, 1000))
    monkeypatch.setattr(paramserver, "Server", Serving)
    monkeypatch.setattr(paramserver, "publish", lambda server: server)
    monkeypatch.setattr(paramserver, "stop", lambda finished: None)
    assert paramserver.train_ps(cfg, World(1, 3), None) is None
    ((host, shards, k),) = served
    assert k == 1 and host.warmup_steps == 32  # ceil(1000 / 32) steps, 1 epoch
    reference = build.build_model(cfg, 3, 10)
    assert all(torch.equal(a, b) for a, b in zip(host.model.parameters(), reference.parameters()))
    assert len(shards.members) == 2


def test_mixed_groups_average_on_the_device_and_copy_to_the_host_once():
    """NCCL subgroups when the workers hold GPUs (gloo averaged through host memory, a copy each
    step for every member); gloo on the CPU, where the tensor already is the host's."""
    from fineprune_cli.distributed.paramserver import group_backend
    from fineprune_cli.distributed.worker import HostBuffer
    from fineprune_cli.engine.setup.config import Config

    cfg = Config()
    cfg.run.dist_mode = "mixed"
    assert group_backend(cfg, cuda=True) == "nccl" and group_backend(cfg, cuda=False) == "gloo"
    cfg.run.device = "cpu"
    assert group_backend(cfg, cuda=True) == "gloo"
    cfg.run.device, cfg.run.dist_mode = "cuda", "async"  # async workers form no groups
    assert group_backend(cfg, cuda=True) == "gloo"
    t = torch.ones(4)
    assert HostBuffer().copy(t) is t


def _rpc_rank_main(rank, size, init_file, out_dir):
    """Joins as a parameter-server run does, with Python's sockets unable to bind: RPC must
    meet through the group's store, not through a port picked by binding and closing one
    (another process can take it in between)."""
    import socket

    from fineprune_cli.distributed import paramserver
    from fineprune_cli.engine.setup.config import Config
    from fineprune_cli.engine.training.world import World

    def refuse(self, address):
        raise OSError("a port was picked by binding it")

    socket.socket.bind = refuse
    with open(os.path.join(out_dir, "port")) as f:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=f.read())
    cfg = Config()
    cfg.run.dist_mode, cfg.run.dist_timeout = "async", 30
    paramserver.start(World(rank, size), cfg)
    peer = paramserver.rpc.rpc_sync("ps0", os.getpid) if rank else os.getpid()
    paramserver.stop()
    torch.save({"peer": peer}, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.mark.slow
def test_rpc_meets_through_the_process_groups_store(tmp_path):
    (tmp_path / "port").write_text(str(free_port()))
    from conftest import spawn_ranks

    zero, one = spawn_ranks(_rpc_rank_main, 2, tmp_path, seconds=90)
    assert one["peer"] == zero["peer"]  # worker 1 reached server 0 over RPC


def test_the_chief_hands_out_each_epochs_lr_and_servers_step_with_it():
    """--lr-schedule progress and --lr-scale-pruned with parameter servers: the chief computes
    the epoch's lr from its plan (lr_for) and gives it to the workers, who pass it with every
    push; a server steps with it (times the warm-up), not with the milestone schedule."""
    chief, trainer, policy = _chief()
    chief.lr_for = lambda epoch, plan: 0.5 * plan.samples / 64
    keep, _, _, _, lr, _ = chief.begin_epoch(1)
    assert lr == 0.5 * len(keep) / 64 and chief.begin_epoch(1)[4] == lr  # asked again: the same
    grads = chief.shards.flatten([torch.ones_like(p) for p in trainer.model.parameters()])
    chief.push(grads, 0, 1, lr)
    expected = lr / trainer.warmup_steps if trainer.warmup_steps else lr  # step 0 of the ramp, if any
    assert chief.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-15)
    assert expected != lr_at(trainer.cfg, 1, 0, trainer.warmup_steps)  # not the milestone schedule


@pytest.mark.slow
def test_kakurenbo_runs_async_with_its_refresh_pass_and_scaled_lr(tmp_path, forked):
    argv = _args(
        tmp_path / "async",
        "async",
        "--prune",
        "--policy",
        "kakurenbo",
        "--kakurenbo-tau",
        "0",
        "--lr-schedule",
        "progress",
        "--milestones",
        "3",
        subset="512",
        epochs="3",
    )
    _ranks_ran(_ranks(forked, argv, 3))
    s, rows = _results(tmp_path / "async")
    assert int(rows[0]["samples"]) == 512 and any(int(r["samples"]) < 512 for r in rows[1:])
    assert s["refresh_seconds"] > 0
    for r in rows[1:]:  # warm-up over after epoch 1
        assert float(r["lr"]) == pytest.approx(0.03 * 512 / int(r["samples"]), rel=1e-12)


def test_the_build_after_joining_imports_nothing_heavy(tmp_path):
    """The others wait in the first collective while the chief builds its trainer: the
    optimizer's lazy import of torch._dynamo (~4 s on a loaded 2-core machine) made a server
    wait past a 10 s --dist-timeout on CI. It is imported before the join (a fresh process:
    this one has imported it long ago)."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from conftest import tiny_config
from fineprune_cli.distributed import paramserver
from fineprune_cli.engine.training.world import World
paramserver.dist.init_process_group = lambda *a, **k: None
paramserver.rpc.init_rpc = lambda *a, **k: None
paramserver.worlds.group_store = lambda world, timeout: None
cfg = tiny_config()
cfg.run.dist_mode, cfg.run.num_ps = "async", 1
world = World(0, 2)
paramserver.start(world, cfg)
before = set(sys.modules)
paramserver.build_on_own_device(cfg, world)
print(sorted(m for m in set(sys.modules) - before if m.startswith(("torch._dynamo", "torch._inductor"))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"

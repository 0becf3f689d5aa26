"""Data-parallel (sync) mode on CPU with gloo: spawned ranks, each with a timeout."""

import json
import os
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from conftest import PRUNE_ODD_EPOCHS, free_port, spawn_ranks, tiny
from fineprune_cli.distributed.launch import without_launch_flags
from fineprune_cli.engine.training.world import World, from_env, step_slices
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import Pruner
from fineprune_cli.pruning.schedule import PruneSchedule

N, BATCH, STEPS = 96, 12, 8
SCHEDULE = dict(window=3, start=1, attenuation=1, block=1, count=1)


def _losses(epoch):
    """The per-sample losses of epoch `epoch`, as any process would compute them."""
    return torch.rand(N, generator=torch.Generator().manual_seed(100 + epoch)) * 3


def _order(epoch):
    return torch.randperm(N, generator=torch.Generator().manual_seed(epoch))


def _feed(pruner, world, epochs=3):
    """Run the pruner for some epochs on fixed losses; returns each epoch's keep-list."""
    keeps = []
    for epoch in range(1, epochs + 1):
        keep = pruner.begin_epoch(epoch)
        keeps.append(keep.tolist())
        order = keep[_order(epoch)[: keep.numel()].argsort()]  # any shared shuffle of keep
        losses = _losses(epoch)
        for batch in order.split(BATCH):
            mine = step_slices(batch, BATCH, world)
            if not mine:
                continue
            mean = losses[batch[: len(mine[0]) * world.size]].mean()  # the global batch's mean
            pruner.update(mine[0], losses[mine[0]], mean if world.active else None)
    return keeps


def _rank_main(rank, size, init_file, out_dir):
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=size, timeout=timedelta(seconds=60)
    )
    world = World(rank, size, rank)

    def reduce(counts):
        counts = counts.clone()
        dist.all_reduce(counts)
        return counts

    pruner = Pruner(N, PruneSchedule(**SCHEDULE), 0.25, seed=5, reduce=reduce)
    keeps = _feed(pruner, world)
    torch.save({"keeps": keeps, "counts": pruner.counts.clone()}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("size", [2, 3])
def test_ranks_agree_and_counts_equal_a_single_process(tmp_path, size):
    results = spawn_ranks(_rank_main, size, tmp_path)
    single = Pruner(N, PruneSchedule(**SCHEDULE), 0.25, seed=5)
    # the single process sees the same global batches, cut the same way
    single_keeps = _feed_single(single, size)
    for r in results:
        assert r["keeps"] == results[0]["keeps"]  # identical keep-lists on every rank
        assert torch.equal(r["counts"], single.counts)  # global counts = one process's
    assert results[0]["keeps"] == single_keeps
    assert any(len(k) < N for k in single_keeps)  # pruning happened


def _feed_single(pruner, size):
    keeps = []
    for epoch in range(1, 4):
        keep = pruner.begin_epoch(epoch)
        keeps.append(keep.tolist())
        order = keep[_order(epoch)[: keep.numel()].argsort()]
        losses = _losses(epoch)
        for batch in order.split(BATCH):
            batch = batch[: batch.numel() // size * size]
            if batch.numel():
                pruner.update(batch, losses[batch])
    return keeps


def test_step_slices_split_each_global_batch_evenly():
    order = torch.arange(29)
    parts = [step_slices(order, 8, World(r, 3)) for r in range(3)]
    assert [len(p) for p in parts] == [4, 4, 4]
    assert [p.numel() for p in parts[0]] == [2, 2, 2, 1]  # last global batch: 5 -> 3 used
    together = torch.cat([torch.cat([parts[r][s] for r in range(3)]) for s in range(4)])
    assert together.tolist() == list(range(6)) + list(range(8, 14)) + list(range(16, 22)) + [24, 25, 26]


def test_world_from_env():
    assert from_env({}).size == 1 and from_env({}).main
    w = from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (w.rank, w.size, w.local_rank, w.main) == (1, 2, 1, False)
    step = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4"}
    w = from_env({**step, "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "MASTER_ADDR": "n1"})
    assert (w.rank, w.size, w.local_rank) == (3, 4, 1)
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        from_env({**step, "SLURM_PROCID": "0"})


@pytest.mark.parametrize(
    "env",
    [
        # the batch script of `sbatch --ntasks 8` (or an salloc shell): the allocation's variables, no step
        {
            "SLURM_JOB_ID": "7",
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_TASKS_PER_NODE": "4(x2)",
            "MASTER_ADDR": "n1",
        },
        # `srun --ntasks 1 fineprune ...` inside that allocation: a step of one task
        {
            "SLURM_JOB_ID": "7",
            "SLURM_NTASKS": "8",
            "SLURM_STEP_ID": "3",
            "SLURM_STEP_NUM_TASKS": "1",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "MASTER_ADDR": "n1",
        },
    ],
)
def test_a_lone_process_in_a_multi_task_slurm_allocation_is_no_rank(env):
    """Only srun's tasks of a multi-task step are ranks; anything else inside the allocation
    would wait --dist-timeout for peers that never come."""
    assert from_env(env) == World()


def test_a_rank_restarted_by_torchrun_joins_under_its_attempt_not_the_dead_ones_keys():
    """torchrun's agent serves one store to every attempt; a restarted rank that read the
    group's keys unprefixed could get a dead rank's address (seen: 'Connection refused', or a
    hang). Each restart joins under a prefix of its own; a first start and a store of our own
    are left as they are."""
    from fineprune_cli.engine.training.world import restart_store

    timeout = timedelta(seconds=10)
    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timeout)
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(agent.port), "TORCHELASTIC_USE_AGENT_STORE": "True"}
    assert restart_store({**env, "TORCHELASTIC_RESTART_COUNT": "0"}, timeout) is None
    assert (
        restart_store({**env, "TORCHELASTIC_RESTART_COUNT": "2", "TORCHELASTIC_USE_AGENT_STORE": "False"}, timeout)
        is None
    )  # rank 0's own store died with it
    agent.set("rank_0", "dead rank's address")
    agent.set("rank_1", "the other dead rank's address")
    store = restart_store({**env, "TORCHELASTIC_RESTART_COUNT": "2"}, timeout)
    store.set("rank_0", "new address")
    assert agent.get("rank_0") == b"dead rank's address" and store.get("rank_0") == b"new address"
    assert not store.check(["rank_1"])  # nothing of the attempt before shows through


def test_launch_flags_are_not_passed_on():
    argv = ["train", "--nproc-per-node", "2", "--model", "lenet", "--nnodes=1", "--start", "1"]
    assert without_launch_flags(argv) == ["train", "--model", "lenet", "--start", "1"]


@pytest.mark.slow
def test_two_process_pruned_run_writes_one_run_folder(tmp_path, forked):
    out = tmp_path / "run"
    cmd = [  # forked: the command that starts torchrun (torchrun and its ranks are new interpreters)
        "-m",
        "fineprune_cli",
        "train",
        "--nproc-per-node",
        "2",
        *tiny(subset=512, test_subset=500, epochs=3, batch_size=64, **PRUNE_ODD_EPOCHS),
        "--out",
        str(out),
        "--json",
    ]
    env = dict(os.environ, MASTER_PORT=str(free_port()))
    proc = forked.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "complete" and s["world_size"] == 2 and s["pruning_epochs"] == [1, 3]
    assert s["samples_skipped"] == 2 * round(0.3 * 512)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # one folder, written by rank 0
    assert proc.stdout.count('"status": "complete"') == 1  # rank 0 alone prints


def _padded_rank_main(rank, size, init_file, out_dir):
    """One epoch of 100 samples in global batches of 16 (6 full, then 4) on `size` DDP ranks,
    padded to static shapes and not; records the batch sizes each rank's model ran."""
    from fineprune_cli import models
    from fineprune_cli.engine.inputs.data import make_synthetic
    from fineprune_cli.engine.inputs.devicedata import DeviceData
    from fineprune_cli.engine.setup.config import TrainConfig
    from fineprune_cli.engine.training.trainer import Trainer

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=size, timeout=timedelta(seconds=60)
    )
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    data = DeviceData.build(make_synthetic(num_train=100, num_test=10, image_size=16), cpu, augment=False)
    out = {}
    for static in (True, False):
        torch.manual_seed(0)
        model = models.create("lenet", 3, 10)
        sizes = []
        model.register_forward_hook(lambda m, i, o: sizes.append(o.shape[0]))  # noqa: B023 (used only within this iteration)
        cfg = TrainConfig(batch_size=16, lr=0.05, milestones=[], warmup_epochs=0)
        trainer = Trainer(model, data, cfg, cpu, seed=3, static_batches=static, world=World(rank, size))
        out[static] = (sizes, trainer.train_epoch(1).item(), [p.detach().clone() for p in model.parameters()])
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_static_batches_pad_each_rank_to_its_own_share_of_the_batch(tmp_path):
    """--compile with DDP: every step runs batch / ranks samples on each rank (the padded last
    one too), and the padding trains nothing: the same losses and weights as unpadded."""
    for r in spawn_ranks(_padded_rank_main, 2, tmp_path):
        padded, plain = r[True], r[False]
        assert padded[0] == [8] * 7  # 16 / 2 per step; the last 2 padded to 8
        assert plain[0] == [8] * 6 + [2]
        assert padded[1] == pytest.approx(plain[1], rel=1e-5)
        for a, b in zip(padded[2], plain[2]):
            assert torch.allclose(a, b, atol=1e-6)


def _eval_rank_main(rank, size, init_file, out_dir):
    """Two DDP ranks, a test set of one sample (rank 1's shard is empty), a model with
    batch-norm buffers: evaluation must end on both; each rank's crops and flips of the same
    samples, and rank 1's over two epochs, are recorded."""
    from fineprune_cli import models
    from fineprune_cli.engine.inputs.data import make_synthetic
    from fineprune_cli.engine.inputs.devicedata import DeviceData
    from fineprune_cli.engine.setup.config import TrainConfig
    from fineprune_cli.engine.training.trainer import Trainer

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=size, timeout=timedelta(seconds=20)
    )
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    data = DeviceData.build(make_synthetic(num_train=64, num_test=1), cpu, augment=True)
    torch.manual_seed(0)
    trainer = Trainer(
        models.create("resnet18", 3, 10),
        data,
        TrainConfig(batch_size=16, milestones=[]),
        cpu,
        seed=3,
        world=World(rank, size),
    )
    idx = torch.arange(8)
    crops = [data.batch(idx, trainer.augment_generator(e)) for e in (1, 1, 2)]
    trainer.train_epoch(1)
    loss, acc = trainer.evaluate()
    buffers = [b.clone() for b in trainer.model.buffers()]
    torch.save({"crops": crops, "eval": (loss, acc), "buffers": buffers}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_ddp_evaluation_ends_with_an_empty_shard_and_ranks_draw_their_own_augmentation(tmp_path):
    """Evaluation went through the DDP wrapper, whose forward may broadcast buffers (a
    collective that rank 1, with no test sample, would never join); under no_grad torch 2.14's
    does not, so each rank evaluated with its own batch-norm statistics. Now every rank uses
    rank 0's, the model the checkpoint keeps, broadcast once outside the batch loop. Every rank
    drew the same crops and flips (one shared generator): N ranks augmented alike."""
    zero, one = spawn_ranks(_eval_rank_main, 2, tmp_path, seconds=100)
    assert zero["eval"] == one["eval"]  # both ended, with one result
    assert all(torch.equal(a, b) for a, b in zip(zero["buffers"], one["buffers"]))
    assert torch.equal(zero["crops"][0], zero["crops"][1])  # a rank's draw is fixed by its epoch ...
    assert not torch.equal(zero["crops"][0], one["crops"][0])  # ... and rank
    assert not torch.equal(one["crops"][0], one["crops"][2])  # ... and epoch


def test_ranks_that_share_a_gpu_are_told_so_through_the_store():
    """NCCL refuses two ranks on one GPU ('Duplicate GPU detected'): a one-GPU machine running
    2 ranks (make gpu's dist step) needs gloo. Each rank posts its GPU's UUID; the CPU posts ''."""
    from fineprune_cli.engine.training.world import shared_gpu

    store = dist.HashStore()
    store.set("fineprune/gpu/1", "GPU-aaaa")
    assert shared_gpu(store, World(0, 2), "GPU-aaaa") is True  # both on one GPU
    store.set("fineprune/gpu/1", "GPU-bbbb")
    assert shared_gpu(store, World(0, 2), "GPU-aaaa") is False  # a GPU each
    store.set("fineprune/gpu/1", "")
    store.set("fineprune/gpu/2", "")
    assert shared_gpu(store, World(0, 3), "") is False  # CPU ranks share no GPU

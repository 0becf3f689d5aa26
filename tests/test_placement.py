"""Where each process runs and how it joins the others: GPU choice (pure functions, fake
environments: no GPU here), the run's own device in timing, and a Slurm-only launch."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc

from conftest import free_port, spawn_ranks
from fineprune_cli.distributed import paramserver
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.engine.training import device as devices
from fineprune_cli.engine.training import world as worlds
from fineprune_cli.engine.training.world import World, cuda_index, from_env
from fineprune_cli.errors import ConfigError


@pytest.mark.parametrize(
    "local, count, env, expected",
    [
        (3, 4, {}, 3),  # torchrun on a 4-GPU node: GPU = local rank
        (3, 4, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 3),
        (3, 1, {}, 0),  # srun --gpus-per-task 1: one GPU, cuda:0
        (3, 8, {"CUDA_VISIBLE_DEVICES": "5"}, 0),  # one listed (count may be the node's)
        (1, 2, {"CUDA_VISIBLE_DEVICES": "2,3"}, 1),  # two of the node's, local rank among them
        (0, 4, {}, 0),
    ],
)
def test_cuda_index(local, count, env, expected):
    assert cuda_index(local, count, env) == expected


def test_cuda_index_refuses_more_ranks_than_gpus():
    with pytest.raises(ConfigError, match="sees 2"):
        cuda_index(2, 2, {"CUDA_VISIBLE_DEVICES": "0,1"})


def test_device_for_a_slurm_task_with_one_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worlds.device_for(World(5, 8, 1), "auto") == "cuda:0"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert worlds.device_for(World(5, 8, 1), "cuda") == "cuda:1"
    assert worlds.device_for(World(5, 8, 1), "cpu") == "cpu"
    assert worlds.device_for(World(), "auto") == "auto"  # one process: resolve_device decides


def test_place_makes_the_runs_gpu_the_current_one(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    for name in ("cuda:1", "cuda", "cpu"):
        worlds.place(torch.device(name))
    assert calls == [torch.device("cuda:1")]  # a bare 'cuda' is the current one


def test_stopwatch_times_and_waits_on_its_own_device(monkeypatch):
    """A rank on cuda:1 must not record on, or synchronise, GPU 0."""
    recorded, synced = [], []

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self, stream):
            recorded.append(stream)

        def elapsed_time(self, end):
            return 500.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: f"stream of {device}")
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    watch = devices.Stopwatch(torch.device("cuda:1"))
    with watch.section():
        pass
    assert watch.seconds() == 0.5
    assert recorded == ["stream of cuda:1"] * 2 and synced == [torch.device("cuda:1")]


def _slurm_rank_main(rank, size, init_file, out_dir):
    """A process as srun starts it: SLURM_* and MASTER_* only, no RANK/WORLD_SIZE. Joins as
    the parameter-server modes do, then as the sync mode does."""
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        os.environ.pop(key, None)
    with open(os.path.join(out_dir, "ports")) as f:
        port, sync_port = f.read().split()
    os.environ.update(
        SLURM_PROCID=str(rank),
        SLURM_STEP_ID="0",
        SLURM_STEP_NUM_TASKS=str(size),
        SLURM_NTASKS=str(size),
        SLURM_LOCALID=str(rank),
        SLURM_STEP_NUM_NODES="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
    )
    world = from_env()
    cfg = Config()
    cfg.run.dist_mode, cfg.run.dist_timeout = "mixed", 30
    groups = paramserver.start(world, cfg)  # group size 0: the node's workers
    peer = rpc.rpc_sync("ps0", os.getpid) if not world.main else None
    paramserver.stop()
    os.environ["MASTER_PORT"] = sync_port
    worlds.init(world, torch.device("cpu"), timeout_s=30)
    total = worlds.all_sum(torch.tensor([rank + 1.0]), world)
    dist.destroy_process_group()
    torch.save(
        {"world": tuple(vars(world).values()), "groups": groups, "peer": peer, "sum": total.item()},
        os.path.join(out_dir, f"rank{rank}.pt"),
    )


@pytest.mark.slow
def test_a_slurm_launch_starts_in_every_mode(tmp_path):
    (tmp_path / "ports").write_text(f"{free_port()} {free_port()}")
    results = spawn_ranks(_slurm_rank_main, 3, tmp_path, seconds=90)
    assert [r["world"] for r in results] == [(r, 3, r, 1) for r in range(3)]  # rank, size, local rank, nodes
    assert results[1]["groups"] == [[1, 2]] and results[1]["peer"] == results[2]["peer"] != os.getpid()
    assert [r["sum"] for r in results] == [6.0] * 3

"""Who serves and who works in a parameter-server run (distributed/layout.py)."""

import pytest
import torch

from fineprune_cli.distributed.launch import check_parallel
from fineprune_cli.distributed.layout import Shards, assign_shards, local_size, worker_groups
from fineprune_cli.engine.setup.config import Config
from fineprune_cli.errors import ConfigError
from fineprune_cli.runner import weak_scaling


def test_local_size_reads_torchrun_then_slurm():
    assert local_size({"LOCAL_WORLD_SIZE": "4"}, 8) == 4
    assert local_size({"SLURM_STEP_TASKS_PER_NODE": "3(x2)"}, 6) == 3
    # the allocation's tasks per node are not the step's: srun -n 4 in a 2 x 8-task allocation
    assert (
        local_size(
            {"SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS_PER_NODE": "8", "SLURM_TASKS_PER_NODE": "8(x2)"}, 4
        )
        == 2
    )
    assert local_size({}, 5) == 5  # no variable: one node
    assert local_size({"LOCAL_WORLD_SIZE": "16"}, 4) == 4


def test_mixed_groups_follow_the_nodes():
    """2 nodes x 4 processes, rank 0 serving: node 0's group is its 3 workers, node 1's its 4;
    no group straddles the nodes (the old grouping made [1, 2], [3, 4], ... across them)."""
    assert worker_groups(8, 1, 4, 0, "mixed") == [[1, 2, 3], [4, 5, 6, 7]]
    assert worker_groups(8, 2, 4, 0, "mixed") == [[2, 3], [4, 5, 6, 7]]
    assert worker_groups(8, 1, 4, 2, "mixed") == [[1, 2], [3], [4, 5], [6, 7]]
    assert worker_groups(5, 1, 5, 0, "mixed") == [[1, 2, 3, 4]]
    assert worker_groups(4, 2, 4, 0, "async") == [[2], [3]]
    with pytest.raises(ConfigError, match="--num-ps 2 needs more than 2 processes"):
        worker_groups(2, 2, 2, 0, "async")


def test_shards_balance_the_parameters_and_round_trip():
    owner = assign_shards([100, 10, 60, 50, 5], 2)
    load = [sum(n for n, o in zip([100, 10, 60, 50, 5], owner) if o == k) for k in range(2)]
    assert sorted(load) == [110, 115]  # largest first onto the lighter server
    params = [torch.randn(3, 4), torch.randn(7), torch.randn(2, 2)]
    shards = Shards(params, 2)
    flat = shards.flatten(params)
    assert flat.numel() == 12 + 7 + 4 and shards.bounds[-1][1] == flat.numel()
    fresh = [torch.zeros_like(p) for p in params]
    for k in range(2):
        shards.load(fresh, shards.part(flat, k), k)
    assert all(torch.equal(a, b) for a, b in zip(params, fresh))


def _cfg(mode, batch=128, per_worker=None, group=0, num_ps=1):
    cfg = Config()
    cfg.run.dist_mode, cfg.run.group_size, cfg.run.num_ps = mode, group, num_ps
    cfg.train.batch_size, cfg.train.batch_per_worker = batch, per_worker
    return cfg


def test_weak_scaling_sets_the_batch_each_mode_shares():
    assert weak_scaling(_cfg("sync", per_worker=32), 4).train.batch_size == 128  # 4 ranks x 32
    assert weak_scaling(_cfg("async", per_worker=32), 4).train.batch_size == 32  # one worker's push
    assert weak_scaling(_cfg("mixed", per_worker=32), 8, 4).train.batch_size == 128  # node 1: 4 workers
    assert weak_scaling(_cfg("sync", per_worker=32), 1).train.batch_size == 32
    assert weak_scaling(_cfg("sync", batch=100), 4).train.batch_size == 100  # strong scaling


def test_parallel_checks_use_the_groups_of_the_nodes():
    check_parallel(_cfg("mixed", batch=96), 8, 4)  # groups of 3 and 4 workers ...
    with pytest.raises(ConfigError, match="group of 4 workers"):
        check_parallel(_cfg("mixed", batch=90), 8, 4)  # ... 90 splits over 3, not over 4
    check_parallel(_cfg("mixed", batch=90, per_worker=10), 8, 4)  # weak scaling: any group size
    with pytest.raises(ConfigError, match="--num-ps 3 needs more than 3"):
        check_parallel(_cfg("async", num_ps=3), 3)


def test_servers_on_the_cpu_leave_every_gpu_to_a_worker():
    """--ps-device cpu (the default): 8 GPUs run 8 workers beside a server; each server took a
    GPU before, so 8 workers and a server needed 9."""
    from fineprune_cli.distributed.layout import gpu_placement
    from fineprune_cli.engine.training.world import World

    # one node, 1 server + 8 workers: the server holds none, worker rank r takes GPU r - 1
    assert gpu_placement(World(0, 9, 0), 9, 1, "cpu") is None
    assert [gpu_placement(World(r, 9, r), 9, 1, "cpu").local_rank for r in range(1, 9)] == list(range(8))
    # two nodes of 5 processes, 2 servers on node 0: node 1's workers keep their local ranks
    assert [gpu_placement(World(r, 10, r % 5), 5, 2, "cpu").local_rank for r in range(2, 10)] == [
        0,
        1,
        2,
        0,
        1,
        2,
        3,
        4,
    ]
    assert gpu_placement(World(0, 9, 0), 9, 1, "gpu") == World(0, 9, 0)  # a server takes GPU 0


def test_a_gpu_job_puts_its_servers_on_the_cpu_and_its_workers_on_their_own_gpus(monkeypatch):
    from fineprune_cli.distributed.paramserver import own_device
    from fineprune_cli.engine.training.world import World

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = _cfg("async")
    cfg.run.device = "cuda"
    assert [own_device(cfg, World(r, 3, r)) for r in range(3)] == ["cpu", "cuda:0", "cuda:1"]
    cfg.run.ps_device = "gpu"  # as before: the server on GPU 0; a third GPU would be needed
    assert own_device(cfg, World(0, 3, 0)) == "cuda:0"
    with pytest.raises(ConfigError, match="local rank 2 needs GPU 2"):
        own_device(cfg, World(2, 3, 2))

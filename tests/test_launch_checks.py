"""Launch flags and the launcher's environment checked before anything starts (issue 25): a node
rank past the last node, an endpoint without a port or RANK=-1 made a run wait for minutes; a bad
port or a non-integer WORLD_SIZE ended in a traceback."""

import pytest
import torch

from conftest import free_port, invoke
from fineprune_cli.distributed import launch
from fineprune_cli.drivers.scale import Launch, plan
from fineprune_cli.engine.training import world as worlds
from fineprune_cli.errors import ConfigError

TRAIN = ["train", "--model", "lenet", "--dataset", "synthetic", "--device", "cpu", "--batch-size", "64"]


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--nproc-per-node", "4096"], "--nproc-per-node must be between 1 and 256, got 4096"),
        (["--nproc-per-node", "0"], "--nproc-per-node must be between 1 and 256, got 0"),
        (
            ["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29500"],
            "--node-rank must be between 0 and 1 (--nnodes 2), got 2",
        ),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "-1", "--rdzv-endpoint", "h:29500"], "--node-rank"),
        (["--nproc-per-node", "2", "--node-rank", "1"], "--node-rank must be between 0 and 0"),
        (["--nproc-per-node", "2", "--nnodes", "100000", "--node-rank", "0", "--rdzv-endpoint", "h:1"], "--nnodes"),
        (
            ["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0"],
            "--rdzv-endpoint must be host:port with a port from 1 to 65535, got 'node0'",
        ),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0:0"], "got 'node0:0'"),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0:65536"], "65536"),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0:http"], "node0:http"),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", ":29500"], "':29500'"),
        (["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:\u0663"], "host:port"),
    ],
)
def test_launch_flags_are_refused_before_the_launcher_starts(flags, words, monkeypatch):
    monkeypatch.setattr(launch, "call_forwarding_signals", lambda cmd: pytest.fail(f"launched {cmd}"))
    r = invoke([*TRAIN, *flags])
    assert r.exit_code == 2 and words in r.output, r.output


def test_a_good_endpoint_parses_ipv6_too():
    assert launch.parse_endpoint("node0:29500") == ("node0", 29500)
    assert launch.parse_endpoint("[::1]:29400") == ("[::1]", 29400)


BASE = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize(
    "env, words",
    [
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1: must be between 0 and 1"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2: must be between 0 and 1"),
        ({"RANK": "zero", "WORLD_SIZE": "2"}, "RANK='zero': must be an integer"),
        ({"WORLD_SIZE": "2"}, "RANK is unset"),
        ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two': must be an integer"),
        ({"RANK": "0", "WORLD_SIZE": "-3"}, "WORLD_SIZE=-3: must be at least 1"),
        ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "x"}, "LOCAL_RANK='x'"),
        ({"RANK": "-1"}, "RANK=-1: must be at least 0"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000: must be between 1 and 65535"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "p"}, "MASTER_PORT='p'"),
        ({"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "2"}, "SLURM_PROCID=5"),
    ],
)
def test_the_launchers_environment_is_checked_in_one_line(env, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        worlds.from_env({**BASE, **env})


def test_a_missing_master_addr_is_named_for_torchrun_variables_too(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ConfigError, match="2 processes need MASTER_ADDR and MASTER_PORT to meet"):
        worlds.init(worlds.World(0, 2), torch.device("cpu"), 5)
    assert worlds.from_env({**BASE, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == worlds.World(1, 2, 1)
    assert worlds.from_env({"RANK": "0", "WORLD_SIZE": "1"}) == worlds.SINGLE


@pytest.mark.slow
def test_an_unreachable_rendezvous_is_one_line_after_the_timeout(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))  # nobody listens there
    with pytest.raises(ConfigError, match=r"rank 1 of 2 could not join the process group at 127.0.0.1:\d+ within 2 s"):
        worlds.init(worlds.World(1, 2), torch.device("cpu"), 2)


@pytest.mark.parametrize(
    "nproc, num_ps, launch_, words",
    [
        ([2], [65], Launch(), "--num-ps must be between 1 and 64, got 65"),
        ([4096], [1], Launch(), "--nproc takes positive integers up to 256"),
        ([2], [1], Launch(2, 0, "node0"), "--rdzv-endpoint must be host:port"),
    ],
)
def test_scale_checks_what_its_launched_runs_would(nproc, num_ps, launch_, words):
    with pytest.raises(ConfigError, match=words):
        plan(nproc, ["async"], num_ps, launch_)

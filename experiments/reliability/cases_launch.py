"""Hostile cases of issue 25, launching: launch flags and the launcher's environment, data that
changed under a run, duplicate comparison arms, a folder another writer holds, too little memory.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
from pathlib import Path
from typing import Callable

from cases import TINY, Case, flags, train
from cases_files import folder_case
from crafted import swap_class_folders

HELD: list[int] = []  # lock files the harness holds during a case; closed after it


# -- launch flags and the launcher's environment -----------------------------------------------


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


ENDPOINTS = {
    "no-port": "node0",
    "empty-port": "node0:",
    "no-host": ":29500",
    "port-zero": "node0:0",
    "port-65536": "node0:65536",
    "port-negative": "node0:-1",
    "port-word": "node0:http",
    "port-arabic": "node0:\u0663",
    "ipv6-no-port": "[::1]",
}
MULTI = ["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0"]
ENVS = {
    "rank-negative": ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1"),
    "rank-past-world": ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2"),
    "rank-word": ({"RANK": "zero", "WORLD_SIZE": "2"}, "RANK='zero'"),
    "rank-unset": ({"WORLD_SIZE": "2"}, "RANK is unset"),
    "world-word": ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
    "world-negative": ({"RANK": "0", "WORLD_SIZE": "-3"}, "WORLD_SIZE=-3"),
    "world-float": ({"RANK": "0", "WORLD_SIZE": "2.0"}, "WORLD_SIZE='2.0'"),
    "local-rank-word": ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "x"}, "LOCAL_RANK='x'"),
    "lone-rank-negative": ({"RANK": "-1"}, "RANK=-1"),
    "master-port-huge": ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000"),
    "master-port-word": ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "p"}, "MASTER_PORT='p'"),
    "slurm-procid-past": ({"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "2"}, "SLURM_PROCID=5"),
    "slurm-step-tasks-word": ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "x"}, "SLURM_STEP_NUM_TASKS='x'"),
}


def _launch_cases() -> list[Case]:
    cases = [
        train("nproc-4096", "--nproc-per-node", "4096", words=["--nproc-per-node must be between 1 and 256"]),
        train("nproc-257", "--nproc-per-node", "257", words=["--nproc-per-node"]),
        train(
            "node-rank-past-nnodes",
            *MULTI[:4],
            "--node-rank",
            "2",
            "--rdzv-endpoint",
            "h:29500",
            words=["--node-rank must be between 0 and 1"],
        ),
        train(
            "node-rank-negative", *MULTI[:4], "--node-rank", "-1", "--rdzv-endpoint", "h:29500", words=["--node-rank"]
        ),
        train("node-rank-without-nnodes", "--nproc-per-node", "2", "--node-rank", "1", words=["--node-rank"]),
        train(
            "nnodes-huge",
            *MULTI[:2],
            "--nnodes",
            "100000",
            "--node-rank",
            "0",
            "--rdzv-endpoint",
            "h:1",
            words=["--nnodes"],
        ),
    ]
    cases += [
        train(f"endpoint-{k}", *MULTI, "--rdzv-endpoint", v, words=["--rdzv-endpoint must be host:port"])
        for k, v in ENDPOINTS.items()
    ]
    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    cases += [Case(f"env-{k}", ["train", *TINY], [words], env={**base, **env}) for k, (env, words) in ENVS.items()]
    cases.append(
        Case(
            "env-no-master-addr",
            ["train", *TINY, "--dist-timeout", "5"],
            ["need MASTER_ADDR"],
            env={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": None},
        )
    )
    cases.append(
        Case(
            "env-unreachable-peer",
            ["train", *TINY, "--dist-timeout", "2"],
            ["could not join the process group"],
            env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port()},
        )
    )
    scale = ["scale", "--model", "lenet", "--dataset", "synthetic", "--dist-mode", "async"]
    cases += [
        flags("scale-num-ps-65", *scale, "--num-ps", "65", words=["--num-ps must be between 1 and 64"]),
        flags("scale-nproc-4096", *scale, "--nproc", "4096", words=["--nproc takes positive integers up to 256"]),
        flags(
            "scale-endpoint-no-port",
            *scale,
            "--nnodes",
            "2",
            "--rdzv-endpoint",
            "node0",
            words=["--rdzv-endpoint must be host:port"],
        ),
        flags(
            "scale-node-rank-past",
            *scale,
            "--nnodes",
            "2",
            "--node-rank",
            "2",
            "--rdzv-endpoint",
            "h:1",
            words=["--node-rank"],
        ),
    ]
    return cases


# -- data that changed under a run, duplicate arms, a held folder, little memory ---------------


def _folder_run(edit: Callable[[Path], None]):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        for name in ("imgs", "run"):
            shutil.copytree(templates["folder-run"] / name, work / name, symlinks=True)
        edit(work / "imgs")
        return ["train", "--resume", "run"]

    return setup


def _edit(folder: Path) -> None:
    """One byte more in one image: other data (a new mtime alone is not, since identities are by
    content: a copy or a fresh unpacking is the same data)."""
    path = folder / "train" / "a" / "0.png"
    path.write_bytes(path.read_bytes() + b"\0")


DATA_EDITS = {
    "train-classes-swapped": (lambda f: swap_class_folders(f / "train"), "the train images"),
    "test-classes-swapped": (lambda f: swap_class_folders(f / "test"), "the test images"),
    "file-added": (lambda f: shutil.copy(f / "train" / "a" / "0.png", f / "train" / "a" / "new.png"), "13 files"),
    "file-removed": (lambda f: (f / "train" / "b" / "1.jpg").unlink(), "11 files"),
    "file-edited": (_edit, "the train images"),
    "folder-gone": (lambda f: shutil.rmtree(f), "does not exist"),
}


def _held(argv: list[str], run_files: bool):
    def setup(work: Path, outside: Path, templates: dict) -> list:
        if run_files:
            shutil.copytree(templates["run"], work / "run")
            summary = json.loads((work / "run" / "summary.json").read_text())
            summary["status"] = "interrupted"
            (work / "run" / "summary.json").write_text(json.dumps(summary))
        (work / "run").mkdir(exist_ok=True)
        fd = os.open(work / "run" / ".lock", os.O_CREAT | os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # the forked case opens its own: the lock conflicts
        os.ftruncate(fd, 0)  # and names its holder, as a writer does: a live one, not a stray process
        os.write(fd, f"{os.getpid()}\n".encode())
        HELD.append(fd)
        return argv

    return setup


def _other_cases() -> list[Case]:
    cases = [
        Case(f"resume-data-{k}", (), ["resume refused" if k != "folder-gone" else "", w], _folder_run(e))
        for k, (e, w) in DATA_EDITS.items()
    ]
    cmp = ["compare", "--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--epochs", "1"]
    cases += [
        flags("compare-seed-twice", *cmp, "--seeds", "0,1,0", words=["is listed twice"]),
        flags("compare-policy-twice", *cmp, "--policies", "fine,regular,fine", words=["is listed twice"]),
        flags("compare-model-twice", *cmp[:2], "lenet,lenet", *cmp[3:], words=["is listed twice"]),
        flags("compare-dataset-twice", *cmp[:4], "synthetic,synthetic", *cmp[5:], words=["is listed twice"]),
        flags("compare-frontier-same-percent", *cmp, "--frontier", "0.2,0.201", words=["share it"]),
    ]
    cases += [
        Case("writer-holds-new-folder", (), ["being written by another"], _held(["train", *TINY], False)),
        Case(
            "writer-holds-resumed-folder", (), ["being written by another"], _held(["train", "--resume", "run"], True)
        ),
    ]
    for name, extra, words in (
        (
            "image-size-512-device",
            ["--image-size", "512", "--loader", "device"],
            "held on cpu need about 0.6 GB, 0.3 GB is free",
        ),  # 512 px pads 64 (size/8) now
        ("image-size-4096-device", ["--image-size", "4096", "--loader", "device"], "lower --image-size"),
        ("image-size-4096-auto", ["--image-size", "4096"], "lower --image-size or --batch-size"),
        ("image-size-2048-stream", ["--image-size", "2048", "--loader", "stream"], "a batch of 6 images"),
    ):
        cases.append(folder_case(f"memory-{name}", lambda f: None, extra, [words]))
        cases[-1].memory_mb = 350  # the headroom of a small machine (RLIMIT_AS)
    return cases


LAUNCH_CASES: list[Case] = _launch_cases() + _other_cases()

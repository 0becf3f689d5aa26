"""`compare --script --dry-run` times its one epoch as the runs will run (issue 55): with the
executor's thread limit and pinning (--jobs, --threads) and in a working directory of its own.
It timed a plan of one-thread runs at torch's default threads (4 h 52 min estimated, 33 min
real) and ran in the launch directory, leaving timm's `out/` there. A stand-in script records
what it sees, in the probe and in a run; they must agree."""

import json
import os
import shlex
import sys

import pytest

from conftest import invoke

CORES = sorted(os.sched_getaffinity(0))

STAND_IN = """
import argparse, json, os, sys
import torch
import fineprune

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int)
ap.add_argument("--epochs", type=int)
ap.add_argument("--seen")
args = ap.parse_args()
os.makedirs("out", exist_ok=True)  # as timm's train.py makes ./out in the directory it runs in
seen = {
    "cwd": os.getcwd(), "cores": sorted(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
    "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "FINEPRUNE_THREADS",
                                          "FINEPRUNE_CONCURRENCY", "FINEPRUNE_LAUNCH_DIR")},
    "job": os.environ.get("FINEPRUNE_JOB"),
}
with open(args.seen, "a") as f:
    f.write(json.dumps(seen) + "\\n")
run = fineprune.start(num_train=10, seed=args.seed, epochs=args.epochs, milestones=[])
for epoch in range(args.epochs):
    run.log(train_loss=1.0 / (epoch + 1), test_accuracy=50.0, samples=10, lr=0.1)
run.finish()
"""


@pytest.mark.slow  # a dry run and a compare of two runs, each script a Python process importing torch
@pytest.mark.skipif(len(CORES) < 2, reason="--jobs 2 --threads 1 needs two cores")
def test_the_dry_runs_probe_runs_as_a_run_of_jobs_2_threads_1_does(tmp_path, monkeypatch):
    launch, seen = tmp_path / "launch", tmp_path / "seen.jsonl"
    launch.mkdir()
    (tmp_path / "standin.py").write_text(STAND_IN)
    monkeypatch.chdir(launch)
    script = f"{shlex.quote(sys.executable)} ../standin.py --seed {{seed}} --epochs {{epochs}} --seen {seen}"
    argv = ["compare", "--script", script, "--epochs", "2", "--milestones", "", "--policies", "regular"]
    argv += ["--seeds", "0,1", "--jobs", "2", "--threads", "1", "--out", "cmp"]
    dry = invoke([*argv, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert list(launch.iterdir()) == []  # nothing left where compare ran: not the script's out/, not a run
    (probe,) = [json.loads(line) for line in seen.read_text().splitlines()]
    seen.unlink()
    done = invoke(argv)
    assert done.exit_code == 0, done.output
    runs = {json.loads(line)["job"].rsplit("/", 1)[1]: json.loads(line) for line in seen.read_text().splitlines()}
    first = runs["regular-seed0.yaml"]  # the first run starts in the first slot, as the probe did
    assert probe["cores"] == first["cores"] == [CORES[0]] and runs["regular-seed1.yaml"]["cores"] == [CORES[1]]
    assert probe["torch_threads"] == first["torch_threads"] == 1
    assert (
        probe["env"] == {**first["env"], "FINEPRUNE_LAUNCH_DIR": str(launch)} and probe["env"]["OMP_NUM_THREADS"] == "1"
    )
    for where in (probe, first):  # each in a working directory of its own, named as a run's
        assert where["cwd"].endswith(".work") and os.path.dirname(where["cwd"]) != str(launch)
    assert not probe["cwd"].startswith(str(launch))  # the probe's is deleted with its folder
    assert f"1 thread on core {CORES[0]}, as each run of --jobs 2" in " ".join(dry.output.split())

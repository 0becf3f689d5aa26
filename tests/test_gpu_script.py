"""The CPU dry run of `make gpu` (experiments/gpu/gpu.py --device cpu --quick): every step on its
own, as on a GPU machine (one call each), with the files each step promises and what it packs
into $OUT to come back. Keeps the script from rotting between GPU sessions."""

import csv
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from fineprune_cli.engine import record as records

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("check", "bench", "reproduce-regular", "reproduce-fine", "reproduce-random", "report", "dist")
POLICIES = ("regular", "fine", "random")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """`gpu.py all`: the seven steps in order, each as it runs alone (it finds what the steps before
    it wrote on disk only); returns the results root, $OUT and the finished process."""
    base = tmp_path_factory.mktemp("gpu-dry-run")
    results, out = base / "results", base / "out"
    cmd = [sys.executable, "experiments/gpu/gpu.py", "all", "--device", "cpu", "--quick",
           "--results-dir", str(results), "--work-dir", str(base / "work")]
    proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OUT=str(out)),
                          capture_output=True, text=True, timeout=300)
    return results, out, proc


def _one(pattern: str, root: Path) -> Path:
    found = sorted(root.glob(pattern))
    assert len(found) == 1, f"{pattern}: {found}"
    return found[0]


def _members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return tar.getnames()


def test_every_step_succeeds(dry_run):
    _, _, proc = dry_run
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    for step in STEPS:
        assert f"== {step} (cpu, quick) ==" in proc.stdout and f"\n{step}: ok\n" in proc.stdout


def test_check_runs_the_gpu_tests_and_records_them(dry_run):
    results, out, _ = dry_run
    check = _one("gpu-*/check", results)
    summary = json.loads((check / "check.json").read_text())
    counts = summary["tests"]["gpu"]
    assert counts["tests"] >= 5 and counts["failures"] == counts["errors"] == 0
    assert counts["skipped"] == counts["tests"]  # CUDA is hidden in the dry run
    assert summary["returncodes"] == {"gpu": 0} and summary["torch"] == torch.__version__
    assert "needs CUDA" in (check / "pytest-gpu.log").read_text()
    assert f"results/{check.parent.name}/check/check.json" in _members(out / "check.tar.gz")


def test_bench_writes_the_device_table(dry_run):
    results, out, _ = dry_run
    table = _one("bench/*.csv", results)
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == ["lenet"] and rows[0]["samples"] == "256"
    assert float(rows[0]["ours_img_s"]) > 0 and 0 < float(rows[0]["pruned_0.3"]) < 2
    assert rows[0]["commit"] == records.git_commit()
    assert "| model |" in table.with_suffix(".md").read_text()
    names = _members(out / "bench.tar.gz")
    assert {f"results/bench/{table.name}", f"results/bench/{table.stem}.md"} <= set(names)


@pytest.mark.parametrize("policy", POLICIES)
def test_reproduce_trains_one_policy_and_packs_it_without_the_checkpoint(dry_run, policy):
    results, out, _ = dry_run
    run = _one(f"dry-run-lenet-*/runs/lenet-folder/{policy}-seed0", results)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["epochs_completed"] == 2
    assert summary["policy"] == policy and summary["dataset_label"] == "tiny generated JPEGs (dry run)"
    assert summary.get("pruning_epochs", []) == ([] if policy == "regular" else [2])
    assert (run / "checkpoint.pt").exists()  # made by the run: the archive must leave it out
    names = _members(out / f"reproduce-{policy}.tar.gz")
    prefix = f"results/{run.relative_to(results)}"
    assert f"{prefix}/summary.json" in names and f"{prefix}/metrics.csv" in names
    assert not any(n.endswith("checkpoint.pt") for n in names)


def test_report_names_device_commands_and_commit(dry_run):
    results, out, _ = dry_run
    exp = _one("dry-run-lenet-*", results)
    index = (exp / "index.md").read_text()
    run = json.loads((exp / "runs/lenet-folder/regular-seed0/summary.json").read_text())
    assert "\n# lenet on tiny generated JPEGs (dry run): a dry run of `make gpu`\n" in index
    assert f"device: {run['device']}" in index and f"commit {run['git_commit']}" in index
    for policy in POLICIES:
        step = next(line for line in index.splitlines() if line.startswith(f"  - reproduce-{policy}: "))
        assert "`python experiments/gpu/gpu.py all --device cpu --quick" in step
        assert "-m fineprune_cli compare --config" in step and f"--policies {policy}" in step
    for table in ("table1_time.md", "table2_accuracy.md", "notes.md"):
        assert (exp / table).stat().st_size > 0
    names = _members(out / "report.tar.gz")
    assert f"results/{exp.name}/index.md" in names and f"results/{exp.name}/table1_time.csv" in names


def test_dist_trains_every_mode_and_tables_it(dry_run):
    results, out, _ = dry_run
    folder = _one("gpu-*/dist", results)
    rows = json.loads((folder / "dist.json").read_text())["runs"]
    # the dry run trains the async mode only (a server and 2 workers); on CUDA sync and mixed too
    assert [(r["mode"], r["processes"], r["status"], r["epochs"]) for r in rows] == [("async", 3, "complete", 1)]
    assert rows[0]["images_per_s"] > 0 and rows[0]["staleness_mean"] != ""
    assert "| async | 3 | 0 | complete |" in (folder / "dist.md").read_text()
    assert f"results/{folder.parent.name}/dist/dist.md" in _members(out / "dist.tar.gz")


def test_archives_come_back_whole_and_small(dry_run):
    """The device tool brings back at most 8 files of up to 16 MiB; unpacked at the repository
    root they land in results/; no checkpoint, no half-written temporaries."""
    _, out, _ = dry_run
    archives = sorted(out.iterdir())
    assert [a.name for a in archives] == sorted(f"{s}.tar.gz" for s in STEPS)
    for archive in archives:
        assert archive.stat().st_size < 16 * 2**20
        for name in _members(archive):
            assert name.startswith("results/"), name
            assert Path(name).name != "checkpoint.pt" and not Path(name).name.startswith("."), name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where CUDA is missing")
def test_cuda_steps_refuse_to_start_without_cuda(tmp_path):
    proc = subprocess.run([sys.executable, "experiments/gpu/gpu.py", "check", "--results-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "CUDA is not available" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_git_commit_comes_from_the_launcher_where_the_copy_has_no_git(monkeypatch):
    """The GPU machine gets the working tree without .git: `make gpu COMMIT=...` names it."""
    def no_git(*args, **kwargs):
        raise OSError("no git here")

    monkeypatch.setattr(records.subprocess, "run", no_git)
    monkeypatch.setenv("FINEPRUNE_GIT_COMMIT", "abc1234")
    assert records.git_commit() == "abc1234"
    monkeypatch.delenv("FINEPRUNE_GIT_COMMIT")
    assert records.git_commit() == "unknown"


def _gpu_script():
    spec = importlib.util.spec_from_file_location("gpu_script", ROOT / "experiments" / "gpu" / "gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_step_stops_its_command_at_the_deadline_and_records_it(tmp_path):
    """SIGTERM leaves a training run time to finish its epoch and record itself interrupted;
    the step then still packs what there is within its budget."""
    gpu = _gpu_script()
    ctx = gpu.Ctx("cpu", True, tmp_path, tmp_path, None, "t", budget=gpu.PACK_RESERVE_S + gpu.TERM_GRACE_S + 3)
    ctx.start_step()
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('asked to stop', flush=True), sys.exit(130)))\n"
            "print('started', flush=True)\n"
            "time.sleep(60)\n")
    rc = gpu.run_logged([sys.executable, "-c", code], tmp_path / "step.log", ctx)
    record = json.loads((tmp_path / "step.json").read_text())
    assert rc == 130 and record["stopped_at_deadline"] and record["seconds"] < 30
    assert (tmp_path / "step.log").read_text() == "started\nasked to stop\n"

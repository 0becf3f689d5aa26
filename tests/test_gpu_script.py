"""The CPU dry run of `make gpu` (experiments/gpu/gpu.py --device cpu --quick): every step on its
own, as on a GPU machine (one call each), with the files each step promises and what it packs
into $OUT to come back; the matrix's runs made over two calls on two "machines" (two work
folders) adding up in one report. Keeps the script from rotting between GPU sessions."""

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
import yaml

from fineprune_cli.engine.records import record as records

ROOT = Path(__file__).resolve().parents[1]
GPU_DIR = ROOT / "experiments" / "gpu"
STEPS = ("check", "bench", "reproduce", "report", "dist")


@pytest.fixture(scope="session")
def dry_run(tmp_path_factory, forked):
    """`gpu.py all`: the seven steps in order, each as it runs alone (it finds what the steps before
    it wrote on disk only); returns the results root, $OUT and the finished process."""
    base = tmp_path_factory.mktemp("gpu-dry-run")
    results, out = base / "results", base / "out"
    cmd = [
        "experiments/gpu/gpu.py",
        "all",
        "--device",
        "cpu",
        "--quick",
        "--results-dir",
        str(results),
        "--work-dir",
        str(base / "work"),
        "--runs",
        "3",
    ]
    # five steps, each starting processes; under pytest-xdist they share the cores with another worker.
    # gpu.py itself is forked from the tests' fork server (`forked`): a process of its own, without
    # a new interpreter's seconds of importing torch (its steps' commands are its own business)
    proc = forked.run(cmd, cwd=ROOT, env=dict(os.environ, OUT=str(out)), capture_output=True, text=True, timeout=600)
    return results, out, proc


def _one(pattern: str, root: Path) -> Path:
    found = sorted(root.glob(pattern))
    assert len(found) == 1, f"{pattern}: {found}"
    return found[0]


def _members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return tar.getnames()


@pytest.mark.slow
def test_every_step_succeeds(dry_run):
    _, _, proc = dry_run
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    for step in STEPS:
        assert f"== {step} (cpu, quick) ==" in proc.stdout and f"\n{step}: ok (" in proc.stdout


@pytest.mark.slow
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


@pytest.mark.slow
def test_bench_writes_the_device_table(dry_run):
    results, out, _ = dry_run
    table = _one("bench/*.csv", results)
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == ["lenet"] and rows[0]["samples"] == "256"
    # plumbing, not speed: a pruned epoch of 179 images takes milliseconds, and one hiccup of a
    # loaded machine made it 4.7 times a full one (benchmarks are read from bench.py's table)
    assert float(rows[0]["ours_img_s"]) > 0 and 0 < float(rows[0]["pruned_0.3"]) < float("inf")
    assert rows[0]["commit"] == records.git_commit()
    assert "| model |" in table.with_suffix(".md").read_text()
    names = _members(out / "bench.tar.gz")
    assert {f"results/bench/{table.name}", f"results/bench/{table.stem}.md"} <= set(names)


@pytest.mark.slow
def test_reproduce_trains_the_first_runs_of_the_matrix_and_packs_them_without_checkpoints(dry_run):
    """--runs 3: the first three of look 1 (seed 0 of regular, fine and random), in this call's folder."""
    results, out, _ = dry_run
    call = _one("dry-run-lenet/calls/*", results)
    runs = sorted(p.name for p in (call / "runs" / "lenet-folder").iterdir())
    assert runs == ["fine-seed0", "random-seed0", "regular-seed0"]
    summary = json.loads((call / "runs" / "lenet-folder" / "fine-seed0" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["epochs_completed"] == 4
    assert summary["dataset_label"] == "tiny generated JPEGs (dry run)" and summary["pruning_epochs"] == [2, 4]
    assert summary["data"]["train"].startswith("200 files, content ")  # the identity copies share
    record = json.loads((call / "call.json").read_text())
    assert [(r["arm"], r["status"]) for r in record["runs"]] == [
        ("regular", "complete"),
        ("fine", "complete"),
        ("random", "complete"),
    ]
    assert record["asked"] == 10  # look 1: five arms, seeds 0-1
    plan = json.loads((results / "dry-run-lenet" / "plan.json").read_text())
    assert plan["looks"] == [2, 3] and plan["runs_before"] == 0
    names = _members(out / "reproduce.tar.gz")
    prefix = f"results/{call.relative_to(results)}"
    assert f"{prefix}/runs/lenet-folder/fine-seed0/metrics.csv" in names and f"{prefix}/call.json" in names
    assert "results/dry-run-lenet/plan.json" in names
    assert not any(n.endswith("checkpoint.pt") for n in names)


@pytest.mark.slow
def test_report_names_the_calls_and_their_machines(dry_run):
    results, out, _ = dry_run
    exp = results / "dry-run-lenet"
    index = (exp / "index.md").read_text()
    call = _one("dry-run-lenet/calls/*", results)
    machine = json.loads((call / "call.json").read_text())["machine"]
    assert "\n# The GPU matrix: a dry run of `make gpu`\n" in index
    assert f"  - `{call.name}` on {machine}: regular seed 0: complete in " in index
    assert "Plan: m 0.3 pt, δ 0.3 pt" in index and "looks after 2,3 seeds" in index  # recorded before the runs
    for table in ("table1_time.md", "table2_accuracy.md", "notes.md"):
        assert (exp / table).stat().st_size > 0
    names = _members(out / "report.tar.gz")
    assert f"results/{exp.name}/index.md" in names and f"results/{exp.name}/table1_time.csv" in names


@pytest.mark.slow
def test_dist_interrupts_and_resumes_sync_in_a_group(dry_run):
    results, out, _ = dry_run
    folder = _one("gpu-*/dist", results)
    rows = json.loads((folder / "dist.json").read_text())["runs"]
    # the dry run: sync with 2 ranks (a process group); on CUDA async with 2 servers and mixed too
    assert [(r["mode"], r["processes"], r["servers"], r["status"], r["epochs"]) for r in rows] == [
        ("sync", 2, 0, "complete", 4),
    ]
    row = rows[0]  # stopped by SIGTERM after epoch 1 or 2, then `train --resume` to epoch 4
    assert 1 <= row["interrupted_after"] <= 3 and row["resumed_ok"] is True
    assert row["exit"].endswith("/0") and row["images_per_s"] > 0
    summary = json.loads((folder / "runs" / "lenet-sync-p2" / "summary.json").read_text())
    assert summary["resumed_after_epochs"] == [row["interrupted_after"]] and summary["world_size"] == 2
    assert "an interruption after epoch 1" in (folder / "logs" / "sync.json").read_text()
    assert "| sync | 2 | 0 |" in (folder / "dist.md").read_text()
    assert f"results/{folder.parent.name}/dist/dist.md" in _members(out / "dist.tar.gz")


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where CUDA is missing")
def test_cuda_steps_refuse_to_start_without_cuda(tmp_path, forked):
    proc = forked.run(
        ["experiments/gpu/gpu.py", "check", "--results-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "CUDA is not available" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_a_run_starts_only_where_it_ends_before_the_runner_stops_it():
    """The fit was checked against the call's end, but the runner stops a run TERM_GRACE_S
    sooner: a run that fit only into that grace was started and cut off."""
    reproduce, grace = _gpu_module("reproduce"), _gpu_module("runner").TERM_GRACE_S
    assert reproduce.fits(100 - grace, 100) and not reproduce.fits(100 - grace + 1, 100)


def test_git_commit_comes_from_the_launcher_where_the_copy_has_no_git(monkeypatch):
    """The GPU machine gets the working tree without .git: `make gpu COMMIT=...` names it."""

    def no_git(*args, **kwargs):
        raise OSError("no git here")

    monkeypatch.setattr(records.subprocess, "run", no_git)
    monkeypatch.setenv("FINEPRUNE_GIT_COMMIT", "abc1234")
    assert records.git_commit() == "abc1234"
    monkeypatch.delenv("FINEPRUNE_GIT_COMMIT")
    assert records.git_commit() == "unknown"


def _gpu_module(name: str):
    """A module of experiments/gpu, imported as gpu.py imports it (its folder and bench's on the path)."""
    gpu = importlib.util.spec_from_file_location("gpu_script", GPU_DIR / "gpu.py")
    script = importlib.util.module_from_spec(gpu)
    sys.modules[gpu.name] = script  # dataclasses look their module up there
    gpu.loader.exec_module(script)
    return script if name == "gpu" else importlib.import_module(name)


@pytest.mark.slow
def test_a_step_stops_its_command_at_the_deadline_and_records_it(tmp_path):
    """SIGTERM leaves a training run time to finish its epoch and record itself interrupted;
    the step then still packs what there is within its budget."""
    runner = _gpu_module("runner")
    ctx = runner.Ctx("cpu", True, tmp_path, tmp_path, None, "t", budget=runner.PACK_RESERVE_S + runner.TERM_GRACE_S + 3)
    ctx.start_step()
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('asked to stop', flush=True), sys.exit(130)))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    rc = runner.run_logged([sys.executable, "-c", code], tmp_path / "step.log", ctx)
    record = json.loads((tmp_path / "step.json").read_text())
    assert rc == 130 and record["stopped_at_deadline"] and record["stop_reason"] == "time limit"
    assert record["seconds"] < 30
    assert (tmp_path / "step.log").read_text() == "started\nasked to stop\n"


# --- the matrix over two calls on two machines ---------------------------------------------


@pytest.fixture(scope="session")
def two_machines(dry_run, tmp_path_factory, forked):
    """The dry run's results (its reproduce call trained three runs on its machine) carried to a
    fresh machine (its own work folder: no data, caches or runs of the other), where the reproduce
    step trains the next four runs, then the report over both calls. Built on the dry run's call,
    which trains each run in a process of its own, rather than a first call of its own."""
    base = tmp_path_factory.mktemp("gpu-two-machines")
    results = base / "results"
    shutil.copytree(dry_run[0], results)
    procs = []
    for i, step in enumerate(("reproduce", "report")):
        cmd = ["experiments/gpu/gpu.py", step, "--device", "cpu", "--quick"]
        cmd += ["--results-dir", str(results), "--work-dir", str(base / "machine1"), "--runs", "4"]
        env = dict(os.environ, OUT=str(base / f"out{i}"))
        procs.append(forked.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600))
    return results, procs


@pytest.mark.slow
def test_two_calls_on_two_machines_add_runs_of_one_matrix_and_one_report(two_machines):
    results, procs = two_machines
    for proc in procs:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    calls = sorted((results / "dry-run-lenet" / "calls").iterdir())
    assert len(calls) == 2
    made = [sorted(p.name for p in (c / "runs" / "lenet-folder").iterdir()) for c in calls]
    assert made[0] == ["fine-seed0", "random-seed0", "regular-seed0"]
    assert len(made[1]) == 4 and not set(made[0]) & set(made[1])  # the next missing runs, none twice
    assert "shorter-25-seed0" in made[1] and "shorter-50-seed0" in made[1] and "regular-seed1" in made[1]
    with open(results / "dry-run-lenet" / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["variant"] for r in rows} == {""}  # one context: the data unpacked twice is one dataset
    seeds = {r["policy"]: int(r["seeds"]) for r in rows}
    assert seeds["regular"] == 2 and sum(seeds.values()) == 7


def test_the_scaled_recipe_keeps_its_fractions_and_says_so():
    reproduce = _gpu_module("reproduce")
    cfg = yaml.safe_load((GPU_DIR / "cifar10-resnet18.yaml").read_text())
    scaled = reproduce.scaled_recipe(cfg, 60)
    assert scaled["train"]["epochs"] == 60 and scaled["train"]["milestones"] == [18, 36, 48]
    assert (scaled["prune"]["window"], scaled["prune"]["start"]) == (18, 9)
    assert scaled["data"]["label"] == "CIFAR-10 (JPEG q75); the 200-epoch recipe scaled to 60 epochs"
    with pytest.raises(SystemExit, match="too few"):
        reproduce.scaled_recipe(yaml.safe_load((GPU_DIR / "cifar10-resnet18.yaml").read_text()), 3)


@pytest.mark.parametrize(
    "epochs, resumed_after, first_status, ok",
    [
        ([1, 2, 3, 4], [2], "interrupted", True),
        ([1, 2, 2, 3, 4], [2], "interrupted", False),  # an epoch recorded twice: the resume went back
        ([1, 2, 3, 4], [], "interrupted", False),  # trained again from the start, not resumed
        ([1, 2, 3, 4], [], "complete", False),  # the interruption never came: nothing resumed
    ],
)
def test_a_dist_row_passes_only_a_resume_that_continues_where_the_run_stopped(
    tmp_path, epochs, resumed_after, first_status, ok
):
    distcheck = _gpu_module("distcheck")
    (tmp_path / "summary.json").write_text(
        json.dumps({"status": "complete", "epochs_completed": 4, "resumed_after_epochs": resumed_after})
    )
    (tmp_path / "metrics.csv").write_text("epoch,lr\n" + "".join(f"{e},0.1\n" for e in epochs))
    row = distcheck.dist_row("async", 3, 2, tmp_path, [1, 0], {"status": first_status, "epochs_completed": 2})
    assert row["resumed_ok"] is ok and row["interrupted_after"] == (2 if first_status == "interrupted" else None)


def _step(forked, step: str, results: Path, work: Path) -> subprocess.CompletedProcess:
    cmd = ["experiments/gpu/gpu.py", step, "--device", "cpu", "--quick", "--results-dir", str(results)]
    env = dict(os.environ, OUT=str(work / "out"))
    return forked.run([*cmd, "--work-dir", str(work)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _one_error_line(proc: subprocess.CompletedProcess, *words: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(w in lines[0] for w in words), lines


@pytest.mark.parametrize(
    "text, why", [('{"machine": "NVIDIA H200", "runs": [{"arm": "reg', "JSONDecodeError"), ("[1, 2]", "not a call")]
)
def test_a_torn_call_record_stops_the_report_in_one_line(tmp_path, text, why, forked):
    """Issue 57: a call.json torn in transit (or edited into another shape) ended `make gpu STEP=report`
    in a JSONDecodeError traceback; it is named in one line, exit 2, before the report is made."""
    from factories import make_run

    call = tmp_path / "results" / "dry-run-lenet" / "calls" / "20260101T000000Z-cpu"
    make_run(call / "runs", "lenet", "regular", 0, 1.0, [50.0, 60.0])
    (call / "call.json").write_text(text)
    _one_error_line(_step(forked, "report", tmp_path / "results", tmp_path / "work"), "report:", "call.json", why)
    assert not (tmp_path / "results" / "dry-run-lenet" / "index.md").exists()


def test_an_edited_experiment_plan_stops_the_reproduce_step_in_one_line(tmp_path, forked):
    """Issue 57: an experiment's plan.json edited into one that is not a plan ended the reproduce
    step in a ConfigError traceback; it is named in one line, exit 2, before any run trains."""
    experiment = tmp_path / "results" / "dry-run-lenet"
    experiment.mkdir(parents=True)
    (experiment / "plan.json").write_text('{"judging": {"margin": "wide"}, "looks": [2, 3]}')
    _one_error_line(_step(forked, "reproduce", tmp_path / "results", tmp_path / "work"), "reproduce:", "plan.json")
    assert not (experiment / "calls").exists()

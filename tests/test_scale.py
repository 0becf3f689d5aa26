import json
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from conftest import tiny
from fineprune_cli.cli import app
from fineprune_cli.drivers.scale import BASELINE, Job, Launch, job_config, plan, run_one, run_scale, train_command
from fineprune_cli.drivers.scale_table import Targets, table, time_to, write_tables
from fineprune_cli.engine.records.files import to_csv
from fineprune_cli.engine.records.record import EpochRow, RunSummary, Status
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.errors import ConfigError


def _run(tmp_path, name, samples, seconds, losses, accuracies, **extra):
    """A fabricated run folder: summary.json and metrics.csv as a run writes them."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    epochs = len(losses)
    summary = RunSummary(
        model="lenet",
        dataset="synthetic",
        epochs=epochs,
        seed=0,
        status=Status.COMPLETE,
        samples_seen=samples,
        train_seconds=seconds,
        final_accuracy=accuracies[-1],
        device="cpu",
        git_commit="abc1234",
        extra=extra,
    )
    (run_dir / "summary.json").write_text(json.dumps(summary.to_dict()))
    rows = [
        EpochRow(
            epoch=e + 1,
            lr=0.1,
            samples=samples // epochs,
            train_seconds=seconds / epochs,
            train_loss=loss,
            test_loss=loss,
            test_accuracy=acc,
            pruned=0,
            overhead_seconds=0.0,
        )
        for e, (loss, acc) in enumerate(zip(losses, accuracies))
    ]
    (run_dir / "metrics.csv").write_text(to_csv(EpochRow.columns(), [list(vars(r).values()) for r in rows]))
    return run_dir


def test_plan_checks_modes_and_counts_and_adds_the_baseline_last():
    assert plan([2, 1, 2], ["sync"]) == [Job("sync", 2), BASELINE]
    assert plan([2], ["async"], [1, 2]) == [Job("async", 2, 1), Job("async", 2, 2), BASELINE]
    with pytest.raises(ConfigError, match="unknown --dist-mode gossip"):
        plan([1], ["gossip"])
    with pytest.raises(ConfigError, match="--nproc takes positive"):
        plan([0, 1], ["sync"])
    with pytest.raises(ConfigError, match="--num-ps takes positive"):
        plan([1], ["async"], [0])
    with pytest.raises(ConfigError, match="--num-ps applies to --dist-mode async and mixed only"):
        plan([1], ["sync"], [2])
    with pytest.raises(ConfigError, match="--dist-mode names no mode"):
        plan([1], [])


def test_processes_count_servers_and_folders_name_what_varies():
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic"})
    one_node = Job("mixed", 4, num_ps=2)
    assert (one_node.workers, one_node.servers, one_node.processes, one_node.per_node) == (4, 2, 6, 6)
    assert one_node.folder(cfg) == "lenet-synthetic-mixed-n4-ps2"
    two_nodes = Job("async", 4, num_ps=1, nnodes=2)  # --nproc: processes per node, the server among them
    assert (two_nodes.workers, two_nodes.processes, two_nodes.per_node) == (7, 8, 4)
    assert two_nodes.folder(cfg) == "lenet-synthetic-async-n7-nodes2"
    assert Job("sync", 2).folder(cfg) == "lenet-synthetic-sync-n2"  # the names of earlier scale runs
    assert Job("async", 2, 1).folder(cfg) == "lenet-synthetic-async-n2"
    assert yaml.safe_load(job_config(cfg, one_node))["run"]["num_ps"] == 2
    with pytest.raises(ConfigError, match="leave no worker"):
        plan([1], ["async"], [2], Launch(2, 0, "node0:29400"))


def test_commands_for_one_and_several_nodes(tmp_path):
    cfg_file, run_dir = tmp_path / "c.yaml", tmp_path / "run"
    single = train_command(BASELINE, cfg_file, run_dir)
    assert single[-6:] == ["train", "--config", str(cfg_file), "--out", str(run_dir), "--json"]
    assert "--nproc-per-node" not in single
    ps = train_command(Job("mixed", 2, num_ps=2), cfg_file, run_dir)
    assert ps[ps.index("--nproc-per-node") + 1] == "4" and "--nnodes" not in ps
    launch = Launch(nnodes=2, node_rank=1, endpoint="node0:29400")
    multi = train_command(Job("sync", 4, nnodes=2), cfg_file, run_dir, launch)
    assert multi[:-8] == single
    flags = dict(zip(multi[-8::2], multi[-7::2]))
    assert flags == {"--nproc-per-node": "4", "--nnodes": "2", "--node-rank": "1", "--rdzv-endpoint": "node0:29400"}


def test_the_baseline_under_srun_is_one_process_not_a_rank_of_the_step(tmp_path, monkeypatch):
    """`srun --ntasks-per-node 1 fineprune scale --nnodes 2 ...`: scale is task 0 of a 2-task
    step; its 1-process baseline inherits the step's variables and must still run alone."""
    import subprocess

    from fineprune_cli.engine.training.world import World, from_env

    monkeypatch.setattr(
        "os.environ",
        {
            "SLURM_STEP_ID": "0",
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "2",
            "SLURM_LOCALID": "0",
            "MASTER_ADDR": "n1",
        },
    )
    seen = []
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, env, **kw: seen.append(env) or subprocess.CompletedProcess(cmd, 0, "", "")
    )
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic"})
    run_one(cfg, BASELINE, tmp_path)
    assert from_env(seen[0]) == World() and seen[0]["OMP_NUM_THREADS"] == "1"


def test_launch_settings_are_checked():
    for launch, message in [
        (Launch(0), "--nnodes must be a positive"),
        (Launch(2, 0, None), "needs --rdzv-endpoint"),
        (Launch(2, 2, "h:1"), "--node-rank must be between 0 and 1"),
        (Launch(1, 1, None), "need --nnodes > 1"),
    ]:
        with pytest.raises(ConfigError, match=message):
            launch.check()


def test_speedup_against_one_sync_process_efficiency_counts_servers(tmp_path):
    runs = [
        (BASELINE, _run(tmp_path, "b", 1000, 10.0, [2.0, 1.5, 1.0], [40.0, 60.0, 70.0])),
        (Job("sync", 2), _run(tmp_path, "s2", 1000, 6.25, [2.0, 1.8, 1.2], [30.0, 50.0, 65.0])),
        (
            Job("async", 1),
            _run(tmp_path, "a1", 1000, 20.0, [2.0, 1.6, 1.1], [35.0, 62.0, 68.0], staleness_mean=0.0, staleness_max=0),
        ),
        (Job("mixed", 4, num_ps=2), _run(tmp_path, "m4", 1000, 4.0, [2.0, 1.9, 1.7], [20.0, 40.0, 50.0])),
    ]
    rows = table(runs)
    assert [r["speedup"] for r in rows] == [1.0, 1.6, 0.5, 2.5]  # all against the 1-process sync run
    assert [r["processes"] for r in rows] == [1, 2, 2, 6]
    assert [r["efficiency"] for r in rows] == [1.0, 0.8, 0.25, round(2.5 / 6, 3)]
    assert [r["speedup_per_worker"] for r in rows] == [1.0, 0.8, 0.5, 0.625]
    assert [r["servers"] for r in rows] == [0, 0, 1, 2]
    # time to accuracy: by default the lowest final accuracy (50), which every run reaches
    assert {r["target_accuracy"] for r in rows} == {50.0}
    assert [r["seconds_to_accuracy"] for r in rows] == [6.67, 4.17, 13.33, 4.0]  # epoch 2, 2, 2, 3
    # time to loss: the highest final loss of the runs that learned (1.7)
    assert rows[0]["target_train_loss"] == 1.7 and rows[3]["seconds_to_loss"] == pytest.approx(4.0)
    assert rows[2]["staleness_max"] == 0 and rows[0]["staleness_max"] == ""
    high = table(runs, Targets(loss=1.05, accuracy=69.0))
    assert [r["seconds_to_accuracy"] for r in high] == [pytest.approx(10.0), "", "", ""]
    assert [r["seconds_to_loss"] for r in high] == [pytest.approx(10.0), "", "", ""]
    md = write_tables(rows, [d for _, d in runs], tmp_path, "fineprune scale").read_text()
    assert "seconds_to_accuracy: training seconds until" in md and "efficiency: speedup / processes" in md
    assert (tmp_path / "scale.csv").read_text().splitlines()[0].startswith("mode,workers,servers,nodes,processes")


def test_a_table_without_the_baseline_or_a_readable_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no 1-process sync run"):
        table([(Job("sync", 2), _run(tmp_path, "s2", 100, 1.0, [1.0], [10.0]))])
    with pytest.raises(ConfigError, match="must be a folder all nodes share"):
        table([(BASELINE, tmp_path / "missing")])


def test_time_to_loss_and_accuracy():
    m = {"train_loss": [2.0, 1.0], "accuracy": [30.0, 60.0], "seconds": [1.0, 2.0]}
    assert time_to(1.0, m) == 3.0 and time_to(0.5, m) is None
    assert time_to(30.0, m, "accuracy") == 1.0 and time_to(61.0, m, "accuracy") is None


@pytest.mark.slow  # two trainings and a torchrun start: over a minute on one busy core
def test_cli_scale_adds_the_baseline_and_runs_two_processes(tmp_path, forked, monkeypatch):
    """scale's `python -m fineprune_cli train` commands are forked from the fork server (the
    1-process baseline, and the command that starts torchrun for the 2-process run): processes
    of their own as before, without a new interpreter's seconds of imports each; torchrun and
    its ranks are new interpreters, as a user's are."""
    import subprocess
    import sys

    from fineprune_cli.drivers import scale

    def forking(cmd, **options):
        assert cmd[0] == sys.executable, cmd
        return forked.run(cmd[1:], **options)

    monkeypatch.setattr(scale, "subprocess", SimpleNamespace(run=forking, CompletedProcess=subprocess.CompletedProcess))
    out = tmp_path / "scale"
    result = CliRunner().invoke(
        app,
        [
            "scale",
            *tiny(subset=512, test_subset=200, batch_size=64),
            "--milestones",
            "",
            "--nproc",
            "2",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["mode"], r["workers"]) for r in rows] == [("sync", 1), ("sync", 2)] and rows[0]["speedup"] == 1.0
    assert all(r["images_per_s"] > 0 and r["final_accuracy"] >= 0 and r["seconds_to_accuracy"] != "" for r in rows)
    assert (out / "scale.md").read_text().count("| sync |") == 2
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["lenet-synthetic-sync-n1", "lenet-synthetic-sync-n2"]
    assert json.loads((out / "runs" / runs[1] / "summary.json").read_text())["world_size"] == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch-size", "100", "--nproc", "1,3"], "must divide by every sync run's processes"),
        (["--num-ps", "0", "--dist-mode", "async"], "--num-ps takes positive integers"),
        (["--nproc", "0"], "--nproc takes positive integers"),
        (["--nnodes", "2"], "--nnodes > 1 needs --rdzv-endpoint"),
        (["--target-loss", "nan"], "--target-loss must be a positive number"),
        (["--target-accuracy", "101"], "--target-accuracy must be a percentage"),
    ],
)
def test_cli_scale_bad_input_exits_2_with_one_line(tmp_path, args, message):
    result = CliRunner().invoke(
        app, ["scale", "--model", "lenet", "--dataset", "synthetic", "--out", str(tmp_path), *args]
    )
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_folder_from_another_scale_is_refused_not_reported(tmp_path):
    """Item 5 of the reliability issue: a complete run of other settings under this command's name."""
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 1})
    run_dir = tmp_path / "runs" / "lenet-synthetic-sync-n1"
    run_dir.mkdir(parents=True)
    other = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 2})
    (run_dir / "scale-config.yaml").write_text(job_config(other, BASELINE))
    (run_dir / "summary.json").write_text(json.dumps({"status": "complete"}))
    with pytest.raises(ConfigError, match="holds a run with other settings than this command's"):
        run_one(cfg, BASELINE, tmp_path)


def test_a_folder_of_other_settings_is_refused_before_anything_trains(tmp_path):
    """The README's scale line, run where results/scale held the committed runs, trained three
    mixed runs (11 minutes) before it reached the baseline's folder of other settings, run last.
    Catches: folders checked one by one as their turn comes."""
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 1})
    other = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 2})
    baseline = tmp_path / "runs" / BASELINE.folder(cfg)
    baseline.mkdir(parents=True)
    (baseline / "scale-config.yaml").write_text(job_config(other, BASELINE))
    (baseline / "summary.json").write_text(json.dumps({"status": "complete"}))
    first = Job("sync", 2)
    with pytest.raises(ConfigError, match="holds a run with other settings"):
        run_scale(cfg, [first, BASELINE], tmp_path, "fineprune scale")
    assert not (tmp_path / "runs" / first.folder(cfg)).exists()


@pytest.mark.parametrize("job", [BASELINE, Job("async", 1)])
def test_a_folder_from_before_num_ps_and_batch_per_worker_is_reused(tmp_path, job):
    """A complete sync or async run written before run.num_ps / train.batch_per_worker existed
    (with the old group_size default, which neither mode uses) is the same run: it is reused,
    not refused or retrained. A mixed run's group size counts."""
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 1})
    old = yaml.safe_load(job_config(cfg, job))
    del old["run"]["num_ps"], old["train"]["batch_per_worker"]
    old["run"]["group_size"] = 2
    (tmp_path / "runs").mkdir()
    run_dir = _run(tmp_path / "runs", job.folder(cfg), 100, 1.0, [1.0], [10.0])
    (run_dir / "scale-config.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    assert run_one(cfg, job, tmp_path) == run_dir
    mixed = Job("mixed", 1)
    old["run"]["dist_mode"] = "mixed"
    run_dir.rename(tmp_path / "runs" / mixed.folder(cfg))
    (tmp_path / "runs" / mixed.folder(cfg) / "scale-config.yaml").write_text(yaml.safe_dump(old))
    with pytest.raises(ConfigError, match="other settings"):
        run_one(cfg, mixed, tmp_path)


def test_several_nodes_run_in_step_and_node_zero_alone_runs_the_baseline(tmp_path, monkeypatch):
    """Nothing trains: run_one is replaced by fabricated run folders."""
    from fineprune_cli.drivers import scale

    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.batch_size": 64})
    launched = []

    def fake_run(cfg, job, out, launch):
        launched.append((job, launch.node_rank))
        name = job.folder(cfg)
        if (out / "runs" / name).exists():
            return out / "runs" / name
        run_dir = _run(out / "runs", name, 1000, 10.0 / job.workers, [2.0, 1.0], [40.0, 60.0])
        (run_dir / "scale-config.yaml").write_text(job_config(cfg, job))  # as run_one writes it
        return run_dir

    monkeypatch.setattr(scale, "run_one", fake_run)
    jobs = plan([2], ["sync"], None, Launch(2, 1, "node0:29400"))
    assert jobs == [Job("sync", 2, nnodes=2), BASELINE]
    assert scale.run_scale(cfg, jobs, tmp_path, "cmd", launch=Launch(2, 1, "node0:29400")) is None
    assert launched == [(Job("sync", 2, nnodes=2), 1)]  # node 1 skips the 1-process baseline
    rows, md = scale.run_scale(cfg, jobs, tmp_path, "cmd", launch=Launch(2, 0, "node0:29400"))
    assert launched[1:] == [(Job("sync", 2, nnodes=2), 0), (BASELINE, 0)]  # baseline last
    assert [(r["workers"], r["nodes"], r["speedup"]) for r in rows] == [(1, 1, 1.0), (4, 2, 4.0)]
    assert md.exists() and (tmp_path / "runs" / "lenet-synthetic-sync-n4-nodes2").is_dir()


def test_a_failed_run_is_explained_by_its_record_or_its_own_error_line(tmp_path):
    """The README's scale line stopped on "the 5-process async run failed: ====...": torchrun's
    banner, whose last line is a row of '='. Catches: the last stderr line taken as the reason."""
    from fineprune_cli.drivers.scale import failure_reason

    banner = (
        "error: something broke in rank 2\n" + "=" * 60 + "\nRoot Cause (first observed failure):\n" + "=" * 60 + "\n"
    )
    assert failure_reason(banner, tmp_path / "none") == "something broke in rank 2"
    assert failure_reason("Traceback ...\nValueError: bad\n" + "=" * 60 + "\n", tmp_path / "none") == "ValueError: bad"
    assert failure_reason("", tmp_path / "none") == "no output"
    run_dir = _run(tmp_path, "async-n4", 100, 1.0, [1.0], [10.0])
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "status": "diverged", "diverged_epoch": 1}))
    assert failure_reason(banner, run_dir).startswith("diverged at epoch 1 (its loss is not finite; try a smaller --lr")

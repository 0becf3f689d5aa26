import json

import pytest
from typer.testing import CliRunner

from fineprune_cli.cli import app
from fineprune_cli.errors import ConfigError
from fineprune_cli.drivers.scale import plan, table, time_to
from fineprune_cli.engine.record import RunSummary


def _m(samples, seconds, losses, acc=50.0):
    summary = RunSummary(model="lenet", dataset="synthetic", epochs=len(losses), seed=0,
                         samples_seen=samples, train_seconds=seconds, final_accuracy=acc)
    return {"summary": summary, "train_loss": losses, "seconds": [seconds / len(losses)] * len(losses)}


def test_plan_checks_modes_and_counts():
    assert plan([2, 1, 2], ["sync"]) == [("sync", 1), ("sync", 2)]
    with pytest.raises(ConfigError, match="unknown --dist-mode gossip"):
        plan([1], ["gossip"])
    with pytest.raises(ConfigError, match="positive"):
        plan([0, 1], ["sync"])


def test_speedup_efficiency_and_time_to_target():
    rows = table([("sync", 1, _m(1000, 10.0, [2.0, 1.5, 1.0])),
                  ("sync", 2, _m(1000, 6.25, [2.0, 1.8, 1.2]))], None)
    assert [r["speedup"] for r in rows] == [1.0, 1.6]
    assert [r["efficiency"] for r in rows] == [1.0, 0.8]
    assert rows[0]["target_train_loss"] == 1.2                      # the highest final loss
    assert rows[0]["seconds_to_target"] == pytest.approx(10.0)      # 1.5 > 1.2, reached at epoch 3
    assert rows[1]["seconds_to_target"] == pytest.approx(6.25)
    assert time_to(0.5, _m(1, 1.0, [1.0])) is None
    diverged = table([("async", 1, _m(1000, 10.0, [2.0, 1.0])), ("async", 2, _m(1000, 10.0, [2.3, 2.3]))], None)
    assert diverged[0]["target_train_loss"] == 1.0 and diverged[1]["seconds_to_target"] == ""


def test_cli_scale_runs_one_and_two_processes(tmp_path):
    out = tmp_path / "scale"
    result = CliRunner().invoke(app, [
        "scale", "--model", "lenet", "--dataset", "synthetic", "--subset", "512", "--test-subset", "200",
        "--epochs", "2", "--batch-size", "64", "--milestones", "", "--device", "cpu", "--nproc", "1,2",
        "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["workers"] for r in rows] == [1, 2] and rows[0]["speedup"] == 1.0
    assert all(r["images_per_s"] > 0 and r["final_accuracy"] >= 0 for r in rows)
    assert (out / "scale.md").read_text().count("| sync |") == 2
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["lenet-synthetic-sync-n1", "lenet-synthetic-sync-n2"]
    assert json.loads((out / "runs" / runs[1] / "summary.json").read_text())["world_size"] == 2


def test_cli_scale_bad_input(tmp_path):
    result = CliRunner().invoke(app, ["scale", "--model", "lenet", "--dataset", "synthetic",
                                      "--batch-size", "100", "--nproc", "1,3", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "must divide by every --nproc" in result.output


def test_a_folder_from_another_scale_is_refused_not_reported(tmp_path):
    """Item 5 of the reliability issue: a complete run of other settings under this command's name."""
    from fineprune_cli.drivers.scale import run_one
    from fineprune_cli.engine.config import build_config

    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 1})
    run_dir = tmp_path / "runs" / "lenet-synthetic-sync-n1"
    run_dir.mkdir(parents=True)
    other = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", "train.epochs": 2}).to_dict()
    other["run"].update(out=None, dist_mode="sync")
    import yaml
    (run_dir / "scale-config.yaml").write_text(yaml.safe_dump(other, sort_keys=False))
    (run_dir / "summary.json").write_text(json.dumps({"status": "complete"}))
    with pytest.raises(ConfigError, match="holds a run with other settings than this command's"):
        run_one(cfg, "sync", 1, tmp_path)


def test_an_empty_mode_list_and_a_bad_target_are_refused():
    with pytest.raises(ConfigError, match="--dist-mode names no mode"):
        plan([1], [])
    result = CliRunner().invoke(app, ["scale", "--model", "lenet", "--dataset", "synthetic", "--target-loss", "nan"])
    assert result.exit_code == 2 and "--target-loss must be a positive number" in result.output

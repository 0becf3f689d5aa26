"""What a new user hit in issue 31 (items 9 and 10): help text, --json, examples, and settings
that cannot act or that --config would refuse to read back."""

import json

import pytest
from typer.testing import CliRunner

from conftest import TINY
from fineprune_cli.cli import app
from fineprune_cli.cli.conventions import EXAMPLES
from fineprune_cli.engine.setup.config import build_config, validate
from fineprune_cli.engine.training.world import from_env
from fineprune_cli.errors import ConfigError

runner = CliRunner()


def test_help_keeps_the_brackets_of_an_extra():
    """Rich markup ate '[tensorboard]': 'pip install 'fineprune''."""
    help_text = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "250"}).output
    assert "pip install 'fineprune[tensorboard]'" in help_text


def test_compare_help_lists_image_size():
    assert "--image-size" in runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "250"}).output


def test_no_help_example_writes_into_the_committed_results():
    committed = ("results/demo", "results/policies", "results/scale", "results/cifar10-jpeg-lenet-cpu")
    for text in EXAMPLES.values():
        outs = [line.split("--out ")[1].split()[0] for line in text.splitlines() if "--out " in line]
        assert not any(o.rstrip("/").startswith(committed) for o in outs), text


def test_compare_json_writes_null_for_a_missing_number(capsys):
    from fineprune_cli.cli.views import show_compare

    show_compare(
        [{"model": "lenet", "dataset": "x", "variant": "", "policy": "fine", "seeds": 1, "d_final_ci_low": ""}],
        as_json=True,
    )
    row = json.loads(capsys.readouterr().out)[0]
    assert row["d_final_ci_low"] is None and row["variant"] == "" and row["seeds"] == 1


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--epochs", "1"], "first epoch that can leave samples out is epoch 2"),
        (["--prune-fraction", "0"], "--prune-fraction 0 hides no sample"),
    ],
)
def test_kakurenbo_that_can_hide_nothing_is_refused(extra, words):
    settings = {
        "model.name": "lenet",
        "data.dataset": "synthetic",
        "prune.policy": "kakurenbo",
        "train.epochs": int(extra[1]) if extra[0] == "--epochs" else 3,
    }
    if extra[0] == "--prune-fraction":
        settings["prune.prune_fraction"] = 0.0
    with pytest.raises(ConfigError, match=words):
        validate(build_config(None, settings))


def test_settings_that_cannot_act_are_dropped_not_recorded():
    """--kakurenbo-tau under fine and --lr-scale-pruned on a regular run split report rows and
    blocked compare's reuse."""
    base = {"model.name": "lenet", "data.dataset": "synthetic"}
    fine = build_config(None, {**base, "prune.policy": "fine", "prune.kakurenbo_tau": 0.2})
    assert fine.prune.kakurenbo_tau == 0.7
    kakurenbo = build_config(None, {**base, "prune.policy": "kakurenbo", "prune.kakurenbo_tau": 0.2})
    assert kakurenbo.prune.kakurenbo_tau == 0.2
    assert build_config(None, {**base, "train.lr_scale_pruned": True}).train.lr_scale_pruned is None


def test_print_config_with_an_absolute_out_reads_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed = runner.invoke(app, ["train", *TINY, "--out", str(tmp_path / "abs"), "--print-config"])
    assert printed.exit_code == 0, printed.output
    (tmp_path / "c.yaml").write_text(printed.output)
    again = runner.invoke(app, ["train", "--config", "c.yaml", "--out", str(tmp_path / "abs"), "--print-config"])
    assert again.exit_code == 0 and again.output == printed.output, again.output
    assert "pass it as --out" in printed.output


def test_report_margin_beyond_100_points_is_refused(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "rep"), "--margin", "1e308"])
    assert result.exit_code == 2 and "--margin" in result.output


def test_a_rank_beyond_its_world_is_refused_not_run_alone():
    with pytest.raises(ConfigError, match="RANK"):
        from_env({"RANK": "1", "WORLD_SIZE": "1"})
    assert from_env({"RANK": "0", "WORLD_SIZE": "1"}).size == 1


def test_sigterm_while_a_report_is_written_leaves_the_previous_report_and_no_staging_folder(tmp_path, monkeypatch):
    """Killed by SIGTERM's default action, the hidden .report-* staging folder stayed in --out."""
    import os
    import signal

    from factories import make_run
    from fineprune_cli.analysis.render import report

    make_run(tmp_path / "runs", "lenet", "regular", 0, 10.0, [50.0, 60.0])
    assert (
        runner.invoke(app, ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"), "--no-plots"]).exit_code
        == 0
    )
    before = {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()}
    real = report._write_all

    def killed_midway(rep, with_plots):
        real(rep, with_plots)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(report, "_write_all", killed_midway)
    handler = signal.getsignal(signal.SIGTERM)
    result = runner.invoke(
        app, ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"), "--no-plots", "--margin", "0.5"]
    )
    assert result.exit_code == 130, result.output  # as Ctrl-C
    assert {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()} == before  # no .report-*, no new file
    assert signal.getsignal(signal.SIGTERM) == handler

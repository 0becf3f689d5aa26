import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import PRUNE_ODD_EPOCHS, TINY, invoke, metrics_rows, summary_of, tiny

runner = CliRunner()


@pytest.mark.slow
def test_train_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "run"
    result = invoke(["train", *TINY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "test accuracy" in result.output
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["model"]["name"] == "lenet" and config["train"]["epochs"] == 2
    rows = metrics_rows(out)
    assert [r["epoch"] for r in rows] == ["1", "2"]
    assert set(rows[0]) >= {
        "epoch",
        "lr",
        "samples",
        "train_seconds",
        "train_loss",
        "test_loss",
        "test_accuracy",
        "pruned",
    }
    assert rows[0]["samples"] == "200"
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "complete" and s["epochs_completed"] == 2
    for key in (
        "model",
        "dataset",
        "epochs",
        "seed",
        "device",
        "train_seconds",
        "eval_seconds",
        "final_accuracy",
        "best3_accuracy",
        "torch",
        "git_commit",
    ):
        assert key in s
    assert s["final_accuracy"] == pytest.approx(float(rows[-1]["test_accuracy"]))
    assert not list(out.glob("*.tmp"))


@pytest.mark.slow
def test_prune_run_records_schedule_and_skips(tmp_path):
    out = tmp_path / "run"
    args = ["train", *tiny(epochs=4, **PRUNE_ODD_EPOCHS, count=1, prune_fraction=0.25), "--out", out, "--json"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    assert s["pruning_epochs"] == [1, 3] and s["samples_skipped"] == 2 * 50
    assert s["samples_seen"] == 4 * 200 - 100 and s["overhead_seconds"] >= 0
    assert s["schedule"]["window"] == 2 and s["policy"] == "fine"
    assert [r["pruned"] for r in metrics_rows(out)] == ["1", "0", "1", "0"]
    assert [r["samples"] for r in metrics_rows(out)] == ["150", "200", "150", "200"]
    assert sorted(p.name for p in out.glob("dropping_counts_window*.pt")) == [
        "dropping_counts_window0.pt",
        "dropping_counts_window1.pt",
        "dropping_counts_window2.pt",
    ]


@pytest.mark.slow
def test_same_seed_gives_identicalmetrics_rows(tmp_path):
    runs = []
    for name in ("a", "b"):
        assert invoke(["train", *TINY, "--seed", "5", "--out", str(tmp_path / name)]).exit_code == 0
        runs.append([{k: v for k, v in r.items() if "seconds" not in k} for r in metrics_rows(tmp_path / name)])
    assert runs[0] == runs[1]


@pytest.mark.slow
def test_yaml_config_then_flags(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "model: {name: lenet}\ndata: {dataset: synthetic, subset: 100}\n"
        "train: {epochs: 5, batch_size: 50}\nrun: {device: cpu}\n"
    )
    out = tmp_path / "run"
    assert invoke(["train", "--config", str(cfg), "--epochs", "1", "--out", str(out)]).exit_code == 0
    assert len(metrics_rows(out)) == 1 and metrics_rows(out)[0]["samples"] == "100"


def test_estimate_json():
    result = invoke(["estimate", "--epochs", "200", "--window", "60", "--epoch-seconds", "10", "--json"])
    assert result.exit_code == 0, result.output
    est = json.loads(result.output)
    assert est["n_prune"] == len(est["pruning_epochs"]) == 72 and est["n_prune_formula"] == 45
    assert est["t_regular"] == 2000 and est["saving_percent"] == pytest.approx(10.8)


def test_estimate_table_and_timeline():
    args = ["estimate", "--epochs", "30", "--window", "10", "--start", "5"]
    est = json.loads(invoke([*args, "--json"]).output)
    result = invoke(args)
    assert result.exit_code == 0
    # even epochs (block 2, count 1) from position a = 5, 2, 1, 0 of windows 0..3
    assert est["pruning_epochs"] == [6, 8, 12, 14, 16, 18, 22, 24, 26, 28, 30]
    assert f"{est['saving_percent']:.2f}%" in result.output
    timeline = [line for line in result.output.splitlines() if line.startswith("w")]
    assert timeline[0].split() == ["w0", "a=5", "1-9", "|.....#.#.|"]
    assert timeline[1].split() == ["w1", "a=2", "10-19", "|..#.#.#.#.|"]
    assert len(timeline) == 4 and timeline[3].split() == ["w3", "a=0", "30-30", "|#|"]


@pytest.mark.slow
def test_estimate_from_run_folder(tmp_path):
    out = tmp_path / "run"
    assert invoke(["train", *TINY, "--epochs", "3", "--out", str(out)]).exit_code == 0
    result = invoke(["estimate", "--run", str(out), "--window", "2", "--start", "1", "--json"])
    assert result.exit_code == 0, result.output
    est = json.loads(result.output)
    assert est["time_unit"] == "seconds" and est["epochs"] == 3 and est["epoch_seconds"] > 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["train", "--model", "resnet9", "--dataset", "synthetic"], "--model must be one of: lenet, vgg13"),
        (["train", "--model", "lenet", "--dataset", "mnist"], "--dataset must be one of: fashion-mnist"),
        (["train", "--dataset", "synthetic"], "no model given"),
        (["train", *TINY, "--epochs", "0"], "--epochs must be between 1 and 100,000"),
        (["train", *TINY, "--epochs", "-3"], "--epochs must be between 1 and 100,000"),
        (["train", *TINY, "--batch-size", "0"], "--batch-size must be between 1 and 16,777,216"),
        (["train", *TINY, "--lr", "-0.1"], "--lr must be positive"),
        (["train", *TINY, "--milestones", "120,60"], "strictly increasing"),
        (["train", *TINY, "--milestones", "a,b"], "comma-separated integers"),
        (["train", *TINY, "--epochs", "ten"], "Invalid value for '--epochs'"),
        (["train", *TINY, "--prune", "--window", "0"], "--window must be >= 1"),
        (["train", *TINY, "--prune", "--window", "60", "--start", "70"], "--start must be in [0, window=60)"),
        (["train", *TINY, "--prune", "--start", "5"], "--start must be in [0, window=1)"),  # 30% of 2 epochs
        (
            ["train", *TINY, "--prune", "--window", "60", "--start", "30"],
            "--policy fine prunes no epoch of 2: window 60 with start 30 first prunes epoch 30; lower --start",
        ),
        (["train", *TINY, "--policy", "infobatch", "--epochs", "1"], "--policy infobatch prunes no epoch of 1"),
        (["train", *TINY, "--prune", "--policy", "regular"], "--prune asks for pruning but --policy regular"),
        (["train", *TINY, "--prune", "--count", "3"], "--count must be in [1, block=2]"),
        (["train", *TINY, "--prune", "--attenuation", "0.5"], "--attenuation must be >= 1"),
        (["train", *TINY, "--prune-fraction", "1.5"], "--prune-fraction must be in [0, 1)"),
        (["train", *TINY, "--tolerance", "-1"], "--tolerance must be >= 0"),
        (["train", *TINY, "--widen", "4"], "--widen"),
        (["train", *TINY, "--bogus"], "No such option"),
        (["estimate", "--window", "0"], "--window must be >= 1"),
        (["estimate", "--epoch-seconds", "-1"], "--epoch-seconds must be positive"),
        (["estimate", "--epoch-seconds", "1e308"], "at most 1,000,000"),  # printed nan% and exit 0
        (["estimate", "--epoch-seconds", "1", "--run", "x"], "not both"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    result = invoke(args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.output
    assert "Traceback" not in result.output


def test_bad_config_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    for text, words in [
        ("train: {epochs: [\n", "not valid YAML"),
        ("train: {epoch: 3}\n", "unknown key 'train.epoch'"),
    ]:
        bad.write_text(text)
        result = invoke(["train", *TINY, "--config", str(bad)])
        assert result.exit_code == 2 and words in result.output


def test_missing_data_files(tmp_path):
    result = invoke(
        [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "cifar10",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert str(tmp_path) in result.output


def test_unwritable_out_is_caught_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = invoke(["train", *TINY, "--out", str(blocker / "run")])
    assert result.exit_code == 2 and "cannot write run folder" in result.output


@pytest.mark.slow
def test_real_subprocess(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    ok = subprocess.run(
        [sys.executable, "-m", "fineprune_cli", "train", *TINY, "--epochs", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr
    assert (out / "summary.json").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "fineprune_cli", "train", "--model", "nope", "--dataset", "synthetic"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: --model must be one of: lenet")
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_an_empty_out_is_refused_not_read_as_the_default(tmp_path):
    result = invoke(["train", *TINY, "--out", ""])
    assert result.exit_code == 2 and "--out must not be empty" in result.output


@pytest.mark.slow
def test_estimate_of_a_dynamic_policy_reads_its_budget_from_a_run(tmp_path):
    result = invoke(["estimate", "--policy", "infobatch", "--epochs", "10"])
    assert result.exit_code == 2 and "infobatch's pruning is chosen from the losses during the run" in result.output
    out = tmp_path / "ib"
    assert invoke(["train", *TINY, "--epochs", "4", "--prune", "--policy", "infobatch", "--out", out]).exit_code == 0
    est = json.loads(invoke(["estimate", "--run", out, "--json"]).output)
    s, rows = summary_of(out), metrics_rows(out)
    pruned = [int(r["epoch"]) for r in rows if r["pruned"] == "1"]
    assert est["pruning_epochs"] == pruned == [2, 3]  # epoch 1 sees no scores; 4 > 0.875 x 4
    assert est["prune_fraction"] == pytest.approx(s["samples_skipped"] / (2 * 200))
    # the measured epoch time and overhead give the saving (its sign depends on the machine's load)
    per_epoch = est["prune_fraction"] * est["epoch_seconds"] - est["overhead_per_pruning_epoch"]
    expected = 100 * 2 * per_epoch / (4 * est["epoch_seconds"])
    assert est["time_unit"] == "seconds" and est["saving_percent"] == pytest.approx(expected)


def test_json_output_is_strict_even_for_non_finite_numbers(capsys):
    from fineprune_cli import console

    console.print_json({"loss": float("nan"), "rows": [float("inf"), 1.5], "n": 2})
    strict = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert strict == {"loss": None, "rows": [None, 1.5], "n": 2}


@pytest.mark.slow
def test_user_text_is_never_read_as_markup(tmp_path):
    """'[/oops]' crashed rich after a complete run; '[red]x' lost its brackets."""
    for name in ("[/oops]", "[red]x"):
        out = tmp_path / name
        result = invoke(["train", *TINY, "--epochs", "1", "--out", out, "--set", f"data.label='{name}'"])
        assert result.exit_code == 0 and f"run folder: {out}" in result.output, result.output
    report = invoke(["report", tmp_path, "--out", tmp_path / "rep", "--no-plots"])
    assert report.exit_code == 0 and "[red]x" in (tmp_path / "rep" / "table1_time.md").read_text()


@pytest.mark.slow
def test_the_resume_hint_is_shell_quoted(tmp_path):
    out = tmp_path / "a b; rm x"
    result = invoke(["train", *TINY, "--epochs", "1", "--out", out])
    assert result.exit_code == 0
    again = invoke(["train", *TINY, "--epochs", "1", "--out", out])
    assert again.exit_code == 2 and f"--resume '{out}'`" in again.output


@pytest.mark.slow
def test_a_ctrl_c_while_the_error_line_is_printed_is_no_traceback(tmp_path):
    """A second Ctrl-C 0.1 s after the first lands while the process prints its resume hint
    and exits; made certain here: the signal comes from inside the printing."""
    script = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from fineprune_cli import console\n"
        "real = console.error\n"
        "def error(text):\n"
        "    real(text)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "console.error = error\n"
        "sys.argv = ['fineprune', 'train', '--model', 'lenet', '--dataset', 'synthetic', '--epochs', '0']\n"
        "from fineprune_cli.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_main_called_in_process_leaves_later_commands_their_signal_handlers(monkeypatch):
    """main() marks the command as owning the process (a late Ctrl-C is then ignored while it
    prints its last line); called in-process it left the mark, so every later failing command
    in that process set SIGTERM and SIGINT to 'ignore' (a test run then ignored its own stops)."""
    import signal
    import sys

    from fineprune_cli import cli

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(sys, "argv", ["fineprune", "train", "--model", "nope", "--dataset", "synthetic"])
    try:
        with pytest.raises(SystemExit):
            cli.main()  # owns the process: it ignores signals while it ends
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        assert invoke(["train", "--model", "nope", "--dataset", "synthetic"]).exit_code == 2
        assert {sig: signal.getsignal(sig) for sig in saved} == saved
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_pruning_policy_alone_prunes(tmp_path):
    """`--policy random` without --prune used to train regular and record policy 'regular'."""
    out = tmp_path / "run"
    result = invoke(["train", *TINY, "--epochs", "4", "--policy", "random", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    assert s["policy"] == "random" and s["pruning_epochs"] == [2, 4]  # window 1, start 0 of 4 epochs
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["prune"]["enabled"] is True and config["prune"]["policy"] == "random"


def test_a_ten_epoch_prune_run_prunes_the_scaled_schedule(tmp_path):
    """--prune on 10 epochs: window 3, start 2 (30% and 15% of 10, half up), milestones 3, 6, 8;
    the old fixed window 60, start 30 pruned nothing."""
    out = tmp_path / "run"
    result = invoke(["train", *TINY, "--epochs", "10", "--prune", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    assert s["pruning_epochs"] == [2, 4, 6, 8, 10] and s["schedule"]["window"] == 3
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["train"]["milestones"] == [3, 6, 8] and config["prune"]["start"] == 2


def test_no_prune_wins_over_a_policy(tmp_path):
    out = tmp_path / "run"
    result = invoke(["train", *TINY, "--policy", "random", "--no-prune", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policy"] == "regular"


def test_a_config_files_device_is_named_as_the_files(tmp_path, monkeypatch):
    """The user passed no --device: the error names the YAML file's run.device."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    f = tmp_path / "c.yaml"
    f.write_text(
        "model: {name: lenet}\ndata: {dataset: synthetic, subset: 100}\ntrain: {epochs: 2}\nrun: {device: cuda}\n"
    )
    result = invoke(["train", "--config", str(f), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {f}: run.device cuda asked for, but CUDA is not available here; "
        "pass --device cpu (flags override the file)"
    )
    result = invoke(["train", *TINY, "--device", "cuda", "--out", str(tmp_path / "run2")])
    assert "error: --device cuda asked for" in result.output


@pytest.mark.parametrize("epochs, named", [(2, True), (10, False)])
def test_train_names_a_run_that_is_its_random_control_before_it_trains(monkeypatch, tmp_path, epochs, named):
    # 2 epochs at the default schedule: window 1, its only pruning epoch 2 opens a window; 10
    # epochs prune 2, 4, 6, 8, 10, of which only 6 does. The session stops where its first epoch
    # would train, so the line must come before training and after the data loaded (a refusal of
    # bad input stays one line). Catches: a note after the run, or one for a run whose counts choose.
    from fineprune_cli.engine.training import session
    from fineprune_cli.errors import ConfigError

    def stop(*args, **kwargs):
        raise ConfigError("training would start here")

    monkeypatch.setattr(session, "run_session", stop)
    monkeypatch.chdir(tmp_path)  # the run folder it opened lands here, not in the repository
    result = invoke(["train", *TINY, "--epochs", str(epochs), "--prune"])
    assert result.exit_code == 2 and "training would start here" in result.output
    note = "fine-pruning is its random control here: its only pruning epoch (2) selects from an empty DroppingCount"
    assert (note in result.output) is named
    assert not named or result.output.index(note) < result.output.index("training would start here")

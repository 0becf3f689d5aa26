import json
import math
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factories import make_run
from fineprune_cli.analysis.group.rownumbers import epoch_ratio, pace_saving
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.analysis.render.summary import summary_rows
from fineprune_cli.analysis.render.tables import paper_results, table1, table2
from fineprune_cli.analysis.study import study
from fineprune_cli.cli import app

runner = CliRunner()


@pytest.fixture
def runs_root(tmp_path):
    root = tmp_path / "runs"
    for seed, (reg, fine, rand) in enumerate([(100.0, 90.0, 92.0), (110.0, 94.6, 99.0)]):
        make_run(root, "lenet", "regular", seed, reg, [50.0, 60.0, 70.0, 74.0 + seed])
        make_run(
            root, "lenet", "fine", seed, fine, [50.0, 61.0, 69.0, 73.5 + seed], overhead=0.5, skipped_epochs=(2, 4)
        )
        make_run(root, "lenet", "random", seed, rand, [50.0, 59.0, 68.0, 72.0 + seed], skipped_epochs=(2, 4))
    make_run(root, "vgg13", "regular", 0, 500.0, [80.0, 85.0], status="incomplete")
    corrupt = make_run(root, "vgg16", "regular", 0, 500.0, [80.0, 85.0])
    (corrupt / "summary.json").write_text('{"status": "compl')
    return root


def test_incomplete_and_corrupt_runs_are_listed_not_dropped(runs_root):
    runs, problems = load_runs([runs_root])
    assert len(runs) == 6
    status = {p.path.parent.name: (p.status, p.reason) for p in problems}
    assert status["vgg13-folder"] == ("incomplete", "2 of 2 epochs done")
    assert status["vgg16-folder"][0] == "unreadable" and "corrupt" in status["vgg16-folder"][1]


def test_short_metrics_is_unreadable(tmp_path):
    path = make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0])
    lines = (path / "metrics.csv").read_text().splitlines()
    (path / "metrics.csv").write_text("\n".join(lines[:-1]) + "\n")
    runs, problems = load_runs([tmp_path])
    assert not runs and "has 1 epochs, summary says 2" in problems[0].reason


def test_savings_and_accuracy_changes_are_paired_by_seed(runs_root):
    runs, _ = load_runs([runs_root])
    rows = {r["policy"]: r for r in summary_rows(study(runs))}
    # fine: 1 - 90/100 = 10%, 1 - 94.6/110 = 14%
    assert rows["fine"]["saved_pct_mean"] == pytest.approx(12.0)
    assert rows["fine"]["saved_pct_std"] == pytest.approx(2.8284, abs=1e-3)
    assert rows["random"]["saved_pct_mean"] == pytest.approx((8.0 + 10.0) / 2)
    assert rows["fine"]["d_final_mean"] == pytest.approx(-0.5)
    assert rows["random"]["d_final_mean"] == pytest.approx(-2.0)
    assert rows["fine"]["skipped_pct_mean"] == pytest.approx(15.0)
    assert rows["regular"]["seeds"] == 2


def test_own_pace_saving_compares_a_run_with_its_own_full_epochs(tmp_path):
    # epoch 1 (warm-up) 2.5 s, left out of the pace; full epochs 1.8 and 2.2 s, median 2 s (with
    # epoch 1 it would be 2.2: catches the warm-up counted); pruned epochs 1.4 s
    times = [2.5, 1.8, 1.4, 2.2, 1.4]
    make_run(tmp_path / "a", "lenet", "fine", 0, 10.0, [50.0] * 5, skipped_epochs=(3, 5), times=times)
    run = load_runs([tmp_path / "a"])[0][0]
    assert epoch_ratio(run) == pytest.approx(0.7)
    assert pace_saving(run) == pytest.approx(100 * (1 - 9.3 / (5 * 2.0)))  # epoch 1's time counts
    make_run(tmp_path / "b", "lenet", "fine", 0, 10.0, [50.0] * 5, skipped_epochs=(3, 5), times=[0.0] * 5)
    run = load_runs([tmp_path / "b"])[0][0]  # epochs too short to time: no figure, no crash
    assert math.isnan(pace_saving(run)) and math.isnan(epoch_ratio(run))


def test_table1_has_the_papers_rows_and_column(runs_root):
    header, rows = table1(study(load_runs([runs_root])[0]))
    assert header == ["", "LeNet"]
    table = {r[0]: r[1] for r in rows}
    assert table["Regular"] == "105.0 ± 7.1 s"
    assert table["fine-pruning"] == "91.8 ± 3.3 s"  # time minus the tracking overhead
    assert table["fine-pruning: overhead"] == "0.50 ± 0.00 s"
    assert table["fine-pruning: saved (same machine)"] == "12.00 ± 2.83%"
    assert table["random control: saved (same machine)"] == "9.00 ± 1.41%"
    assert table["Regular: sample-epochs trained"] == "4.00 ± 0.00"
    assert table["fine-pruning: sample-epochs trained"] == "3.40 ± 0.00"  # 4 - 2 epochs x 30 of 100
    assert table["fine-pruning: optimizer steps"] == "4 ± 0"  # 70 and 100 samples: one batch of 128 each
    assert table["fine-pruning: saved at own pace"] == "0.00 ± 0.00%"  # every epoch takes as long
    assert table["fine-pruning: pruned epoch / full epoch"] == "1.000 ± 0.000×"
    assert table["Paper saved (CIFAR-10)"] == "11.80%" and table["Paper regular (CIFAR-10)"] == "1220 s"
    names = [r[0] for r in rows]  # policies in the registry's order, each with its label
    assert names.index("fine-pruning") < names.index("random control") < names.index("Paper regular (CIFAR-10)")
    assert table["Dataset"] == "CIFAR-10 (JPEG q75)"


def test_table2_best3_final_and_paper(runs_root):
    header, rows = table2(study(load_runs([runs_root])[0]))
    table = {r[0]: r[1] for r in rows}
    assert table["Regular (final)"] == "74.50 ± 0.71%"
    # no spread at all (the accuracies lie on a grid of 0.5 pt, a 200-image test set): no interval,
    # never [-0.50, -0.50]
    assert table["fine-pruning − regular (final)"] == "-0.50 pt (n 2, no spread to judge by: no interval)"
    # (72+68+59)/3 - (74+70+60)/3, selected on the test set: described, not judged
    assert table["random control − regular (best-3; mean ± std, descriptive)"] == "-1.67 ± 0.00 pt"
    assert table["fine-pruning − random control (final)"] == "+1.50 pt (n 2, no spread to judge by: no interval)"
    assert table["fine-pruning: seeds"] == "2 (0 1)"
    assert not any("against regular" in name for name in table)  # words come from the decisions only
    assert table["Paper regular (CIFAR-10)"] == "75.15%" and table["Paper pruned − regular (CIFAR-10)"] == "-0.43 pt"
    assert table["Regular (best-3, selected on the test set)"] == "68.17 ± 0.24%"  # (74+70+60)/3 and (75+70+60)/3


def test_paper_file_holds_ten_models_with_consistent_speedups():
    models = paper_results()["models"]
    assert len(models) == 10
    for name in ("lenet", "vgg13", "resnet18", "resnet50"):
        m = models[name]
        speedup = 100 * (m["regular_s"] - m["pruned_s"] - m["overhead_s"]) / m["regular_s"]
        assert speedup == pytest.approx(m["speedup_pct"], abs=0.01)


def test_report_is_deterministic_and_complete(runs_root, tmp_path):
    a = write_report([runs_root], tmp_path / "a", with_plots=False)
    b = write_report([runs_root], tmp_path / "b", with_plots=False)
    names = sorted(p.name for p in a.files)
    assert names == sorted(p.name for p in b.files)
    for name in (
        "table1_time.csv",
        "table1_time.md",
        "table2_accuracy.csv",
        "table2_accuracy.md",
        "table3_time_to_accuracy.csv",
        "table3_time_to_accuracy.md",
        "summary.csv",
        "runs.csv",
        "index.md",
    ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    index = (tmp_path / "a" / "index.md").read_text()
    assert "## Runs left out" in index and "vgg13-folder" in index and "incomplete" in index
    assert "fineprune compare --config x.yaml" in index and "- Test CPU, 2 threads, torch 2.14.1, cpu: 6 runs" in index
    assert "| fine-pruning: saved (same machine) | 12.00 ± 2.83% |" in index


@pytest.mark.slow
def test_report_plots(runs_root, tmp_path):
    rep = write_report([runs_root], tmp_path / "r")
    pngs = sorted(p.name for p in (tmp_path / "r" / "plots").glob("*.png"))
    assert pngs == [
        "cost-lenet-cifar-10-jpeg-q75.png",
        "counts-lenet-cifar-10-jpeg-q75.png",
        "curves-lenet-cifar-10-jpeg-q75.png",
        "timeline-lenet-cifar-10-jpeg-q75.png",
        "tradeoff.png",
    ]
    assert all((tmp_path / "r" / "plots" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    index = (tmp_path / "r" / "index.md").read_text()
    assert all(f"(plots/{p})" in index for p in pngs)
    assert len(rep.runs) == 6


def test_cli_report(runs_root, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("Launched by hand.\n")
    result = runner.invoke(
        app, ["report", str(runs_root), "--out", str(tmp_path / "o"), "--no-plots", "--notes", str(notes), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["runs"]) == 6 and len(data["problems"]) == 2
    assert data["verdict"][0].startswith("One decision per policy, 1 in the family")
    assert [d["decision"] for d in data["decisions"] if d["decision"]] == ["can't tell yet"]
    assert "Launched by hand." in (tmp_path / "o" / "index.md").read_text()
    result = runner.invoke(app, ["report", str(runs_root), "--out", str(tmp_path / "o"), "--no-plots"])
    assert result.exit_code == 0 and "left out" in result.output


def test_report_without_plots_imports_no_plotting_library(runs_root, tmp_path, monkeypatch):
    """matplotlib took about 3.7 s of a 10 s report: --no-plots must not load it. A None in
    sys.modules makes any import of it fail, so a stray import ends this report in an error."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = runner.invoke(app, ["report", str(runs_root), "--out", str(tmp_path / "o"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert sys.modules["matplotlib"] is None


def test_cli_report_bad_input(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "does not exist" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    # a folder holding no run: one line, nothing written (issue 57: an empty report, exit 0)
    result = runner.invoke(app, ["report", str(empty), "--out", str(tmp_path / "o"), "--no-plots"])
    assert result.exit_code == 2 and "no run folders in" in result.output and "nothing to report" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_every_committed_run_folder_is_still_read():
    """Run folders written by earlier versions (schema 1, with and without a policy key, and
    parameter-server runs) stay readable: long experiments are never lost to a new release."""
    results = Path(__file__).resolve().parents[1] / "results"
    runs, problems = load_runs([results])
    assert not problems, problems
    assert len(runs) >= 20
    assert {r.policy for r in runs} >= {"regular", "fine", "random"}
    assert all(r.summary.train_seconds > 0 and len(r.metrics) == r.summary.epochs for r in runs)


def test_a_fifo_named_summary_is_left_out_not_waited_on(tmp_path):
    path = make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0])
    (path / "summary.json").unlink()
    os.mkfifo(path / "summary.json")
    runs, problems = load_runs([tmp_path])
    assert not runs and "not a regular file" in problems[0].reason


@pytest.mark.parametrize(
    "field, value",
    [("train_seconds", "4.2"), ("seed", "abc"), ("final_accuracy", None), ("train_seconds", 0), ("num_train", 0)],
)
def test_wrong_typed_summaries_are_left_out_with_a_reason(tmp_path, field, value):
    make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0], summary={field: value})
    runs, problems = load_runs([tmp_path])
    assert not runs and problems[0].status == "unreadable" and field in problems[0].reason


def test_report_out_that_is_a_file_is_one_line(runs_root, tmp_path):
    (tmp_path / "taken").write_text("x")
    result = runner.invoke(app, ["report", str(runs_root), "--out", str(tmp_path / "taken"), "--no-plots"])
    assert result.exit_code == 2 and result.output.startswith("error: cannot write the report into")
    assert "Traceback" not in result.output


def test_a_full_disk_under_report_is_one_line(runs_root, tmp_path, monkeypatch):
    from fineprune_cli.engine.records import files

    real = files.atomic_write_bytes

    def full(path, data):  # room for the write check, none for the tables
        if path.name != ".write-check":
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full)
    result = runner.invoke(app, ["report", str(runs_root), "--out", str(tmp_path / "o"), "--no-plots"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "No space left on device" in lines[0], result.output
    assert "table1_time" in lines[0]  # names the file it could not write


def test_cli_report_margin_and_target(runs_root, tmp_path):
    result = runner.invoke(
        app,
        ["report", str(runs_root), "--out", str(tmp_path / "o"), "--no-plots", "--margin", "0.75", "--target", "73.5"],
    )
    assert result.exit_code == 0, result.output
    index = (tmp_path / "o" / "index.md").read_text()
    assert "regular by 0.75 pt or more" in index and "| Target (test accuracy) | 73.50% |" in index
    # -0.50 in both seeds: no spread to judge by, so nothing is claimed either way
    assert "- **fine-pruning** (15.0% of sample-epochs skipped): **can't tell yet**" in index
    assert "Against C(p), the random control at the same budget (arms random): +1.50 pt in seeds 0, 1" in index
    assert "its seeds against regular leave no spread to judge by" in index
    assert "this report judges with margin 0.75 (planned 0.3)" not in index  # no plan: post hoc for that reason
    assert "no judging plan was recorded with these runs" in index
    assert "can't tell yet" in " ".join(result.output.split())  # printed too
    for flag, value, words in (
        ("--margin", "0", "--margin must be a number of accuracy points in (0, 100]"),
        ("--min-gain", "-1", "--min-gain must be a number of accuracy points in [0, 100]"),
        ("--margin", "nan", "--margin: must be a finite number"),
        ("--target", "120", "--target must be a number of accuracy points in (0, 100]"),
        ("--family", "holm", "--family must be one of: bonferroni"),
    ):
        result = runner.invoke(app, ["report", str(runs_root), "--out", str(tmp_path / "o"), flag, value])
        assert result.exit_code == 2 and result.output.startswith(f"error: {words}"), result.output


def test_the_papers_rows_only_beside_the_papers_dataset(tmp_path):
    """The paper measured CIFAR-10: beside a user's own folder (or Fashion-MNIST) its rows
    compare with nothing and are left out; an image folder labelled CIFAR-10 keeps them."""
    for label, shown in (("my flowers", False), ("Fashion-MNIST", False), ("CIFAR-100", False), ("cifar10", True)):
        root = tmp_path / label
        make_run(root, "lenet", "regular", 0, 10.0, [50.0, 60.0], label=label)
        make_run(root, "lenet", "fine", 0, 9.0, [50.0, 59.0], label=label, skipped_epochs=(2,))
        found = study(load_runs([root])[0])
        for _, rows in (table1(found), table2(found)):
            assert any(r[0].startswith("Paper") for r in rows) == shown, (label, rows)


def test_a_run_config_of_aliases_that_expand_without_bound_is_left_out_at_once(tmp_path):
    """config.yaml was read with plain safe_load: its shared lists came back cheaply, and the
    grouping that walks a run's settings then expanded 9**9 strings."""
    import time

    path = make_run(tmp_path, "lenet", "regular", 0, 10.0, [50.0, 60.0])
    inner = '["x","x","x","x","x","x","x","x","x"]'
    for name in "abcdefgh":
        inner = f"[&{name} {inner}" + f",*{name}" * 8 + "]"
    (path / "config.yaml").write_text(f"model:\n  name: lenet\n  notes: {inner}\n")
    start = time.monotonic()
    runs, problems = load_runs([tmp_path])
    assert time.monotonic() - start < 10
    assert not runs and "config.yaml is unreadable or corrupt" in problems[0].reason

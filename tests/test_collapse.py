"""A run that collapsed (chance level, a loss that did not fall) is named beside the decisions,
in the terminal and in index.md, with what to try, and stays in the decisions (issue 41)."""

from typer.testing import CliRunner

from conftest import TINY, invoke, summary_of
from factories import make_run
from fineprune_cli.analysis.read.collapse import collapsed
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.cli import app, views

runner = CliRunner()
CHANCE = {3: {"train_loss": 1.39}, 4: {"train_loss": 1.39}, 5: {"train_loss": 1.39}}  # ln 4: uniform guesses


def _runs(root, classes=4):
    """Regular and InfoBatch on a 4-class folder, 3 seeds; InfoBatch seed 1 at 25% from epoch 3 on."""
    for seed in range(3):
        make_run(root, "lenet", "regular", seed, 10.0, [60.0, 70.0, 80.0, 85.0, 86.0 + seed], summary={"classes": 4})
        accs = [60.0, 62.0, 25.0, 25.0, 25.0] if seed == 1 else [60.0, 70.0, 80.0, 84.0, 85.0 + seed]
        make_run(
            root,
            "lenet",
            "infobatch",
            seed,
            8.0,
            accs,
            skipped_epochs=(2, 3),
            summary={"classes": classes},
            rows=CHANCE if seed == 1 else None,
        )
    return root


def test_a_run_at_chance_level_is_named_with_the_epoch_it_fell_there(tmp_path):
    found = collapsed(load_runs([_runs(tmp_path)])[0])
    assert [(c.run.policy, c.run.seed) for c in found] == [("infobatch", 1)]
    assert "25% at chance level (25% for 4 classes) from epoch 3 on" in found[0].reason
    assert "training loss rose (epoch 1: 1, epoch 5: 1.39)" in found[0].reason


def test_without_a_class_count_a_flat_loss_still_names_it(tmp_path):
    found = collapsed(load_runs([_runs(tmp_path, classes=0)])[0])
    assert len(found) == 1 and "chance" not in found[0].reason and "loss rose" in found[0].reason


def test_healthy_runs_are_not_named(tmp_path):
    for seed in range(2):
        make_run(tmp_path, "lenet", "regular", seed, 10.0, [30.0, 26.0, 40.0, 80.0], summary={"classes": 4})
    assert collapsed(load_runs([tmp_path])[0]) == []  # below chance once, not at the end


def test_index_and_terminal_name_it_and_it_stays_in_the_decision(tmp_path):
    root = _runs(tmp_path / "runs")
    report = write_report([root], tmp_path / "report", with_plots=False)
    index = (tmp_path / "report" / "index.md").read_text()
    section = index.split("## Runs that collapsed\n", 1)[1].split("\n## ", 1)[0]
    assert "infobatch-seed1" in section and "chance level" in section and "lower --lr" in section
    assert "kept in the decisions" in section
    (decision,) = [d for d in report.study.decisions if d.policy == "infobatch"]
    assert len(decision.regular.diffs) == 3  # decided over all three seeds, the collapsed one included
    shown = runner.invoke(app, ["report", str(root), "--out", str(tmp_path / "r2"), "--no-plots"])
    assert shown.exit_code == 0, shown.output
    assert "1 run collapsed" in shown.output and "infobatch, seed 1" in shown.output and "lower --lr" in shown.output


def test_compare_names_it_after_its_decisions(tmp_path, capsys):
    found = collapsed(load_runs([_runs(tmp_path)])[0])
    views.show_compare([], collapsed=found)
    out = capsys.readouterr().out
    assert "1 run collapsed" in out and "from epoch 3 on" in out and "lower --lr" in out


def test_a_run_records_its_class_count(tmp_path):
    """Chance level of a folder's run needs its classes: the record keeps them."""
    result = invoke(["train", *TINY, "--out", tmp_path / "run"])
    assert result.exit_code == 0, result.output
    assert summary_of(tmp_path / "run")["classes"] == 10

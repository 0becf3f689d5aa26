"""An executor added from the tests alone (no source file edited): one Kind, one register line,
and `compare` runs through it, its own settings section read like any other."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import invoke, summary_of, tiny
from fineprune_cli.analysis.decide import judging
from fineprune_cli.drivers.executors import child, registry
from fineprune_cli.drivers.executors.contract import Kind, Outcome
from fineprune_cli.settings import option

TINY = tiny(policies="regular,fine", window=1, start=0)


@dataclass
class InProcessConfig:
    """The test executor's own section, compare.inprocess."""

    note: str = option("", flag="", help="Written beside each run, to show the section reached the executor.")


class InProcess:
    """Each task in this process, one after the other, through the child entry point."""

    def __init__(self, note: str):
        self.note = note

    def run(self, tasks, watch):
        outcomes = []
        for task in tasks:
            watch.changed(task, "running")
            child.run(task.config, task.command)
            (task.run_dir / "note.txt").write_text(self.note)
            outcomes.append(Outcome(task, True))
            watch.changed(task, "done")
        return outcomes


class InProcessKind(Kind):
    name = "inprocess"
    help = "each run in compare's own process, through the child entry point"
    settings = InProcessConfig

    def make(self, cfg, c):
        return InProcess(c.executor_settings.note)


def _halving(claims, k):
    """The test's family procedure: Bonferroni, then doubled, so its p-values are told apart."""
    return [min(1.0, 2 * c.p * k / c.share) for c in claims]


@pytest.mark.slow  # two tiny runs trained
def test_an_executor_added_by_the_tests_runs_compare_with_its_own_settings(tmp_path, monkeypatch):
    """Issue 51: an executor and a family procedure, both added here, run compare and report."""
    monkeypatch.setattr(registry, "KINDS", dict(registry.KINDS))
    registry.register(InProcessKind())
    monkeypatch.setitem(judging.FAMILIES, "halving-test", None)  # taken out again after the test
    judging.register_family(
        "halving-test",
        judging.Correction(
            "Halving (test)",
            "Halving over {policies}{looks_text}: {level}",
            "test",
            _halving,
            lambda alpha, k, share: alpha * share / (2 * k),
        ),  # fmt: skip
    )
    out = tmp_path / "out"
    args = ["compare", *TINY, "--out", out, "--executor", "inprocess", "--set", "compare.inprocess.note=hello"]
    args += ["--family", "halving-test"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    runs = sorted(Path(out).glob("lenet-synthetic/*-seed0"))
    assert [r.name for r in runs] == ["fine-seed0", "regular-seed0"]
    assert all(summary_of(r)["status"] == "complete" and (r / "note.txt").read_text() == "hello" for r in runs)
    # its section belongs to it alone: given under another executor, it is refused in one line
    other = invoke(["compare", *TINY, "--out", out, "--set", "compare.inprocess.note=x"])
    assert other.exit_code == 2 and other.output == "error: compare.inprocess needs --executor inprocess\n"
    # the plan compare recorded names the procedure, and the report judges by it
    assert '"family": "halving-test"' in (Path(out) / "plan.json").read_text()
    report = invoke(["report", out, "--out", tmp_path / "report", "--no-plots"])
    assert report.exit_code == 0, report.output
    assert "Halving (test)" in (tmp_path / "report" / "index.md").read_text()


def test_executor_names_are_the_registrys():
    assert registry.names()[:2] == ["local", "slurm"] and registry.DEFAULT == "local"
    assert registry.problem("ray") == "must be one of: local, slurm"

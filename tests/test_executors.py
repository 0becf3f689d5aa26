"""An executor and a family procedure added from the tests alone (no source file edited): in
this process, an entry each in its registry; in a fresh one, a module file each dropped into its
folder, found at start, listed in --help, and `compare` and `report` run through them."""

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import invoke, summary_of, tiny
from fineprune_cli.analysis.decide import procedures
from fineprune_cli.drivers.executors import child, local, registry
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
    monkeypatch.setitem(registry.EXECUTORS, "inprocess", InProcessKind())  # both taken out after the test
    halving = procedures.Correction(
        "halving-test",
        "Halving (test)",
        "test",
        "Halving over {policies}{looks_text}: {level}",
        _halving,
        lambda alpha, k, share: alpha * share / (2 * k),
    )
    monkeypatch.setitem(procedures.FAMILIES, "halving-test", halving)
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


EXECUTOR_MODULE = '''"""A test's executor: each run in compare's own process, one after the other."""

from .. import child
from ..contract import Kind, Outcome
from ..registry import EXECUTORS


class Serial:
    def run(self, tasks, watch):
        outcomes = []
        for task in tasks:
            watch.changed(task, "running")
            child.run(task.config, task.command)
            outcomes.append(Outcome(task, True))
            watch.changed(task, "done")
        return outcomes


class SerialKind(Kind):
    name = "serialtest"
    help = "each run in compare's own process, one after another: a test's module"

    def make(self, cfg, c):
        return Serial()


EXECUTORS.register(SerialKind())
'''

FAMILY_MODULE = '''"""A test's family procedure: Holm's step-down, worth-it and not-worth-it claims apart."""

from ..procedures import Correction, register_family


def _holm(claims, k):
    out = [1.0] * len(claims)
    for start in (0, 1):
        ranked = sorted(range(start, len(claims), 2), key=lambda i: claims[i].p)
        running = 0.0
        for j, i in enumerate(ranked):
            running = max(running, min(1.0, (k - j) * claims[i].p / claims[i].share))
            out[i] = running
    return out


register_family(
    Correction(
        "holmtest",
        "Holm (a test's module)",
        "Holm's step-down over the policies: a test's module",
        "Holm over {policies}{looks_text}: at most {level}",
        _holm,
        lambda alpha, k, share: alpha * share / k,
    )
)
'''


def _cli(args, site, cwd):
    """The real entry point in a fresh interpreter that imports the package from `site`."""
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "300", "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "fineprune_cli", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True
    )


@pytest.mark.slow  # a fresh interpreter four times, two tiny runs trained
def test_an_executor_and_a_family_each_one_module_file_are_found_at_start(tmp_path):
    """Issue 58: each added as one file in its folder and nothing else (no import, no list, no
    register line elsewhere), both are found when the command line starts: listed in --help with
    their own help words, and `compare` and `report` run through them. The files go into a copy
    of the package, which the fresh interpreter imports first, so no other test sees them."""
    site = tmp_path / "site"
    package = site / "fineprune_cli"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(child.__file__).parents[2], package, ignore=ignore)
    shutil.copytree(Path(child.__file__).parents[3] / "models", package / "models", ignore=ignore)
    (package / "drivers" / "executors" / "kinds" / "serialtest.py").write_text(EXECUTOR_MODULE)
    (package / "analysis" / "decide" / "families" / "holmtest.py").write_text(FAMILY_MODULE)

    compare_help = _cli(["compare", "--help"], site, tmp_path)
    assert compare_help.returncode == 0, compare_help.stderr
    flat = " ".join(compare_help.stdout.replace("│", " ").split())
    assert "serialtest (each run in compare's own process, one after another: a test's module)" in flat
    assert "holmtest (Holm's step-down over the policies: a test's module)" in flat
    report_help = " ".join(_cli(["report", "--help"], site, tmp_path).stdout.replace("│", " ").split())
    assert "holmtest (Holm's step-down" in report_help

    out = tmp_path / "out"
    made = _cli(["compare", *TINY, "--out", out, "--executor", "serialtest", "--family", "holmtest"], site, tmp_path)
    assert made.returncode == 0, made.stderr
    runs = sorted(out.glob("lenet-synthetic/*-seed0"))
    assert [r.name for r in runs] == ["fine-seed0", "regular-seed0"]
    assert all(summary_of(r)["status"] == "complete" for r in runs)
    assert '"family": "holmtest"' in (out / "plan.json").read_text()
    report = _cli(["report", out, "--out", tmp_path / "report", "--no-plots"], site, tmp_path)
    assert report.returncode == 0, report.stderr
    assert "Holm (a test's module)" in (tmp_path / "report" / "index.md").read_text()


def test_forwarding_ends_without_a_stop_of_its_own_after_runs_that_ended_normally():
    """Issue 58: `end` after a run had ended normally noted a SIGTERM as if the user had sent
    one, so the executor's `requested` said stopped and the run was lost to it. Now a run that
    ended is asked nothing and nothing is noted; one still in flight is asked to stop."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    with local.Forwarding() as stop:
        stop.end([done])
    assert stop.received == [] and stop.requested is None
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with local.Forwarding() as stop:
        stop.end([done, running])
    assert running.returncode == -signal.SIGTERM and stop.requested is None

"""The reliability script (experiments/reliability/hostile.py): 700-odd hostile inputs through the
CLI, each in its own process, each refused with exit 2 and one line before anything is written,
or (crafted image folders, report over damaged records) done and checked; none may end in a
traceback, a hang, a silent wrong result, code executed or a torn record."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "reliability" / "hostile.py"


def _hostile(*args, forked=None):
    """The script with `args`: forked from the tests' fork server (conftest's `forked`: torch and
    the CLI imported once per worker), or a new interpreter (`--exec`'s check of the shortcut)."""
    if forked is not None:
        return forked.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=900)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=900)


class _Group:
    """One group of the script's cases. A class each, so that `make test`'s pytest-xdist
    (--dist loadscope: a class or a module to one worker) runs the groups side by side."""

    group = ""

    @pytest.mark.slow  # a group's inputs, each in a forked process: a minute
    def test_every_hostile_input_is_refused_in_one_line_and_writes_nothing(self, forked):
        done = _hostile("--group", self.group, forked=forked)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        last = done.stdout.strip().splitlines()[-1]
        handled, total = last.split(" hostile inputs")[0].split(" of ")
        assert handled == total and int(total) == len(_harness()[0].GROUPS[self.group]), done.stdout
        assert "0 tracebacks, 0 hangs, 0 silent wrong results, 0 code executed, 0 torn records" in last, last


class TestFlags(_Group):
    group = "flags"


class TestFiles(_Group):
    group = "files"


class TestLaunch(_Group):
    group = "launch"


class TestRound4(_Group):
    group = "round4"


class TestRound5Jobs(_Group):
    group = "round5jobs"


class TestRound5Slurm(_Group):
    group = "round5slurm"


class TestScript(_Group):
    group = "script"


class TestRound6(_Group):
    group = "round6"


class TestRound7(_Group):
    group = "round7"


def test_the_groups_hold_every_case_once():
    """The groups the classes above run apart are the whole suite of 700-odd inputs (issue 49:
    at least 700), no case left out of a group or named twice."""
    hostile = _harness()[0]
    assert sorted(hostile.GROUPS) == sorted(c.group for c in _Group.__subclasses__())
    names = [c.name for cases in hostile.GROUPS.values() for c in cases]
    assert len(names) == len(set(names)) == len(hostile.ALL_CASES) >= 700


def test_every_refusal_names_the_words_its_cause_must_show():
    """A refusal that names no expected words passes on any one-line error, whatever its cause
    (issue 57: 148 did; one, compare-out-a-file, was refused for another flag than the one it tests)."""
    silent = [c.name for c in _harness()[0].ALL_CASES if c.expect == "refused" and not c.words]
    assert silent == []


@pytest.mark.slow  # the script's inputs, each in a subprocess: minutes
def test_exec_gives_what_the_fork_shortcut_gives():
    """The suite forks the CLI for speed; the same cases through `python -m fineprune_cli`."""
    done = _hostile("--exec", "-k", "resume-edited-subset")
    assert done.returncode == 0 and "1 of 1 hostile inputs handled" in done.stdout, done.stdout + done.stderr


def _harness():
    """The script's module (and its cases module), imported from its folder."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import cases
        import hostile
    finally:
        sys.path.pop(0)
    return hostile, cases


def test_the_harness_catches_what_it_is_for(tmp_path):
    """A traceback, a second line, a written file, a wrong exit: each is reported as a failure."""
    Outcome, Case = _harness()[0].Outcome, _harness()[1].Case
    case = Case("x", ["train"], words=["bad"])
    good = Outcome(case, 2, "error: bad input\n", "", 0.1, 100.0, [])
    assert good.problems() == []
    broken = [
        Outcome(case, 1, "error: bad input\n", "", 0.1, 100.0, []),
        Outcome(case, 2, "Traceback (most recent call last):\nerror: bad\n", "", 0.1, 100.0, []),
        Outcome(case, 2, "error: bad\nmore\n", "", 0.1, 100.0, []),
        Outcome(case, 2, "error: other\n", "", 0.1, 100.0, []),
        Outcome(case, 2, "error: bad\n", "", 0.1, 100.0, ["work/run/config.yaml"]),
        Outcome(case, 2, "error: bad\n", "", 0.1, 5000.0, []),
    ]
    assert all(o.problems() for o in broken)
    classes = [
        (Outcome(case, 1, "Traceback (most recent call last):\n", "", 0.1, 1.0, []), "traceback"),
        (Outcome(case, -11, "", "", 0.1, 1.0, []), "traceback"),
        (Outcome(case, None, "", "", 30.0, 1.0, []), "hang"),
        (Outcome(case, 0, "", "", 0.1, 1.0, []), "silent wrong result"),
        (
            Outcome(Case("d", ["x"], expect="done"), 0, "", "", 0.1, 1.0, [], wrong="pixels differ"),
            "silent wrong result",
        ),
        (Outcome(case, 2, "error: bad\n", "", 0.1, 1.0, ["w/PWNED"], pwned=True), "code executed"),
        (
            Outcome(case, 2, "error: bad\n", "", 0.1, 1.0, ["w/run/summary.json"], torn=["w/run/summary.json"]),
            "torn record",
        ),
    ]
    for outcome, kind in classes:
        assert kind in outcome.classes() and outcome.problems(), kind
    assert Outcome(Case("d", ["x"], expect="done"), 0, "", "", 0.1, 1.0, []).problems() == []


def test_torn_records_are_found(tmp_path):
    torn_records = _harness()[0].torn_records
    (tmp_path / "summary.json").write_text('{"status": "compl')
    (tmp_path / "config.yaml").write_text("model: {name: lenet}\n")
    (tmp_path / ".metrics.csv.abc.tmp").write_text("epoch\n")
    found = torn_records([str(p) for p in tmp_path.iterdir()])
    assert sorted(map(lambda p: p.split("/")[-1], found)) == [".metrics.csv.abc.tmp", "summary.json"]

"""The reliability script (experiments/reliability/hostile.py): 160-odd hostile inputs through the
CLI, each in its own process, each refused with exit 2 and one line before anything is written."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "reliability" / "hostile.py"


def _hostile(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=900)


def test_every_hostile_input_is_refused_in_one_line_and_writes_nothing():
    done = _hostile()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    handled, total = done.stdout.strip().splitlines()[-1].split(" hostile inputs")[0].split(" of ")
    assert handled == total and int(total) >= 100, done.stdout


def test_exec_gives_what_the_fork_shortcut_gives():
    """The suite forks the CLI for speed; the same cases through `python -m fineprune_cli`."""
    done = _hostile("--exec", "-k", "resume-edited-subset")
    assert done.returncode == 0 and "1 of 1 hostile inputs handled" in done.stdout, done.stdout + done.stderr


def test_the_harness_catches_what_it_is_for(tmp_path):
    """A traceback, a second line, a written file, a wrong exit: each is reported as a failure."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from hostile import Outcome
        from cases import Case
    finally:
        sys.path.pop(0)
    case = Case("x", ["train"], words=["bad"])
    good = Outcome(case, 2, "error: bad input\n", "", 0.1, 100.0, [])
    assert good.problems() == []
    broken = [Outcome(case, 1, "error: bad input\n", "", 0.1, 100.0, []),
              Outcome(case, 2, "Traceback (most recent call last):\nerror: bad\n", "", 0.1, 100.0, []),
              Outcome(case, 2, "error: bad\nmore\n", "", 0.1, 100.0, []),
              Outcome(case, 2, "error: other\n", "", 0.1, 100.0, []),
              Outcome(case, 2, "error: bad\n", "", 0.1, 100.0, ["work/run/config.yaml"]),
              Outcome(case, 2, "error: bad\n", "", 0.1, 5000.0, [])]
    assert all(o.problems() for o in broken)

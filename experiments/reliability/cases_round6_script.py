"""Hostile cases of issue 49 (round 6), a `compare --script` run's records and failures:

- impossible figures a script logs (NaN lr, negative or NaN seconds, -3 or 1e30 samples, an
  accuracy that is no whole number of its test images) fail the run when they are logged, with one
  line naming the field and its value; a NaN or infinite loss is a run that diverged, recorded as
  such (as the built-in trainer does), and a report says per row which runs it left out and why;
- two records of one seed from two machines: different results are refused naming both
  folders, identical ones kept once with a word;
- one cause, one failure: a command that cannot run is refused before anything is written; a
  script's last words are bounded and its own attempt's; sizes are written in their unit; a
  `python -m module` run is filed under the module's name.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable

from cases import Case
from cases_round5_script import DRAW, FULL, HEAD, START, compare, runs_complete, scripted
from forked import fineprune

# one epoch's record, its figures spelled in the case
ONE = START + "for e in range(run.epochs):\n    run.log({})\nrun.finish()\n"
GOOD = "train_loss=1.0 / (e + 1), test_accuracy=50.0 + e"


def logs(name: str, fields: str, *words: str) -> Case:
    """A script logging `fields` beside a good loss and accuracy: its run fails, one line naming them."""
    return Case(
        f"r6-script-logs-{name}",
        setup=scripted(ONE.format(f"{GOOD}, {fields}")),
        expect="failed",
        words=words,
        check=_no_run_complete,
    )


def _no_run_complete(work: Path) -> str | None:
    path = work / "cmp" / "s-data" / "regular-seed0" / "summary.json"
    if not path.exists():  # refused at its first epoch, before any record
        return None
    summary = json.loads(path.read_text())
    return None if summary["status"] != "complete" else "a run that logged an impossible figure is complete"


def _status(run: str, status: str, epoch: int | None = None) -> Callable[[Path], str | None]:
    def check(work: Path) -> str | None:
        summary = json.loads((work / "cmp" / "s-data" / run / "summary.json").read_text())
        found = (summary["status"], summary.get("diverged_epoch"))
        return None if found == (status, epoch) else f"{run} recorded {found}, not {(status, epoch)}"

    return check


def diverges(name: str, fields: str, epoch: int = 1) -> Case:
    """A loss no longer finite is a run that diverged: recorded as diverged, compare goes on."""
    body = START + "for e in range(run.epochs):\n    run.log(" + fields + ")\nrun.finish()\n"
    return Case(f"r6-script-diverges-{name}", setup=scripted(body), expect="done", check=_status("regular-seed0",
                "diverged", epoch))  # fmt: skip


FINE_NAN = (
    START
    + "import torch\nsampler = run.sampler()\nfor e in range(run.epochs):\n"
    + DRAW
    + "    nan = os.environ['P'] != 'regular'\n"
    "    run.log(train_loss=float('nan') if nan else 1.0 / (e + 1 + seed), test_accuracy=50.0 + e + seed)\n"
    "run.finish()\n"
)


def _fine_diverged(work: Path, outside: Path, templates: dict) -> list[str]:
    """Regular and fine over seeds 0, 1; every fine-pruning run's loss NaN: then report them."""
    (work / "s.py").write_text(HEAD + FINE_NAN)
    command = f"env P={{policy}} {shlex.quote(sys.executable)} s.py {{seed}} {{epochs}}"
    argv = compare("s.py", "--window", "2", "--start", "1", seeds="0,1", policies="regular,fine")
    argv[argv.index("--script") + 1] = command
    fineprune(argv, work, timeout=90)
    return ["report", "cmp", "--out", "rep", "--no-plots"]


def _says_diverged(work: Path) -> str | None:
    index = (work / "rep" / "index.md").read_text()
    rows = [ln for ln in index.splitlines() if ln.startswith("| fine-pruning")]
    if not rows or "diverged" not in rows[0]:
        return f"fine-pruning's row does not say its runs diverged: {rows}"
    return None


RECORD_CASES = [
    logs("nan-lr", "lr=float('nan')", "lr", "nan"),
    logs("inf-lr", "lr=float('inf')", "lr", "inf"),
    logs("negative-lr", "lr=-0.1", "lr", "-0.1"),
    logs("negative-seconds", "train_seconds=-1.0", "train_seconds", "-1.0"),
    logs("nan-seconds", "train_seconds=float('nan')", "train_seconds", "nan"),
    logs("inf-seconds", "train_seconds=float('inf')", "train_seconds", "inf"),
    logs("huge-seconds", "train_seconds=1e30", "train_seconds", "1e+30"),
    logs("negative-samples", "samples=-3", "samples", "-3"),
    logs("huge-samples", "samples=10**30", "samples", str(10**30)),
    logs("float-samples", "samples=2.5", "samples", "2.5"),
    logs("too-many-samples", "samples=9", "samples", "9", "8"),
    logs("negative-test-loss", "test_loss=-1.0", "test_loss", "-1.0"),
    Case(
        "r6-script-logs-negative-train-loss",
        setup=scripted(ONE.format("train_loss=-2.0, test_accuracy=50.0")),
        expect="failed",
        words=("train_loss", "-2.0"),
        check=_no_run_complete,
    ),  # fmt: skip
    Case(
        "r6-script-logs-nan-accuracy",
        setup=scripted(ONE.format("train_loss=1.0, test_accuracy=float('nan')")),
        expect="failed",
        words=("test_accuracy", "nan"),
        check=_no_run_complete,
    ),  # fmt: skip
    Case(
        "r6-script-logs-accuracy-off-7-images",
        setup=scripted(
            ONE.format("train_loss=1.0, test_accuracy=50.0").replace("epochs=epochs", "epochs=epochs, num_test=7")
        ),
        expect="failed",
        words=("test_accuracy", "50.0", "7 test images"),
        check=_no_run_complete,
    ),
    Case(
        "r6-script-logs-accuracy-on-7-images",
        setup=scripted(
            ONE.format("train_loss=1.0, test_accuracy=100 * 3 / 7").replace(
                "epochs=epochs", "epochs=epochs, num_test=7"
            )
        ),
        expect="done",
        check=runs_complete("regular-seed0"),
    ),  # fmt: skip
    diverges("nan-train-loss", "train_loss=float('nan'), test_accuracy=50.0"),
    diverges("inf-train-loss", "train_loss=float('inf'), test_accuracy=50.0"),
    diverges("inf-test-loss", "train_loss=1.0, test_loss=float('inf'), test_accuracy=50.0"),
    diverges("huge-train-loss", "train_loss=1e30, test_accuracy=50.0"),
    diverges("nan-at-epoch-2", "train_loss=1.0 if e == 0 else float('nan'), test_accuracy=50.0", epoch=2),
    Case(
        "r6-script-nan-test-loss-not-measured",
        setup=scripted(ONE.format(f"{GOOD}, test_loss=float('nan')")),
        expect="done",
        check=runs_complete("regular-seed0"),
    ),  # fmt: skip
    Case("r6-script-every-fine-run-diverged", setup=_fine_diverged, expect="done", check=_says_diverged),
]


# -- 7. runs of one seed from two machines -----------------------------------------------------------------

MACHINE = FULL.replace("test_accuracy=50.0 + e", "test_accuracy=50.0 + e + float(os.environ.get('BUMP', '0'))")


def _two_machines(bump: str):
    """Regular seed 0 made twice, in m1 and m2 (`bump` added to m2's accuracies), reported together."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        (work / "s.py").write_text(HEAD + MACHINE)
        for out, extra in (("m1", "0"), ("m2", bump)):
            argv = compare("s.py", "--out", out)
            env = {**os.environ, "BUMP": extra}
            fineprune(argv, work, env, timeout=60)
        return ["report", "m1", "m2", "--out", "rep", "--no-plots"]

    return setup


def _kept_once(work: Path) -> str | None:
    index = (work / "rep" / "index.md").read_text()
    return None if "identical" in index else "the report does not say it kept one of two identical records"


MACHINE_CASES = [
    Case("r6-report-one-seed-two-machines", setup=_two_machines("1"), words=("m1/", "m2/", "seed 0")),
    Case("r6-report-one-seed-two-machines-identical", setup=_two_machines("0"), expect="done", check=_kept_once),
]


# -- 8. one cause, many failures -------------------------------------------------------------------------


def _command(command: str, *files: tuple[str, str, int]):
    """A compare of `command`, the files it names written first (name, text, mode)."""

    def setup(work: Path, outside: Path, templates: dict) -> list[str]:
        for name, text, mode in files:
            (work / name).write_text(text)
            (work / name).chmod(mode)
        argv = compare("s.py", seeds="0,1", policies="regular,fine")
        argv[argv.index("--script") + 1] = command.replace("PY", shlex.quote(sys.executable))
        return [*argv, "--window", "2", "--start", "1"]

    return setup


def _bounded(limit: int) -> Callable[[str], str | None]:
    return lambda stderr: None if len(stderr) < limit else f"stderr is {len(stderr)} characters"


def _absent(*words: str) -> Callable[[str], str | None]:
    return lambda stderr: next((f"stderr says {w!r}: {stderr[-300:]!r}" for w in words if w in stderr), None)


SECOND = (
    "if os.path.exists('tried'):\n    raise MemoryError\n"
    "open('tried', 'w').close(); print('error: the first attempt ran out of disk'); sys.exit(1)\n"
)


def _second_attempt(work: Path, outside: Path, templates: dict) -> list[str]:
    (work / "s.py").write_text(HEAD + SECOND)
    argv = compare("s.py")
    fineprune(argv, work, timeout=60)
    return argv


def _big_plan(work: Path, outside: Path, templates: dict) -> list[str]:
    shutil.copytree(templates["run"], work / "cmp" / "regular")
    (work / "cmp" / "plan.json").write_text(" " * 70_000 + "{}")
    return ["report", "cmp", "--out", "rep", "--no-plots"]


def _plan_alpha(work: Path, outside: Path, templates: dict) -> list[str]:
    """A plan.json whose alpha is out of range, under a compare given no --alpha: the plan is named."""
    (work / "s.py").write_text(HEAD + FULL)
    (work / "cmp").mkdir()
    plan = {"judging": {"margin": 0.3, "min_gain": 0.3, "alpha": 0.9, "family": "bonferroni"}, "looks": []}
    (work / "cmp" / "plan.json").write_text(json.dumps(plan))
    return compare("s.py")


def _module(work: Path, outside: Path, templates: dict) -> list[str]:
    """`python -m mytrain {seed} {epochs}`: its runs are filed under mytrain, not a placeholder."""
    (work / "mytrain.py").write_text(HEAD + FULL)
    argv = compare("s.py")
    argv[argv.index("--script") + 1] = f"{shlex.quote(sys.executable)} -m mytrain {{seed}} {{epochs}}"
    return argv


def _module_named(work: Path) -> str | None:
    names = sorted(p.name for p in (work / "cmp").iterdir() if p.name not in (".jobs", "plan.json"))
    return None if names == ["mytrain-data"] else f"runs in {names}"


ONE_CAUSE_CASES = [
    Case("r6-script-no-such-program", setup=_command("nosuchprogram {epochs}"), words=("nosuchprogram",)),
    Case("r6-script-no-such-program-path", setup=_command("./bin/train {seed}"), words=("./bin/train",)),
    Case("r6-script-no-such-python-file", setup=_command("PY nosuch.py {seed} {epochs}"), words=("nosuch.py",)),
    Case(
        "r6-script-not-executable",
        setup=_command("./s.py {seed} {epochs}", ("s.py", HEAD + FULL, 0o644)),
        words=("./s.py", "executable"),
    ),  # fmt: skip
    Case("r6-script-a-folder", setup=_command("/tmp {seed}"), words=("/tmp",)),
    Case(
        "r6-script-stderr-one-5mb-line",
        setup=scripted("sys.stderr.write('x' * 5_000_000 + 'the end\\n'); sys.exit(1)"),
        expect="failed",
        words=("the end",),
        said=_bounded(8_000),
    ),
    Case(
        "r6-script-second-attempt-memoryerror",
        setup=_second_attempt,
        expect="failed",
        words=("MemoryError",),
        said=_absent("ran out of disk"),
    ),  # fmt: skip
    Case("r6-plan-alpha-not-a-flag", setup=_plan_alpha, words=("plan.json", "alpha"), said=_absent("--alpha")),
    Case("r6-plan-too-large", setup=_big_plan, words=("plan.json", "64 KiB"), said=_absent("0 MB")),
    Case("r6-script-python-module", setup=_module, expect="done", check=_module_named),
]


ROUND6_SCRIPT_CASES = RECORD_CASES + MACHINE_CASES + ONE_CAUSE_CASES

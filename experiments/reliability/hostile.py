"""Hostile input through the real CLI: every case must end with exit 2, one line on stderr
starting with 'error:', no traceback, and nothing written anywhere (the case's folder, a sibling
folder that symlinks point to, and the working folder are compared before and after). A few
cases (crafted image folders a careless tool gets silently wrong, report on damaged records)
must instead succeed, and their check finds nothing wrong with what they made.

Every failure falls in one of the classes counted at the end: traceback (or death by a
signal), hang (over TIME_LIMIT_S), silent wrong result (accepted what it should refuse, or a
check failed), code executed (a planted payload ran: it creates a file named PWNED), torn
record (a record left half-written or unparseable), or other (a second line, a file written).

Each case runs in its own process. Starting Python and torch takes ~3 s, which for 100+ cases
would dominate the test suite, so the parent imports the CLI once and forks a child per case; the
child calls the same entry point as the `fineprune` script (`fineprune_cli.cli:main`) with the
case's argv, in its own working folder. `--exec` runs every case through `python -m fineprune_cli`
instead, to check that the fork shortcut changes nothing.

    python experiments/reliability/hostile.py            # all cases, a table of failures
    python experiments/reliability/hostile.py --exec     # the same through exec'd subprocesses
    python experiments/reliability/hostile.py --group files --times   # one group; the costliest cases
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, Case, make_folder, make_run  # noqa: E402
from cases_files import FILE_CASES, make_folder_run, make_pruned  # noqa: E402
from cases_launch import HELD, LAUNCH_CASES  # noqa: E402
from cases_round4 import ROUND4_CASES  # noqa: E402
from cases_round5_jobs import ROUND5_JOBS_CASES  # noqa: E402
from cases_round5_script import SCRIPT_CASES  # noqa: E402
from cases_round5_slurm import ROUND5_SLURM_CASES  # noqa: E402
from cases_round6 import ROUND6_CASES, make_compared  # noqa: E402
from cases_round6_script import ROUND6_SCRIPT_CASES  # noqa: E402
from cases_round7 import ROUND7_CASES  # noqa: E402

# groups run apart (tests/test_hostile.py runs one per test, so they spread over pytest workers)
GROUPS = {"flags": CASES, "files": FILE_CASES, "launch": LAUNCH_CASES, "round4": ROUND4_CASES}
GROUPS["round5jobs"] = ROUND5_JOBS_CASES
GROUPS["round5slurm"] = ROUND5_SLURM_CASES
GROUPS["script"] = SCRIPT_CASES
GROUPS["round6"] = ROUND6_CASES + ROUND6_SCRIPT_CASES
GROUPS["round7"] = ROUND7_CASES
ALL_CASES = [c for cases in GROUPS.values() for c in cases]
# what cases copy, each made the first time a case asks for it
TEMPLATES = {"run": make_run, "folder": make_folder, "pruned": make_pruned, "folder-run": make_folder_run}
TEMPLATES["compared"] = make_compared

TIME_LIMIT_S = 30
MEMORY_LIMIT_MB = 3000  # peak RSS of one case; a 921 GB allocation attempt must never start


CLASSES = ("traceback", "hang", "silent wrong result", "code executed", "torn record")


@dataclass
class Outcome:
    case: Case
    code: int | None
    stderr: str
    stdout: str
    seconds: float
    peak_mb: float
    changed: list[str]
    pwned: bool = False  # a payload ran
    torn: list[str] = field(default_factory=list)  # records that do not parse
    wrong: str | None = None  # a "done" case's check
    cpu: float = 0.0  # CPU seconds of the case's process (wall time varies with load)

    def classes(self) -> set[str]:
        found = set()
        if "Traceback" in self.stderr + self.stdout or (self.code is not None and not 0 <= self.code < 128):
            found.add("traceback")
        if self.code is None:
            found.add("hang")
        if self.wrong or (self.case.expect in ("refused", "failed") and self.code == 0):
            found.add("silent wrong result")
        if self.pwned:
            found.add("code executed")
        if self.torn:
            found.add("torn record")
        return found

    def problems(self) -> list[str]:
        found = sorted(self.classes())
        if self.case.expect == "done":
            return (
                found
                + ([f"exit {self.code}: {self.stderr.strip()[-300:]!r}"] if self.code != 0 else [])
                + ([self.wrong] if self.wrong else [])
            )
        if self.case.expect == "failed":  # a run of the matrix failed: its own error line, the rest kept
            errors = [ln for ln in self.stderr.splitlines() if ln.startswith("error: ")]
            said = all(any(w in ln for ln in errors) for w in self.case.words)
            return (
                found
                + ([f"exit {self.code}"] if self.code != 1 else [])
                + ([] if said else [f"no error line with {self.case.words}: {self.stderr.strip()[-300:]!r}"])
                + ([self.wrong] if self.wrong else [])
            )
        if self.code != 2:
            found.append(f"exit {self.code}")
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("error: "):
            found.append(f"stderr is {len(lines)} lines: {self.stderr[-300:]!r}")
        if self.case.words and not all(w in self.stderr for w in self.case.words):
            found.append(f"message lacks {self.case.words}: {self.stderr.strip()[:200]!r}")
        if self.changed:
            found.append(f"files changed: {self.changed[:4]}")
        if self.peak_mb > MEMORY_LIMIT_MB:
            found.append(f"peak memory {self.peak_mb:.0f} MB")
        if self.torn:
            found.append(f"torn: {self.torn[:3]}")
        return found


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under the roots with its type, size and modification time (links not followed).
    A folder counts by its existence only, and the `.lock` a writer takes (held with flock, naming
    its last holder's pid, harmless when left) not at all: a failed start must leave every other
    file as it found it."""
    seen = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath, name)
                st = p.lstat()
                if name == ".lock" and stat.S_ISREG(st.st_mode):
                    continue
                seen[str(p)] = (st.st_mode,) if stat.S_ISDIR(st.st_mode) else (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def _diff(before: dict, after: dict) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def torn_records(paths: list[str]) -> list[str]:
    """Of these changed paths, the records that a reader could not parse, and orphaned
    temporary files of an atomic write."""
    import csv
    import json

    import yaml

    torn = []
    for p in map(Path, paths):
        if not p.is_file() or p.is_symlink():
            continue
        try:
            if p.name.endswith(".tmp"):
                torn.append(str(p))
            elif p.name == "summary.json":
                json.loads(p.read_text())
            elif p.suffix == ".yaml":
                yaml.safe_load(p.read_text())
            elif p.suffix == ".csv":
                list(csv.reader(p.read_text().splitlines()))
        except (ValueError, yaml.YAMLError, csv.Error):
            torn.append(str(p))
    return torn


def _limits(case: Case) -> None:
    """The case's environment and memory limit, in the process that runs it."""
    for key, value in case.env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if case.memory_mb:
        with open("/proc/self/status") as f:
            mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        limit = mapped + case.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _in_child(case: Case, argv: list[str], work: Path, out_file: Path, err_file: Path) -> None:
    """The forked child: the installed entry point with the case's argv; never returns."""
    code = 1
    try:
        _limits(case)
        os.chdir(work)
        for fd, path in ((1, out_file), (2, err_file)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.argv = ["fineprune", *argv]
        from fineprune_cli.cli import main

        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - an escaped exception is exactly what we test for
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int) -> tuple[int | None, float, float]:
    """Exit code (None: killed at the time limit), peak memory in MB and CPU seconds."""
    deadline = time.monotonic() + TIME_LIMIT_S
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            return None, 0.0, 0.0
        time.sleep(0.005)


def _exec(
    case: Case,
    argv: list[str],
    work: Path,
    out_file: Path,
    err_file: Path,
) -> tuple[int | None, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_file, "w") as out, open(err_file, "w") as err:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "fineprune_cli", *argv],
                cwd=work,
                stdout=out,
                stderr=err,
                timeout=TIME_LIMIT_S,
                preexec_fn=lambda: _limits(case),
            )
        except subprocess.TimeoutExpired:
            return None, 0.0, 0.0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return proc.returncode, after.ru_maxrss / 1024, cpu


def run_case(case: Case, base: Path, templates: dict[str, Path], use_exec: bool = False) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix=case.name[:40].replace("/", "_") + "-", dir=base))
    work, outside, logs = root / "work", root / "outside", root.parent / (root.name + "-logs")
    for d in (work, outside, logs):
        d.mkdir()
    argv = case.setup(work, outside, templates) if case.setup else list(case.argv)
    before = snapshot(root)
    out_file, err_file = logs / "stdout", logs / "stderr"
    start = time.monotonic()
    if use_exec:
        code, peak, cpu = _exec(case, argv, work, out_file, err_file)
    else:
        pid = os.fork()
        if pid == 0:
            _in_child(case, argv, work, out_file, err_file)
        code, peak, cpu = _wait(pid)
    seconds = time.monotonic() - start
    while HELD:  # locks a case's setup took, as another writer would
        os.close(HELD.pop())
    changed = _diff(before, snapshot(root))
    wrong = None
    if case.check is not None and code == (1 if case.expect == "failed" else 0):
        try:
            wrong = case.check(work)
        except Exception as exc:  # noqa: BLE001 - a check that cannot read the result: wrong
            wrong = f"check failed: {type(exc).__name__}: {exc}"[:300]
    if case.said is not None:  # what it printed, whatever its exit: bounded, its own attempt's...
        wrong = wrong or case.said(err_file.read_text(errors="replace"))
    return Outcome(
        case,
        code,
        err_file.read_text(errors="replace"),
        out_file.read_text(errors="replace"),
        seconds,
        peak,
        [] if case.expect in ("done", "failed") else changed,
        any(Path(p).name == "PWNED" for p in changed),
        torn_records(changed),
        wrong,
        cpu,
    )


def train_in_fork(argv: list[str], cwd: Path, command: str = "train") -> None:
    """`fineprune train ARGV` (or another command) in a forked child working in `cwd` (a
    template: no new interpreter, no second import of torch); raises with its last lines if it fails."""
    log = cwd / "train.log"
    pid = os.fork()
    if pid == 0:
        _in_child(Case("template", []), [command, *argv], cwd, Path(os.devnull), log)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"template failed: fineprune {command} {' '.join(argv)}\n{log.read_text()[-2000:]}")
    log.unlink()


class Templates(dict):
    """TEMPLATES made on first use under `base`, so a group of cases pays only for its own."""

    def __init__(self, base: Path):
        super().__init__()
        self.base = base

    def __missing__(self, name: str) -> Path:
        self.base.mkdir(parents=True, exist_ok=True)
        self[name] = TEMPLATES[name](self.base, train_in_fork)
        return self[name]


def run_all(
    base: Path, use_exec: bool = False, only: Callable[[Case], bool] = lambda c: True, cases: list[Case] = ALL_CASES
) -> list[Outcome]:
    # the children inherit the parent's modules: import what the commands import lazily before
    # forking (each child would otherwise import torch again, and typer's parser and the
    # policies half the cost of a refused case), but train nothing here
    import importlib

    for module in (
        "fineprune_cli.cli",
        "fineprune_cli.runner",
        "fineprune_cli.drivers.compare",
        "fineprune_cli.drivers.scale",
        "fineprune_cli.analysis.render.report",
        "fineprune_cli.analysis.read.runs",
        "fineprune_cli.distributed.launch",
        "fineprune_cli.distributed.paramserver",
        "typer._adapters",
    ):
        importlib.import_module(module)
    import torch
    import torch._dynamo  # noqa: F401 - the optimizer imports it on first use (2.5 s)

    from fineprune_cli.engine.inputs.data import make_synthetic
    from fineprune_cli.pruning import list_policies

    list_policies()  # imports every policy module
    try:  # `report` cases draw plots (the plot extra may be absent: those cases then say so)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except ImportError:
        pass
    torch.set_num_threads(1)  # no OpenMP pool exists in the parent when it forks
    make_synthetic()  # cached per process: the children inherit the 60,000 images
    templates = Templates(base / "templates")
    return [run_case(c, base, templates, use_exec) for c in cases if only(c)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exec", action="store_true", help="exec each case instead of forking")
    parser.add_argument("--times", action="store_true", help="list the slowest cases")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--group", choices=list(GROUPS), help="only this group's cases")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fineprune-hostile-") as tmp:
        outcomes = run_all(
            Path(tmp), args.exec, lambda c: args.k in c.name, GROUPS[args.group] if args.group else ALL_CASES
        )
    failed = [(o, o.problems()) for o in outcomes if o.problems()]
    for o, problems in failed:
        print(f"FAIL {o.case.name}: {'; '.join(problems)}")
    if args.times:
        for o in sorted(outcomes, key=lambda o: -o.cpu)[:15]:
            print(f"{o.cpu:6.2f} s CPU {o.seconds:6.2f} s  {o.case.name}")
        print(f"cases: {sum(o.cpu for o in outcomes):.1f} s CPU, {sum(o.seconds for o in outcomes):.1f} s")
    slowest = max(outcomes, key=lambda o: o.seconds)
    counts = {c: sum(c in o.classes() for o in outcomes) for c in CLASSES}
    print(
        f"{len(outcomes) - len(failed)} of {len(outcomes)} hostile inputs handled "
        f"({sum(o.case.expect == 'refused' for o in outcomes)} refused in one line with nothing written, "
        f"{sum(o.case.expect == 'done' for o in outcomes)} done and checked"
        + (
            f", {n} with a failed run named and the rest kept"
            if (n := sum(o.case.expect == "failed" for o in outcomes))
            else ""
        )
        + "): "
        + ", ".join(f"{n} {c}{'s' if n != 1 and c != 'code executed' else ''}" for c, n in counts.items())
        + f"; slowest {slowest.case.name} {slowest.seconds:.1f} s, "
        f"peak memory {max(o.peak_mb for o in outcomes):.0f} MB"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

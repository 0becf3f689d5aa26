"""Hostile input through the real CLI: every case must end with exit 2, one line on stderr
starting with 'error:', no traceback, and nothing written anywhere (the case's folder, a sibling
folder that symlinks point to, and the working folder are compared before and after).

Each case runs in its own process. Starting Python and torch takes ~3 s, which for 100+ cases
would dominate the test suite, so the parent imports the CLI once and forks a child per case; the
child calls the same entry point as the `fineprune` script (`fineprune_cli.cli:main`) with the
case's argv, in its own working folder. `--exec` runs every case through `python -m fineprune_cli`
instead, to check that the fork shortcut changes nothing.

    python experiments/reliability/hostile.py            # all cases, a table of failures
    python experiments/reliability/hostile.py --exec     # the same through exec'd subprocesses
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, Case, make_templates  # noqa: E402

TIME_LIMIT_S = 30
MEMORY_LIMIT_MB = 3000   # peak RSS of one case; a 921 GB allocation attempt must never start


@dataclass
class Outcome:
    case: Case
    code: int | None
    stderr: str
    stdout: str
    seconds: float
    peak_mb: float
    changed: list[str]

    def problems(self) -> list[str]:
        found = []
        if self.code != 2:
            found.append(f"exit {self.code}")
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("error: "):
            found.append(f"stderr is {len(lines)} lines: {self.stderr[-300:]!r}")
        if "Traceback" in self.stderr + self.stdout:
            found.append("traceback")
        if self.case.words and not all(w in self.stderr for w in self.case.words):
            found.append(f"message lacks {self.case.words}: {self.stderr.strip()[:200]!r}")
        if self.changed:
            found.append(f"files changed: {self.changed[:4]}")
        if self.peak_mb > MEMORY_LIMIT_MB:
            found.append(f"peak memory {self.peak_mb:.0f} MB")
        return found


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under the roots with its type, size and modification time (links not followed).
    A folder counts by its existence only, and so does the empty `.lock` a writer takes (held
    with flock and harmless when left): a failed start must leave every file as it found it."""
    seen = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath, name)
                st = p.lstat()
                if name == ".lock" and st.st_size == 0:
                    continue
                seen[str(p)] = (st.st_mode,) if stat.S_ISDIR(st.st_mode) else (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def _diff(before: dict, after: dict) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _in_child(argv: list[str], work: Path, out_file: Path, err_file: Path) -> None:
    """The forked child: the installed entry point with the case's argv; never returns."""
    code = 1
    try:
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


def _wait(pid: int) -> tuple[int | None, float]:
    deadline = time.monotonic() + TIME_LIMIT_S
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code, usage.ru_maxrss / 1024
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            return None, 0.0
        time.sleep(0.005)


def _exec(argv: list[str], work: Path, out_file: Path, err_file: Path) -> tuple[int | None, float]:
    with open(out_file, "w") as out, open(err_file, "w") as err:
        try:
            proc = subprocess.run([sys.executable, "-m", "fineprune_cli", *argv], cwd=work, stdout=out,
                                  stderr=err, timeout=TIME_LIMIT_S)
        except subprocess.TimeoutExpired:
            return None, 0.0
    return proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


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
        code, peak = _exec(argv, work, out_file, err_file)
    else:
        pid = os.fork()
        if pid == 0:
            _in_child(argv, work, out_file, err_file)
        code, peak = _wait(pid)
    seconds = time.monotonic() - start
    return Outcome(case, code, err_file.read_text(errors="replace"), out_file.read_text(errors="replace"),
                   seconds, peak, _diff(before, snapshot(root)))


def run_all(base: Path, use_exec: bool = False, only: Callable[[Case], bool] = lambda c: True,
            ) -> list[Outcome]:
    # the children inherit the parent's modules: import what the commands import lazily before
    # forking (each child would otherwise import torch again), but train nothing here
    import importlib
    for module in ("cli", "engine.session", "drivers.compare", "drivers.scale", "analysis.report",
                   "analysis.runs", "distributed.launch"):
        importlib.import_module(f"fineprune_cli.{module}")
    import torch
    import torch._dynamo  # noqa: F401 - the optimizer imports it on first use (2.5 s)
    from fineprune_cli.engine.data import make_synthetic
    torch.set_num_threads(1)  # no OpenMP pool exists in the parent when it forks
    make_synthetic()  # cached per process: the children inherit the 60,000 images
    templates = make_templates(base / "templates")
    return [run_case(c, base, templates, use_exec) for c in CASES if only(c)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exec", action="store_true", help="exec each case instead of forking")
    parser.add_argument("--times", action="store_true", help="list the slowest cases")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fineprune-hostile-") as tmp:
        outcomes = run_all(Path(tmp), args.exec, lambda c: args.k in c.name)
    failed = [(o, o.problems()) for o in outcomes if o.problems()]
    for o, problems in failed:
        print(f"FAIL {o.case.name}: {'; '.join(problems)}")
    if args.times:
        for o in sorted(outcomes, key=lambda o: -o.seconds)[:15]:
            print(f"{o.seconds:6.2f} s  {o.case.name}")
    slowest = max(outcomes, key=lambda o: o.seconds)
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} hostile inputs handled "
          f"(exit 2, one line, nothing written); slowest {slowest.case.name} {slowest.seconds:.1f} s, "
          f"peak memory {max(o.peak_mb for o in outcomes):.0f} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

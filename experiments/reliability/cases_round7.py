"""Hostile cases of issue 57 (round 7), what landed with issues 48-51 attacked again:

1. a policy that silently does nothing: a `--script` run under rs2 whose script never draws from
   `run.sampler()` fails at its first epoch, naming the sampler, where it was recorded complete
   with 0% skipped (the library's PruningSampler refusing selective-backprop: tests/test_selective.py);
2. the same run trained twice: shorter arms of one schedule are one arm (tests/test_looks.py);
3. the plan's conditions: a run whose summary.json lost its plan digest is post hoc, not a run
   made under the plan; `--policies rs2,seta` under --until-decided is refused (no regular arm, so
   no look could decide), and a plain matrix without regular says no policy can be decided;
4. runs from several machines, as `make gpu`'s calls hold them (calls/<call>/runs/, each with its
   copy of the plan) and its report reads them: two different results for one seed are refused
   naming both folders; one call's copy of the plan edited (margin 1.0 where the others say 0.3)
   is post hoc (a torn call.json and an edited experiment plan stop the step in one line:
   tests/test_gpu_script.py);
5. smaller: `report` over a folder holding no run is refused in one line; a script run copied
   under another seed's name is left out as a copy; a failure under --jobs names its run once;
   a script calling start() twice is told so (submitit's result pickle is no longer unpickled:
   tests/test_slurm.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cases import Case
from cases_round5_script import FULL, HEAD, START, compare, runs_complete, scripted
from cases_round6 import COMPARED, _compared_copy, _index_says, _report

# a compare of rs2 and seta only, on the tiny synthetic recipe of round 6's template
NO_REGULAR = [*COMPARED[: COMPARED.index("--policies")], "--policies", "rs2,seta", "--out", "cmp"]


def _rs2_not_complete(work: Path) -> str | None:
    """rs2's run is not complete; regular's, which needs no sampler, is."""
    path = work / "cmp" / "s-data" / "rs2-seed0" / "summary.json"
    if path.exists() and json.loads(path.read_text())["status"] == "complete":
        return "rs2-seed0 never drew from its sampler and is recorded complete"
    return runs_complete("regular-seed0")(work)


def _lost_digest(work: Path, outside: Path, templates: dict) -> list[str]:
    """One run of a compare whose summary.json no longer records the plan it was made under."""
    summary = _compared_copy(work, templates) / "lenet-synthetic" / "fine-seed1" / "summary.json"
    data = json.loads(summary.read_text())
    del data["plan"]
    summary.write_text(json.dumps(data))
    return _report()


def _calls(work: Path, templates: dict) -> tuple[Path, Path]:
    """Two calls of `make gpu`'s reproduce step: the template compare's runs split between them
    (call a: seeds 0, call b: seeds 1), each call's runs/ holding its copy of the plan."""
    a, b = (_compared_copy(work, templates, f"calls/{name}/runs") for name in ("a", "b"))
    for seed, runs in ((1, a), (0, b)):
        for arm in ("regular", "fine"):
            shutil.rmtree(runs / "lenet-synthetic" / f"{arm}-seed{seed}")
    return a, b


def _two_results_of_one_seed(work: Path, outside: Path, templates: dict) -> list[str]:
    """Call b trained regular seed 0 again, on another machine: its last epoch 1 image better."""
    a, b = _calls(work, templates)
    run = b / "lenet-synthetic" / "regular-seed0"
    shutil.copytree(a / "lenet-synthetic" / "regular-seed0", run)
    lines = (run / "metrics.csv").read_text().splitlines()
    head, last = lines[0].split(","), lines[-1].split(",")
    at = head.index("test_accuracy")
    last[at] = str(float(last[at]) + 100 / 32)
    (run / "metrics.csv").write_text("\n".join([*lines[:-1], ",".join(last)]) + "\n")
    accs = [float(ln.split(",")[at]) for ln in lines[1:-1]] + [float(last[at])]
    summary = json.loads((run / "summary.json").read_text())
    summary.update(final_accuracy=accs[-1], best3_accuracy=sum(sorted(accs)[-3:]) / len(accs[-3:]))
    (run / "summary.json").write_text(json.dumps(summary))
    return _report("calls")


def _one_calls_plan_edited(work: Path, outside: Path, templates: dict) -> list[str]:
    _, b = _calls(work, templates)
    plan = json.loads((b / "plan.json").read_text())
    plan["judging"]["margin"] = 1.0
    (b / "plan.json").write_text(json.dumps(plan, indent=2))
    return _report("calls")


def _named_once(stderr: str) -> str | None:
    """Each failure line names its run once (under --jobs it named it twice: compare's label, then
    the same label opening the line the run's own process said)."""
    lines = [ln for ln in stderr.splitlines() if "no data here" in ln]
    twice = [ln for ln in lines if ln.count("s on data, regular, seed 0") != 1]
    return f"a failure line names its run other than once: {twice or lines}" if twice or not lines else None


def _copied_script_run(work: Path, outside: Path, templates: dict) -> list[str]:
    """A compare --script of regular, seed 0 (its script measures no test loss), its run folder then
    copied as seed 1 with the seed edited in both records: a report must not count it as a seed."""
    import subprocess
    import sys

    (work / "s.py").write_text(HEAD + FULL)
    subprocess.run([sys.executable, "-m", "fineprune_cli", *compare("s.py")], cwd=work, capture_output=True, timeout=90)
    runs = work / "cmp" / "s-data"
    shutil.copytree(runs / "regular-seed0", runs / "regular-seed1")
    summary = json.loads((runs / "regular-seed1" / "summary.json").read_text())
    (runs / "regular-seed1" / "summary.json").write_text(json.dumps({**summary, "seed": 1}))
    config = runs / "regular-seed1" / "config.yaml"
    config.write_text(config.read_text().replace("  seed: 0\n", "  seed: 1\n"))
    return _report()


def _empty_folder(work: Path, outside: Path, templates: dict) -> list[str]:
    (work / "empty").mkdir()
    return _report("empty")


def _says(*words: str):
    return lambda stderr: None if all(w in stderr for w in words) else f"stderr lacks {words}: {stderr[-300:]!r}"


ROUND7_CASES = [
    Case(
        "r7-script-never-draws-from-its-sampler",
        setup=scripted(FULL, policies="regular,rs2"),
        expect="failed",
        words=("policy rs2", "never drew", "run.sampler()"),
        check=_rs2_not_complete,
    ),
    Case(
        "r7-plan-summary-lost-its-digest",
        setup=_lost_digest,
        expect="done",
        check=_index_says("**Post hoc.**", "lost the plan digest", absent=("these decisions keep to it",)),
    ),
    Case(
        "r7-looks-without-regular",
        ["compare", *NO_REGULAR, "--until-decided", "--looks", "2,3"],
        words=("--until-decided", "rs2,seta", "no regular arm", "add regular"),
    ),
    Case(
        "r7-dry-run-without-regular",
        ["compare", *NO_REGULAR, "--dry-run"],
        expect="done",
        said=_says("no regular arm planned (--policies rs2,seta)", "no policy can be decided"),
    ),
    Case(
        "r7-calls-two-results-of-one-seed",
        setup=_two_results_of_one_seed,
        words=("regular seed 0 is recorded twice with different results", "calls/a/runs", "calls/b/runs"),
    ),
    Case(
        "r7-calls-one-plan-copy-edited",
        setup=_one_calls_plan_edited,
        expect="done",
        check=_index_says("**Post hoc.**", "m 1 pt", absent=("these decisions keep to it",)),
    ),
    Case(
        "r7-script-starts-twice",
        setup=scripted(START + START + "run.finish()\n"),
        expect="failed",
        words=("already open for writing in this same process", "start() called twice"),
        check=lambda work: (
            None
            if not (work / "cmp" / "s-data" / "regular-seed0" / "summary.json").exists()
            or json.loads((work / "cmp" / "s-data" / "regular-seed0" / "summary.json").read_text())["status"]
            != "complete"
            else "a run whose script started twice is complete"
        ),
    ),
    Case(
        "r7-script-failure-under-jobs-names-its-run-once",
        setup=scripted("raise SystemExit('no data here')", "--jobs", "2", "--threads", "1"),
        expect="failed",
        words=("s on data, regular, seed 0: the script failed: no data here",),
        said=_named_once,
    ),
    Case(
        "r7-script-run-copied-as-another-seed",
        setup=_copied_script_run,
        expect="done",
        check=_index_says("copied under another seed's name", "not a run of seed 1"),
    ),
    Case(
        "r7-report-a-folder-holding-no-run",
        setup=_empty_folder,
        words=("no run folders in empty", "nothing to report"),
    ),
]

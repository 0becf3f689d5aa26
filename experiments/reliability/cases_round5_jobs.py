"""Hostile cases of issue 41 (items 6, 9 and 13): damaged, implausible and fabricated records
under `compare`'s reuse and under `report`, YAML merge keys valid and invalid, and hostile
`--jobs` / `--threads` values. Cheap: a compare folder of four 2-epoch runs is trained once per
group (the first case that asks for it), then every case copies and edits it.

A `compare` over a damaged folder must succeed, name the run it leaves out with the reason on
stderr, leave that folder as it was and decide on the others; `report` must list it under
"Runs left out"; a valid merge key must read as YAML says; everything else is refused in one line.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable

from cases import Case, config, with_file

MATRIX = ["--model", "lenet", "--dataset", "synthetic", "--subset", "64", "--test-subset", "32", "--epochs", "2"]
MATRIX += ["--device", "cpu", "--policies", "regular,fine", "--seeds", "0,1"]
COMPARE = ["compare", *MATRIX, "--out", "cmp"]
TEMPLATE = "round5-compare"
RUNS = "cmp/lenet-synthetic"
Edit = Callable[[Path], None]


def _cli_in_fork(argv: list[str], cwd: Path) -> None:
    """`fineprune ARGV` in a forked child working in `cwd` (the parent has imported torch)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(cwd)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            sys.argv = ["fineprune", *argv]
            from fineprune_cli.cli import main

            try:
                main()
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"template failed: fineprune {' '.join(argv)}")


def _compare_folder(templates: dict) -> Path:
    """The group's compare folder, made the first time a case asks for it."""
    if TEMPLATE not in dict.keys(templates):  # `in` alone would make the harness look it up
        base = templates.base / TEMPLATE
        base.mkdir(parents=True)
        _cli_in_fork(COMPARE, base)
        templates[TEMPLATE] = base / "cmp"
    return templates[TEMPLATE]


def _stderr(work: Path) -> str:
    """What the case printed on stderr: the harness keeps it beside the case's folder."""
    return (work.parent.parent / f"{work.parent.name}-logs" / "stderr").read_text()


# -- edits of one run folder ---------------------------------------------------------------------


def _summary(**changes) -> Edit:
    def edit(run: Path) -> None:
        data = json.loads((run / "summary.json").read_text())
        data.update(changes)
        (run / "summary.json").write_text(json.dumps(data))

    return edit


def _summary_text(field: str, text: str) -> Edit:
    """A field set to raw JSON text (10**400, NaN: numbers Python's json would not write)."""

    def edit(run: Path) -> None:
        data = json.loads((run / "summary.json").read_text())
        data[field] = "@@@"
        (run / "summary.json").write_text(json.dumps(data).replace('"@@@"', text))

    return edit


def _last_row(**changes) -> Edit:
    def edit(run: Path) -> None:
        rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
        rows[-1].update({k: str(v) for k, v in changes.items()})
        with open(run / "metrics.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    return edit


def _all(*edits: Edit) -> Edit:
    def edit(run: Path) -> None:
        for e in edits:
            e(run)

    return edit


def _copy_of(source: str) -> Edit:
    """The folder replaced by a copy of another seed's, its seed edited to this folder's."""

    def edit(run: Path) -> None:
        import yaml

        seed = json.loads((run / "summary.json").read_text())["seed"]
        shutil.rmtree(run)
        shutil.copytree(run.parent / source, run)
        _summary(seed=seed, run_dir=str(run))(run)
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        cfg["run"].update(seed=seed, out=str(run))
        (run / "config.yaml").write_text(yaml.safe_dump(cfg))

    return edit


OFF_GRID = 40.1  # of 32 test images: 12.832 images
DAMAGED = {  # name: (the folder edited, the edit, words its reason holds)
    "final-150": ("fine-seed1", _summary(final_accuracy=150), "final_accuracy 150"),
    "best3-200": ("fine-seed1", _summary(best3_accuracy=200), "best3_accuracy 200"),
    "final-off-its-metrics": ("fine-seed1", _summary(final_accuracy=3.125), "not the last epoch's"),
    "row-accuracy-150": ("regular-seed1", _last_row(test_accuracy=150), "not a test accuracy"),
    "off-grid-accuracy": (
        "fine-seed1",
        _all(_last_row(test_accuracy=OFF_GRID), _summary(final_accuracy=OFF_GRID)),
        "no whole number of the run's 32 test images",
    ),
    "num-test-huge": ("regular-seed1", _summary_text("num_test", str(10**400)), "num_test"),
    "num-test-negative": ("regular-seed1", _summary(num_test=-32), "num_test -32"),
    "num-test-a-word": ("regular-seed1", _summary(num_test="32"), "wrong type"),
    "epochs-completed-zero": ("fine-seed1", _summary(epochs_completed=0), "epochs_completed 0"),
    "train-seconds-negative": ("fine-seed1", _summary(train_seconds=-5.0), "train_seconds"),
    "samples-seen-off": ("fine-seed1", _summary(samples_seen=7), "samples_seen 7"),
    "seed-copy-regular": ("regular-seed1", _copy_of("regular-seed0"), "losses are those of seed 0"),
    "seed-copy-fine": ("fine-seed1", _copy_of("fine-seed0"), "losses are those of seed 0"),
    "loss-row-1e308": ("regular-seed1", _last_row(train_loss=1e308), "losses are out of range"),
}


def _snapshot(run: Path) -> dict[str, str]:
    return {p.name: p.read_bytes().hex() for p in run.iterdir() if p.is_file() and p.name != ".lock"}


def _compare_case(name: str, folder: str, edit: Edit, words: str, extra: tuple[str, ...] = ()) -> Case:
    """compare over the template folder with one run edited: it names that run with the reason,
    counts 3 of 4 runs finished, and leaves the folder as the setup made it."""

    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(_compare_folder(templates), work / "cmp")
        edit(work / RUNS / folder)
        (work.parent / "before.json").write_text(json.dumps(_snapshot(work / RUNS / folder)))
        return [*COMPARE, *extra]

    def check(work: Path) -> str | None:
        err = _stderr(work)
        line = next((x for x in err.splitlines() if x.startswith("left out ") and folder in x), "")
        if not line or words not in line:
            return f"no line leaves {folder} out for '{words}': {err[-400:]!r}"
        if "3 of 4 runs already finished" not in err:
            return f"the finished count is not 3 of 4: {err[-300:]!r}"
        if "Traceback" in err or "error:" in err:
            return f"an error besides: {err[-300:]!r}"
        before = json.loads((work.parent / "before.json").read_text())
        return None if _snapshot(work / RUNS / folder) == before else f"{folder} was changed"

    return Case(name, (), (), setup, expect="done", check=check)


def _report_case(name: str, folder: str, edit: Edit, words: str) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(_compare_folder(templates), work / "cmp")
        edit(work / RUNS / folder)
        return ["report", "cmp", "--out", "rep", "--no-plots"]

    def check(work: Path) -> str | None:
        index = (work / "rep" / "index.md").read_text()
        listed = index.split("## Runs left out", 1)[-1] if "## Runs left out" in index else ""
        line = next((x for x in listed.splitlines() if folder in x), "")
        if words not in line:
            return f"index.md does not leave {folder} out for '{words}'"
        return None if "3 complete runs" in index else "index.md does not report the other 3 runs"

    return Case(name, (), (), setup, expect="done", check=check)


def _damaged_cases() -> list[Case]:
    cases = [_compare_case(f"compare-reuse-{n}", f, e, w) for n, (f, e, w) in DAMAGED.items()]
    cases += [
        _report_case(f"report-compare-folder-{n}", f, e, w)
        for n, (f, e, w) in DAMAGED.items()
        if n in ("seed-copy-regular", "seed-copy-fine", "off-grid-accuracy", "num-test-huge", "final-150")
    ]
    cases.append(
        _compare_case(
            "compare-reuse-final-150-json", "fine-seed1", _summary(final_accuracy=150), "final_accuracy", ("--json",)
        )
    )
    return cases


# -- YAML merge keys --------------------------------------------------------------------------


def _merged(name: str, text: str, values: dict) -> Case:
    """A config with merge keys that `--print-config` accepts, read back with these values."""

    def setup(work: Path, outside: Path, templates: dict) -> list:
        (work / "c.yaml").write_text(text)
        return ["train", "--config", "c.yaml", "--print-config"]

    def check(work: Path) -> str | None:
        from fineprune_cli.engine.setup.config import build_config

        cfg = build_config(work / "c.yaml", {})
        got = {k: getattr(getattr(cfg, k.split(".")[0]), k.split(".")[1]) for k in values}
        return None if got == values else f"read {got}, meant {values}"

    return Case(f"yaml-merge-{name}", (), (), setup, expect="done", check=check)


HEAD = "model: {name: lenet}\ndata: {dataset: synthetic}\n"
VALID_MERGES = {
    "top-level": ("<<: {model: {name: lenet}}\ndata: {dataset: synthetic}\n", {"model.name": "lenet"}),
    "own-key-overrides": (
        HEAD + "train: {<<: {epochs: 3, lr: 0.5}, lr: 0.05}\n",
        {"train.epochs": 3, "train.lr": 0.05},
    ),
    "list-first-wins": (
        HEAD + "train: {<<: [{epochs: 3}, {epochs: 5, batch_size: 16}]}\n",
        {"train.epochs": 3, "train.batch_size": 16},
    ),
    "anchor-of-a-section": (
        "model: {name: lenet}\ndata: &d {dataset: synthetic, subset: 64}\n",
        {"data.subset": 64, "data.dataset": "synthetic"},
    ),
    "block-style": (
        HEAD + "train:\n  <<:\n    epochs: 4\n    milestones: [2]\n  milestones: [3]\n",
        {"train.milestones": [3]},
    ),
}
INVALID_MERGES = {
    "scalar": (HEAD + "train:\n  <<: 5\n", "merge key"),
    "list-of-scalars": (HEAD + "train:\n  <<: [1, 2]\n", "merge key"),
    "null": (HEAD + "train:\n  <<: ~\n", "merge key"),
    "alias-of-a-scalar": (
        "model: {name: lenet}\ndata: {dataset: synthetic, subset: &n 64}\ntrain: {<<: *n}\n",
        "merge key",
    ),
    "own-key-twice": (HEAD + "train:\n  <<: {epochs: 3}\n  lr: 0.1\n  lr: 0.2\n", "duplicate key 'lr'"),
    "unknown-merged-key": (HEAD + "train: {<<: {epochz: 3}}\n", "epochz"),
    "base-60-merged": (HEAD + "train: {<<: {epochs: 1:00}}\n", "base-60"),
    "undefined-alias": (HEAD + "train: {<<: *nope}\n", "not valid YAML"),
    "merged-bad-type": (HEAD + "train: {<<: {epochs: many}}\n", "train.epochs"),
}


def _yaml_cases() -> list[Case]:
    cases = [_merged(name, text, values) for name, (text, values) in VALID_MERGES.items()]
    cases += [
        config(f"yaml-merge-{name}", text, "--print-config", words=[words])
        for name, (text, words) in INVALID_MERGES.items()
    ]
    return cases


# -- --jobs and --threads -----------------------------------------------------------------------

BIG = str(10**20)
JOBS = {
    "jobs-zero": (["--jobs", "0"], "--jobs"),
    "jobs-negative": (["--jobs", "-2"], "--jobs"),
    "jobs-huge": (["--jobs", BIG], "--jobs"),
    "jobs-word": (["--jobs", "two"], "--jobs"),
    "jobs-float": (["--jobs", "1.5"], "--jobs"),
    "jobs-1025": (["--jobs", "1025"], "--jobs"),
    "jobs-beyond-cores": (["--jobs", "1024"], "--jobs 1024 is more than"),
    "threads-negative": (["--threads", "-1"], "--threads"),
    "threads-word": (["--threads", "all"], "--threads"),
    "threads-huge": (["--threads", BIG], "--threads"),
    "jobs-times-threads-beyond-cores": (["--jobs", "2", "--threads", "1024"], "more than the"),
    "jobs-set-zero": (["--set", "compare.jobs=0"], "--jobs"),
    "threads-set-word": (["--set", "compare.threads=x"], "threads"),
    "jobs-zero-dry-run": (["--jobs", "0", "--dry-run"], "--jobs"),
    "jobs-with-slurm-detach-no-executor": (["--jobs", "2", "--detach"], "--detach needs --executor slurm"),
}


CONFIG = [*COMPARE, "--config", "c.yaml"]


def _jobs_cases() -> list[Case]:
    cases = [Case(f"compare-{n}", [*COMPARE, *extra], [words]) for n, (extra, words) in JOBS.items()]
    cases += [
        with_file("compare-jobs-in-config-negative", "c.yaml", "compare: {jobs: -1}\n", [*CONFIG], ["jobs"]),
        with_file("compare-threads-in-config-list", "c.yaml", "compare: {threads: [1, 2]}\n", [*CONFIG], ["threads"]),
        with_file("compare-merged-jobs-zero", "c.yaml", "compare: {<<: {jobs: 0}}\n", [*CONFIG], ["jobs"]),
    ]
    return cases


ROUND5_JOBS_CASES: list[Case] = _damaged_cases() + _yaml_cases() + _jobs_cases()

"""`fineprune report`: run folders in, tables (CSV + Markdown), plots and index.md out.

The CSV and Markdown depend only on the runs read, so the same runs give byte-identical
files; nothing is stamped with the time the report was made.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...engine.records.files import atomic_write_text, to_csv, to_markdown
from ...errors import ConfigError
from ..decide.judging import Judging
from ..group import timing
from ..group.groups import duplicates, is_shorter, pruned_policies, row_name
from ..read.randomequal import random_equal_epochs
from ..read.runs import Problem, Run, load_runs
from ..study import Study, for_folders, with_left_out
from . import plots
from .index import Report, index_markdown
from .summary import csv_cells, summary_rows
from .tables import context_title, table1, table2, table3
from .verdict import build

RUN_COLUMNS = (
    "run",
    "model",
    "dataset",
    "policy",
    "row",
    "seed",
    "epochs",
    "train_seconds",
    "overhead_seconds",
    "samples_skipped",
    "random_equal_epochs",
    "sample_epochs",
    "optimizer_steps",
    "final_accuracy",
    "best3_accuracy",
    "target_accuracy",
    "target_epoch",
    "target_sample_epochs",
    "target_seconds",
    "device",
    "machine",
    "load_average",
    "cpu_seconds",  # the process's CPU seconds (a script's: its whole epochs); empty: not recorded
    "cpu_share",  # those over the clock seconds they cover x threads: under 0.8, the run waited for its cores
    "git_commit",
)


def write_report(
    paths: list[Path], out: Path, with_plots: bool = True, notes: str = "", judging: Judging | None = None
) -> Report:
    """`notes` (Markdown, e.g. how the runs were launched) goes at the top of index.md;
    `judging`: how to judge (default: the plan recorded with the runs, else the defaults)."""
    runs, problems = load_runs(paths)
    if not runs and not problems:  # an empty report, exit 0, would pass for one over runs (issue 57)
        named = ", ".join(str(p) for p in paths)
        raise ConfigError(f"no run folders in {named}: nothing to report (a run folder holds a summary.json)")
    repeated = duplicates(runs)
    runs = [r for r in runs if all(r is not dup for dup, _ in repeated)]
    problems += [repeats(dup, kept) for dup, kept in repeated]
    found = with_left_out(for_folders(runs, paths, judging), problems)
    report = Report(out, runs, problems, found, notes=notes, verdict=build(found))
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / ".write-check", "ok")
        (out / ".write-check").unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write the report into {out}: {exc.strerror or exc}") from None
    # written whole into a hidden folder beside, then moved in file by file (a rename needs no
    # room): a disk that fills up midway leaves the previous report as it was, not half of a new one
    stage = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        report.out = stage
        _write_all(report, with_plots)
        report.files = [_publish(f, stage, out) for f in report.files]
    finally:
        report.out = out
        shutil.rmtree(stage, ignore_errors=True)
    return report


def repeats(dup: Run, kept: Run) -> Problem:
    """A second record of a run (its settings and seed), e.g. from another machine: one whose
    results are the same is left out, saying so; one whose results differ leaves no way to tell
    which to judge (keeping the one whose path sorts first would decide by a folder's name)."""
    if _results(dup) != _results(kept):
        raise ConfigError(
            f"{kept.policy} seed {kept.seed} is recorded twice with different results, in {kept.path} and "
            f"{dup.path} (runs of one seed from two machines?): report the folders of one of them"
        )
    return Problem(dup.path, "duplicate", f"an identical record of the run in {kept.path}: kept once",
                   (dup.summary.model, dup.label, dup.policy), dup.seed)  # fmt: skip


def _results(run: Run) -> list[tuple]:
    """Each epoch's figures but its times (which differ between two machines making the same run)."""
    nan = lambda v: None if v != v else v  # noqa: E731 - NaN (a test loss not measured) equals itself here
    return [
        (r.epoch, r.lr, r.samples, nan(r.train_loss), nan(r.test_loss), r.test_accuracy, r.pruned) for r in run.metrics
    ]


def _publish(path: Path, stage: Path, out: Path) -> Path:
    target = out / path.relative_to(stage)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def _write_all(report: Report, with_plots: bool) -> None:
    out, runs, found = report.out, report.runs, report.study
    tables = (
        {"table1_time": table1(found), "table2_accuracy": table2(found), "table3_time_to_accuracy": table3(found)}
        if runs
        else {}
    )
    for name, (header, rows) in tables.items():
        report.files.append(_write(out / f"{name}.csv", to_csv(header, rows)))
        report.files.append(_write(out / f"{name}.md", to_markdown(header, rows)))
    srows = summary_rows(report.study)
    if srows:
        report.files.append(_write(out / "summary.csv", to_csv(list(srows[0]), [csv_cells(r) for r in srows])))
    report.files.append(_write(out / "runs.csv", to_csv(list(RUN_COLUMNS), _run_rows(found))))
    figures = _plots(found, out / "plots") if with_plots and runs else []
    report.files += [f for _, f in figures]
    report.files.append(_write(out / "index.md", index_markdown(report, tables, figures)))


def _run_rows(found: Study) -> list[list[Any]]:
    """runs.csv's rows, in the order the runs were read: each with its row, its context's target
    and where it reached it, as the study found them."""
    at = {
        str(run.path): (context, name, seed)
        for context, by in found.groups.items()
        for name, seeds in by.items()
        for seed, run in seeds.items()
    }
    rows = []
    for run in found.runs:
        context, name, seed = at[str(run.path)]
        reached = found.reach[context, name].by_seed[seed]
        rows.append(_run_row(run, row_name(context, name), found.targets[context], reached))
    return rows


def _write(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path


def _run_row(run: Run, row: str, target: float | None, reached: timing.Reached | None) -> list[Any]:
    s = run.summary
    at = [reached.epoch, round(reached.sample_epochs, 4), round(reached.seconds, 3)] if reached else ["not reached"] * 3
    return [
        str(run.path),
        s.model,
        run.label,
        s.policy,
        row,
        s.seed,
        s.epochs,
        s.train_seconds,
        s.overhead_seconds,
        s.samples_skipped,
        len(random_equal_epochs(run)),
        round(timing.sample_epochs(run), 4),
        timing.optimizer_steps(run),
        s.final_accuracy,
        round(s.best3_accuracy, 4),
        "" if target is None else round(target, 4),
        *at,
        s.device,
        timing.signature(run),
        " ".join(f"{x:g}" for x in s.load_average),
        "" if s.cpu_seconds is None else s.cpu_seconds,
        "" if (share := timing.cpu_share(run)) is None else round(share, 3),
        s.git_commit,
    ]


def _plots(found: Study, folder: Path) -> list[tuple[str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    groups, figures = found.groups, []
    for context, by_policy in groups.items():
        title = context_title(context)
        stem = plots.slug(context.model, context.label, *([context.variant] if context.variant else []))
        figures.append(
            (f"{title}: test loss and accuracy", plots.curves(by_policy, title, folder / f"curves-{stem}.png"))
        )
        figures.append(
            (
                f"{title}: test accuracy against sample-epochs trained",
                plots.accuracy_by_cost(by_policy, title, found.targets[context], folder / f"cost-{stem}.png"),
            )
        )
        for policy in [p for p in pruned_policies(by_policy) if not is_shorter(p)][:1]:
            first = by_policy[policy][min(by_policy[policy])]
            figures.append(
                (f"{title}: pruning timeline", plots.timeline(first, title, folder / f"timeline-{stem}.png"))
            )
            hist = plots.counts_histogram(first, f"{title}: DroppingCount per window", folder / f"counts-{stem}.png")
            if hist:
                figures.append((f"{title}: DroppingCount at the end of each window", hist))
    if any(pruned_policies(by) for by in groups.values()):
        figures.append(
            (
                "Accuracy change against budget (sample-epochs skipped), with the random and fewer-epochs frontiers",
                plots.tradeoff(found, folder / "tradeoff.png"),
            )
        )
    return figures

"""`fineprune report`: run folders in, tables (CSV + Markdown), plots and index.md out.

The CSV and Markdown depend only on the runs read, so the same runs give byte-identical
files; nothing is stamped with the time the report was made.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.files import atomic_write_text, to_csv, to_markdown
from ..errors import ConfigError
from . import plots
from .runs import Problem, Run, load_runs
from .tables import display_name, group, paper_results, pruned_policies, summary_rows, table1, table2, verdict

RUN_COLUMNS = ("run", "model", "dataset", "policy", "seed", "epochs", "train_seconds",
               "overhead_seconds", "samples_skipped", "final_accuracy", "best3_accuracy",
               "device", "git_commit")


@dataclass
class Report:
    out: Path
    runs: list[Run]
    problems: list[Problem]
    files: list[Path] = field(default_factory=list)
    notes: str = ""


def write_report(paths: list[Path], out: Path, with_plots: bool = True, notes: str = "") -> Report:
    """`notes` (Markdown, e.g. how the runs were launched) goes at the top of index.md."""
    runs, problems = load_runs(paths)
    report = Report(out, runs, problems, notes=notes)
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


def _publish(path: Path, stage: Path, out: Path) -> Path:
    target = out / path.relative_to(stage)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def _write_all(report: Report, with_plots: bool) -> None:
    out, runs = report.out, report.runs
    tables = {"table1_time": table1(runs), "table2_accuracy": table2(runs)} if runs else {}
    for name, (header, rows) in tables.items():
        report.files.append(_write(out / f"{name}.csv", to_csv(header, rows)))
        report.files.append(_write(out / f"{name}.md", to_markdown(header, rows)))
    srows = summary_rows(runs)
    if srows:
        report.files.append(_write(out / "summary.csv", to_csv(list(srows[0]), [list(r.values()) for r in srows])))
    report.files.append(_write(out / "runs.csv", to_csv(list(RUN_COLUMNS), [_run_row(r) for r in runs])))
    figures = _plots(runs, out / "plots") if with_plots and runs else []
    report.files += [f for _, f in figures]
    report.files.append(_write(out / "index.md", _index(report, tables, figures)))


def _write(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path


def _run_row(run: Run) -> list[Any]:
    s = run.summary
    return [str(run.path), s.model, run.label, s.policy, s.seed, s.epochs, s.train_seconds,
            s.overhead_seconds, s.samples_skipped, s.final_accuracy, round(s.best3_accuracy, 4),
            s.device, s.git_commit]


def _plots(runs: list[Run], folder: Path) -> list[tuple[str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for (model, label), by_policy in group(runs).items():
        title = f"{display_name(model)} on {label}"
        stem = plots.slug(model, label)
        figures.append((f"{title}: test loss and accuracy",
                        plots.curves(by_policy, title, folder / f"curves-{stem}.png")))
        for policy in pruned_policies(by_policy)[:1]:
            first = by_policy[policy][min(by_policy[policy])]
            figures.append((f"{title}: pruning timeline",
                            plots.timeline(first, title, folder / f"timeline-{stem}.png")))
            hist = plots.counts_histogram(first, f"{title}: DroppingCount per window",
                                          folder / f"counts-{stem}.png")
            if hist:
                figures.append((f"{title}: DroppingCount at the end of each window", hist))
    if any(pruned_policies(by) for by in group(runs).values()):
        figures.append(("Time saved against accuracy change", plots.tradeoff(runs, folder / "tradeoff.png")))
    return figures


def _index(report: Report, tables: dict[str, tuple[list[str], list[list[str]]]],
           figures: list[tuple[str, Path]]) -> str:
    parts = ["# Data fine-pruning: results\n"] + ([report.notes.strip() + "\n"] if report.notes else [])
    runs = report.runs
    if runs:
        devices = sorted({r.summary.device or "unknown" for r in runs})
        commits = sorted({r.summary.git_commit or "unknown" for r in runs})
        commands = sorted({r.summary.command for r in runs if r.summary.command})
        parts.append(f"{len(runs)} complete runs. Machine: {'; '.join(devices)}. "
                     f"torch {runs[0].summary.torch or '?'}. Code: {', '.join(commits)}.\n")
        if commands:
            parts.append("Made with:\n\n" + "".join(f"    {c}\n" for c in commands))
    titles = {"table1_time": "Table 1: training time (seconds of training, evaluation excluded)",
              "table2_accuracy": "Table 2: test accuracy"}
    for name, (header, rows) in tables.items():
        parts.append(f"## {titles[name]}\n\n{to_markdown(header, rows)}")
    parts.append(f"Paper rows: {paper_results()['source']}. Saved is the training time saved "
                 "against the regular run of the same seed; the random control leaves out as many "
                 "samples, chosen at random, in the same epochs as fine-pruning. "
                 "Saved at own pace compares a run with itself: 1 − its training time / (epochs × "
                 "the median of its unpruned epochs, epoch 1 excluded); on a shared machine separate "
                 "runs drift apart by more than the saving, times measured in one run do not.\n")
    sentences = verdict(runs)
    if sentences:
        parts.append("## Verdict\n\n" + "\n".join(sentences) + "\n\nAccuracy changes are final "
                     "accuracy minus regular's, paired by seed; time saved is between runs, paired by seed.\n")
    if figures:
        parts.append("## Plots\n\n" + "\n".join(
            f"![{title}]({path.relative_to(report.out).as_posix()})\n" for title, path in figures))
    if report.problems:
        parts.append("## Runs left out\n\n" + "".join(
            f"- `{p.path}`: {p.status} ({p.reason})\n" for p in report.problems))
    if not runs:
        parts.append("No complete runs were found.\n")
    return "\n".join(parts)

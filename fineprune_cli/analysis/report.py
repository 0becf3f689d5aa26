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
from . import plots, timing
from .decision import Judging
from .groups import context_of, duplicates, group, is_shorter, pruned_policies, row_name
from .numbers import csv_cells, quantum_of, summary_rows, target_for
from .runs import Problem, Run, load_runs
from .tables import context_title, paper_results, table1, table2, table3
from .verdict import Verdict, build

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
    "git_commit",
)


@dataclass
class Report:
    out: Path
    runs: list[Run]
    problems: list[Problem]
    files: list[Path] = field(default_factory=list)
    notes: str = ""
    judging: Judging = Judging()
    verdict: Verdict | None = None
    looks: str = ""  # looks.md of a `compare --until-decided` folder: its decisions are the procedure's


def write_report(
    paths: list[Path], out: Path, with_plots: bool = True, notes: str = "", judging: Judging = Judging()
) -> Report:
    """`notes` (Markdown, e.g. how the runs were launched) goes at the top of index.md;
    `judging`: the equivalence margin and the time-to-accuracy target."""
    runs, problems = load_runs(paths)
    repeated = duplicates(runs)
    runs = [r for r in runs if all(r is not dup for dup, _ in repeated)]
    problems += [Problem(dup.path, "duplicate", f"the same settings and seed as {kept.path}") for dup, kept in repeated]
    report = Report(
        out,
        runs,
        problems,
        notes=notes,
        judging=judging,
        verdict=build(runs, judging),
        looks="".join(read_looks(p) for p in paths),
    )
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
    out, runs, judging = report.out, report.runs, report.judging
    tables = (
        {
            "table1_time": table1(runs),
            "table2_accuracy": table2(runs, judging),
            "table3_time_to_accuracy": table3(runs, judging),
        }
        if runs
        else {}
    )
    for name, (header, rows) in tables.items():
        report.files.append(_write(out / f"{name}.csv", to_csv(header, rows)))
        report.files.append(_write(out / f"{name}.md", to_markdown(header, rows)))
    srows = summary_rows(runs, judging)
    if srows:
        report.files.append(_write(out / "summary.csv", to_csv(list(srows[0]), [csv_cells(r) for r in srows])))
    groups = group(runs)
    targets = {context: target_for(by, judging) for context, by in groups.items()}
    quanta = {context: quantum_of(by) for context, by in groups.items()}
    row_of = {
        str(run.path): row_name(c, name)
        for c, by in groups.items()
        for name, seeds in by.items()
        for run in seeds.values()
    }
    contexts = context_of(runs)
    report.files.append(
        _write(
            out / "runs.csv",
            to_csv(
                list(RUN_COLUMNS),
                [
                    _run_row(r, row_of[str(r.path)], targets[contexts[str(r.path)]], quanta[contexts[str(r.path)]])
                    for r in runs
                ],
            ),
        )
    )
    figures = _plots(runs, out / "plots", targets) if with_plots and runs else []
    report.files += [f for _, f in figures]
    report.files.append(_write(out / "index.md", _index(report, tables, figures)))


def _write(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path


def _run_row(run: Run, row: str, target: float | None, quantum: float) -> list[Any]:
    s = run.summary
    reached = timing.time_to_accuracy(run, target, quantum) if target is not None else None
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
        round(timing.sample_epochs(run), 4),
        timing.optimizer_steps(run),
        s.final_accuracy,
        round(s.best3_accuracy, 4),
        "" if target is None else round(target, 4),
        *at,
        s.device,
        timing.signature(run),
        " ".join(f"{x:g}" for x in s.load_average),
        s.git_commit,
    ]


def _plots(runs: list[Run], folder: Path, targets: dict[Any, float | None]) -> list[tuple[str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for context, by_policy in group(runs).items():
        title = context_title(context)
        stem = plots.slug(context.model, context.label, *([context.variant] if context.variant else []))
        figures.append(
            (f"{title}: test loss and accuracy", plots.curves(by_policy, title, folder / f"curves-{stem}.png"))
        )
        figures.append(
            (
                f"{title}: test accuracy against sample-epochs trained",
                plots.accuracy_by_cost(by_policy, title, targets[context], folder / f"cost-{stem}.png"),
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
    if any(pruned_policies(by) for by in group(runs).values()):
        figures.append(
            (
                "Accuracy change against budget (sample-epochs skipped), with the random and fewer-epochs frontiers",
                plots.tradeoff(runs, folder / "tradeoff.png"),
            )
        )
    return figures


def _index(
    report: Report, tables: dict[str, tuple[list[str], list[list[str]]]], figures: list[tuple[str, Path]]
) -> str:
    parts = ["# Data fine-pruning: results\n"]
    if report.looks:
        parts.append("## Planned looks (`compare --until-decided`)\n\n" + report.looks + "\n" + LOOKS_NOTE)
    if report.verdict:
        parts.append("## Decisions\n\n" + "\n".join(report.verdict.markdown()) + "\n\n" + VERDICT_NOTE)
    parts += [report.notes.strip() + "\n"] if report.notes else []
    runs = report.runs
    if runs:
        commits = sorted({r.summary.git_commit or "unknown" for r in runs})
        commands = sorted({r.summary.command for r in runs if r.summary.command})
        n_rows = sum(len(by) for by in group(runs).values())
        parts.append(
            f"{len(runs)} complete run{'s' if len(runs) != 1 else ''} in {n_rows} row{'s' if n_rows != 1 else ''} "
            f"(runs of one row share every setting but the seed). Code: {', '.join(commits)}.\n"
        )
        if commands:
            parts.append("Made with:\n\n" + "".join(f"    {c}\n" for c in commands))
    titles = {
        "table1_time": "Table 1: training time (seconds of training, evaluation excluded)",
        "table2_accuracy": "Table 2: test accuracy",
        "table3_time_to_accuracy": "Table 3: time to accuracy",
    }
    notes = {
        "table1_time": TIME_NOTE.format(paper=paper_results()["source"]) + _machines(runs),
        "table2_accuracy": ACCURACY_NOTE,
        "table3_time_to_accuracy": REACH_NOTE.format(
            target=f"{report.judging.target:g}%"
            if report.judging.target is not None
            else "regular's mean final accuracy − 0.5 pt"
        ),
    }
    for name, (header, rows) in tables.items():
        parts.append(f"## {titles[name]}\n\n{to_markdown(header, rows)}\n{notes[name]}")
    if figures:
        parts.append(
            "## Plots\n\n"
            + "\n".join(f"![{title}]({path.relative_to(report.out).as_posix()})\n" for title, path in figures)
        )
    if report.problems:
        parts.append(
            "## Runs left out\n\n" + "".join(f"- `{p.path}`: {p.status} ({p.reason})\n" for p in report.problems)
        )
    if not runs:
        parts.append("No complete runs were found.\n")
    return "\n".join(parts)


LOOKS_NOTE = (
    "These runs were made by planned looks: the decisions that hold are the ones above, each "
    "at the level its look spent. The next section recomputes every policy over all seeds at the "
    "full level, which the procedure did not test: read it as a description.\n"
)


def read_looks(path: Path) -> str:
    """looks.md of a folder that `compare --until-decided` wrote, else ''."""
    found = path / "looks.md"
    try:
        return found.read_text() if found.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


VERDICT_NOTE = (
    "How to read it: a difference is final test accuracy minus the baseline's in the same seed, as mean "
    "[90% interval] over the seeds both have (n, and which, beside it). The spread is pooled from a "
    "randomized-block model (arm + seed) over all runs of the context, except for an arm whose paired "
    "spread against regular is out of line with the other arms' pool (upper-tail F test at 5%): its "
    "comparisons keep their own paired t. No interval is narrower than one test image. C(p) is "
    "training fewer epochs at the policy's budget where the runs reach it, else random pruning in every "
    "epoch at that budget, else the equal-budget random control; a line is read through the same arms in "
    "every seed, and a seed that lacks one is left out and named. Everything outside this section describes "
    "and decides nothing (the rules and their measured error rates: docs/decisions.md).\n"
)
TIME_NOTE = (
    "Paper rows: {paper}. *Saved (same machine)* is the training time saved against the regular run "
    "of the same seed, only where both ran on one machine signature (processor, torch threads, torch "
    "version, device); the other pairs are counted and left out. The random control leaves out as "
    "many samples, chosen at random, in the same epochs as fine-pruning. *Saved at own pace* compares "
    "a run with itself: 1 − its training time / (epochs × the median of its unpruned epochs, epoch 1 "
    "excluded). Sample-epochs trained (1.0 = one full pass) and optimizer steps do not depend on the "
    "machine and compare across all runs.\n"
)
ACCURACY_NOTE = (
    "Final-accuracy changes: mean [90% interval] (n seeds), paired by seed, as the decisions use "
    "them; best-3 is the paper's metric, selected on the test set, so it is shown as mean ± std "
    "and decides nothing.\n"
)
REACH_NOTE = (
    "The first epoch whose test accuracy reaches the target ({target}, on the test set's quantum, "
    "compared in whole test images), the sample-epochs and training seconds up to its end (as "
    "DAWNBench and MLPerf time training); means over the seeds that reach it, the others counted as "
    "censored. It describes and does not rank. Seconds only from runs with the machine signature named; other work on that machine "
    "still moves them (`runs.csv` gives each run's load at its start).\n"
)


def _machines(runs: list[Run]) -> str:
    """Which machines the runs ran on, and which time pairs were left out and why."""
    by_sig: dict[str, list[Run]] = {}
    for run in runs:
        by_sig.setdefault(timing.signature(run), []).append(run)
    lines = ["\nMachines:\n"]
    for sig, members in sorted(by_sig.items()):
        loads = [r.summary.load_average[0] for r in members if r.summary.load_average]
        load = f"; 1-minute load at start {min(loads):g}–{max(loads):g}" if loads else ""
        why = {
            timing.UNKNOWN: ": recorded no machine signature (made before schema 3); their times are "
            "shown, never compared",
            timing.MIXED: ": resumed on another machine; their times are shown, never compared",
        }.get(sig, "")
        lines.append(f"- {sig}: {len(members)} run{'s' if len(members) != 1 else ''}{load}{why}\n")
    left: dict[str, list[str]] = {}
    groups = group(runs)
    for context, by in groups.items():
        where = f"{context_title(context)}, " if len(groups) > 1 else ""
        for p in pruned_policies(by):
            for x in timing.savings(by, p)[1]:
                left.setdefault(x.reason, []).append(f"{where}{p} seed {x.seed}")
    if left:
        lines.append(
            "\nPairs left out of *saved*: "
            + "; ".join(f"{reason} ({len(pairs)}: {', '.join(pairs)})" for reason, pairs in sorted(left.items()))
            + ".\n"
        )
    return "".join(lines)

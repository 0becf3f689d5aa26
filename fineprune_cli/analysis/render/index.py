"""index.md of a report: its decisions, how to read them, where the runs ran, the tables and plots."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...engine.records.files import to_markdown
from ..group import compression, timing
from ..group.groups import pruned_policies
from ..read import collapse
from ..read.runs import Problem, Run
from ..study import Study
from . import load
from .tables import context_title, paper_results
from .verdict import Verdict


@dataclass
class Report:
    out: Path
    runs: list[Run]
    problems: list[Problem]
    study: Study
    files: list[Path] = field(default_factory=list)
    notes: str = ""
    verdict: Verdict | None = None


def index_markdown(
    report: Report, tables: dict[str, tuple[list[str], list[list[str]]]], figures: list[tuple[str, Path]]
) -> str:
    parts = ["# Data fine-pruning: results\n"]
    waited = load.lines(report.study)
    if waited:  # the clock's savings mean little here: the figure to trust comes first
        parts.append("## Time saved on a loaded machine\n\n" + "\n\n".join(waited) + "\n")
    if report.verdict:
        parts.append("## Decisions\n\n" + "\n".join(report.verdict.markdown()) + "\n\n" + VERDICT_NOTE)
    failed = collapse.lines(report.study.collapsed)
    if failed:
        parts.append("## Runs that collapsed\n\n" + "\n".join([failed[0], "", *failed[1:-1], "", failed[-1]]) + "\n")
    off = compression.lines(report.study.compression)
    if off:
        parts.append("## Learning-rate schedules\n\n" + "\n\n".join(off) + "\n")
    parts += [report.notes.strip() + "\n"] if report.notes else []
    runs = report.runs
    if runs:
        n_rows = sum(len(by) for by in report.study.groups.values())
        parts.append(
            f"{len(runs)} complete run{'s' if len(runs) != 1 else ''} in {n_rows} row{'s' if n_rows != 1 else ''} "
            f"(runs of one row share every setting but the seed). Code: {code(runs)}.\n"
        )
        parts += made_with(runs)
    titles = {
        "table1_time": "Table 1: training time (seconds of training, evaluation excluded)",
        "table2_accuracy": "Table 2: test accuracy",
        "table3_time_to_accuracy": "Table 3: time to accuracy",
    }
    notes = {
        "table1_time": TIME_NOTE.format(paper=paper_note(tables), cpu=CPU_NOTE if _cpu_timed(runs) else "")
        + machines(runs, report.study),
        "table2_accuracy": ACCURACY_NOTE,
        "table3_time_to_accuracy": REACH_NOTE.format(
            target=f"{report.study.judging.target:g}%"
            if report.study.judging.target is not None
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


def paper_note(tables: dict[str, tuple[list[str], list[list[str]]]]) -> str:
    rows = tables.get("table1_time", ([], []))[1]
    if not any(row[0].startswith("Paper ") for row in rows):
        return ""
    source = paper_results()["source"]
    return f"Paper rows: {source}, shown only for the paper's models on CIFAR-10 trained by fineprune's trainer. "


def code(runs: list[Run]) -> str:
    """fineprune's commit for its trainer's runs; for a script's, the script's own version (its
    git commit, or its content's hash), fineprune's commit beside it."""
    ours = {r.summary.git_commit or "unknown" for r in runs if not r.is_script}
    scripts = {_said(r, "script_version") or "its version not recorded" for r in runs if r.is_script}
    by_script = {r.summary.git_commit or "unknown" for r in runs if r.is_script}
    parts = [", ".join(sorted(ours))] if ours else []
    if scripts:
        parts.append(f"the script {', '.join(sorted(scripts))} (run by fineprune {', '.join(sorted(by_script))})")
    return "; ".join(parts)


def _said(run: Run, key: str) -> str:
    """A text a script run recorded beside its summary's fields ('' where none, or not a text)."""
    value = run.summary.extra.get(key)
    return value if isinstance(value, str) else ""


def made_with(runs: list[Run]) -> list[str]:
    """The commands that make the runs again. A script run's own command line does not name its
    arm (compare hands that over in its job's config.yaml), so the compare command comes first,
    then how one run is made again alone."""
    made = {r.summary.command for r in runs if r.summary.command and not r.is_script}
    made |= {_said(r, "compare_command") for r in runs if r.is_script} - {""}
    alone = sorted({r.summary.command for r in runs if r.is_script and r.summary.command})
    parts = ["Made with:\n\n" + "".join(f"    {c}\n" for c in sorted(made))] if made else []
    if alone:
        parts.append(
            "One script run alone, its arm and settings read from its folder's config.yaml (a new folder: "
            "a folder holding a run is not written over):\n\n"
            + "".join(
                f"    FINEPRUNE_JOB=<its folder>/config.yaml FINEPRUNE_RUN_DIR=<a new folder> {c}\n" for c in alone
            )
        )
    return parts


VERDICT_NOTE = (
    "How to read it: a difference is final test accuracy minus the baseline's in the same seed, as mean "
    "[bounds] over the seeds both have (n, and which, beside it); the bounds are the one-sided bounds its "
    "claims test, at the level each decision spends, from the comparison's own paired spread, and no bound "
    "is nearer the mean than one test image allows. C(p) is training fewer epochs at the policy's budget "
    "where the runs reach it, else random pruning in every epoch at that budget, else the equal-budget "
    "random control; a line is read through the same arms in every seed, and a seed that lacks one is left "
    "out and named. Everything outside this section describes and decides nothing; its intervals are 90% "
    "and descriptive (the rules and their measured error rates: docs/decisions.md).\n"
)
TIME_NOTE = (
    "{paper}*Saved (same machine)* is the "
    "training time saved against the regular run of the same seed, only where both ran on one machine "
    "signature (processor, torch threads, torch version, device); the other pairs are counted and left "
    "out; *whole run saved* is the same on the user's clock: training, each epoch's test pass and its "
    "records{cpu}. The random control leaves out as many samples, chosen at random, in the same epochs as "
    "fine-pruning. *Saved at own pace* compares a run with itself: 1 − its training time / (epochs × "
    "the median of its unpruned epochs, epoch 1 excluded). Sample-epochs trained (1.0 = one full pass) "
    "and optimizer steps do not depend on the machine and compare across all runs.\n"
)
CPU_NOTE = (
    "; *saved in CPU time* is the same in the process's own CPU seconds (fineprune's trainer: its training; "
    "a script: its whole epochs), which other work on the machine does not stretch"
)


def _cpu_timed(runs: list[Run]) -> bool:
    return any(timing.cpu_seconds(r) is not None for r in runs)


ACCURACY_NOTE = (
    "Final-accuracy changes: mean [descriptive 90% interval] (n seeds), paired by seed, on each "
    "comparison's own spread (the bounds a decision tests, at its own level, are in the Decisions "
    "section); best-3 is the paper's metric, selected on the test set, so it is shown as mean ± std "
    "and decides nothing.\n"
)
REACH_NOTE = (
    "The first epoch whose test accuracy reaches the target ({target}, on the test set's quantum, "
    "compared in whole test images), the sample-epochs and training seconds up to its end (as "
    "DAWNBench and MLPerf time training); means over the seeds that reach it, the others counted as "
    "censored. It describes and does not rank. Seconds only from runs with the machine signature named; other work on that machine "
    "still moves them (`runs.csv` gives each run's load at its start).\n"
)


def machines(runs: list[Run], found: Study) -> str:
    """Which machines the runs ran on, and which time pairs were left out and why."""
    groups = found.groups
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
    for context, by in groups.items():
        where = f"{context_title(context)}, " if len(groups) > 1 else ""
        for p in pruned_policies(by):
            for x in found.numbers[context, p].not_timed:
                left.setdefault(x.reason, []).append(f"{where}{p} seed {x.seed}")
    if left:
        lines.append(
            "\nPairs left out of *saved*: "
            + "; ".join(f"{reason} ({len(pairs)}: {', '.join(pairs)})" for reason, pairs in sorted(left.items()))
            + ".\n"
        )
    return "".join(lines)

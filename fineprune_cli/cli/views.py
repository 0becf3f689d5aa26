"""Rich renderings of results for the terminal (tables, the Figure-3 style timeline)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from .. import console
from ..pruning.estimate import Estimate, timeline
from ..pruning.schedule import PruneSchedule


def show_estimate(result: tuple[Estimate, PruneSchedule | None], as_json: bool) -> None:
    est, schedule = result
    if as_json:
        console.print_json(est.to_dict())
        return
    unit = "s" if est.time_unit == "seconds" else " epochs"
    table = Table(title="Predicted saving (Section 4.4)", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    formula = f"{est.n_prune_formula}" + ("" if est.formula_agrees else "  (differs: see docs/choices.md)")
    for label, value in [
        ("epochs n", f"{est.epochs}"),
        ("pruning epochs n_prune" + (" (schedule)" if schedule else " (measured)"), f"{est.n_prune}"),
        ("n_prune by Formulas 3/4 as printed", formula),
        ("prune fraction", f"{est.prune_fraction:.2f}"),
        ("full epoch T*b", f"{est.epoch_seconds:.3f}{unit}"),
        ("overhead per pruning epoch t_0", f"{est.overhead_per_pruning_epoch:.4f}{unit}"),
        ("t_regular", f"{est.t_regular:.2f}{unit}"),
        ("t_prune", f"{est.t_prune:.2f}{unit}"),
        ("t_save", f"{est.t_save:.2f}{unit}"),
        ("saving", f"{est.saving_percent:.2f}%"),
    ]:
        table.add_row(label, value)
    console.result(table)
    if schedule is not None:
        console.result(render_timeline(schedule, est.epochs))


def render_timeline(schedule: PruneSchedule, epochs: int) -> Text:
    text = Text("Timeline (one row per window; ")
    text.append("#", style="bold red")
    text.append(" pruning epoch, ")
    text.append(".", style="dim")
    text.append(" regular epoch)\n")
    for first, last, marks in timeline(schedule, epochs):
        k = schedule.window_index(first)
        text.append(f"w{k:<3} a={schedule.starting_point(k):<3} {first:>4}-{last:<4} |")
        for mark in marks:
            text.append(mark, style="bold red" if mark == "#" else "dim")
        text.append("|\n")
    return text


def _pm(row: dict, name: str, digits: int, whole_from: float = math.inf) -> str:
    """'68.94±0.41': mean ± std over seeds, tight so a cell never wraps; one seed: the value.
    From `whole_from` up (mean or std) whole numbers, so a wide spread keeps the column narrow."""
    mean, std = row.get(f"{name}_mean", ""), row.get(f"{name}_std", "")
    if mean == "":
        return "—"
    if max(abs(mean), std if std != "" else 0) >= whole_from:
        digits = 0
    return f"{mean:.{digits}f}" + (f"±{std:.{digits}f}" if row["seeds"] > 1 and std != "" else "")


def _interval(row: dict, name: str) -> str:
    """'-4.39 [-6.80,-1.98]': the mean and its 90% interval; one seed: the signed value alone."""
    low, high = row.get(f"{name}_ci90_low", ""), row.get(f"{name}_ci90_high", "")
    mean = row.get(f"{name}_mean", "")
    if mean == "":
        return "—"
    return f"{mean:+.2f}" + (f" [{low:+.2f},{high:+.2f}]" if low != "" and high != "" else "")


def show_trained(summary: Any, as_json: bool) -> None:
    if as_json:
        console.print_json(summary.to_dict())
        return
    console.result(
        f"{summary.model} on {summary.dataset}: test accuracy {summary.final_accuracy:.2f}% "
        f"(best-3 {summary.best3_accuracy:.2f}%), training {summary.train_seconds:.1f}s "
        f"over {_count(summary.epochs, 'epoch')}, {_count(summary.samples_skipped, 'sample')} skipped"
    )
    console.result(f"run folder: {summary.run_dir}")


TEXT_COLUMNS = (
    "model",
    "dataset",
    "variant",
    "policy",
    "seed_list",
    "decision",
    "post_hoc",
    "cheap_alternative",
    "claim",
)


def _text(column: str) -> bool:
    return column in TEXT_COLUMNS or column.startswith("decision_") or column.endswith("_seeds")


def _json_rows(rows: list[dict]) -> list[dict]:
    """A number a row lacks (one seed's interval) is null, not ''."""
    return [{k: None if v == "" and not _text(k) else v for k, v in r.items()} for r in rows]


def show_compare(
    rows: list[dict],
    as_json: bool = False,
    out: str | None = None,
    verdict: Any = None,
    looks: Any = None,
    collapsed: Any = (),
    compressed: Any = (),
    loaded: Any = (),
) -> None:
    """`compare`'s table and decisions; with planned looks, `looks` (their record) in --json.
    `loaded`: the lines on runs that waited for their cores (`analysis.render.load`), shown first."""
    if as_json:
        console.print_json({"rows": _json_rows(rows), "looks": looks} if looks else _json_rows(rows))
        return
    _show_loaded(loaded)
    if rows:
        _compare_table(rows)
    _show_verdict(verdict)
    _show_collapsed(collapsed)
    _show_compression(compressed)
    if out is not None:
        console.result(f"run folders: {out}  (tables and plots: fineprune report {out})")


COLUMNS = ("row", "n", "train s", "saved %", "skip %", "final %", "Δ final pt [90%]")
CPU_SAVED = "cpu saved %"  # the saved column of a table whose runs waited for their cores
TABLE_NOTE = (
    "n: seeds; mean±std over them. saved: time saved against regular of the same seed, same machine only, "
    "and only comparable where that machine was otherwise idle (runs.csv of `report` gives each run's load; "
    "where the runs waited for their cores, cpu saved: the same in the process's CPU seconds); "
    "skip: sample-epochs skipped against regular's schedule; Δ final: final accuracy − regular's, "
    "paired by seed, with a descriptive 90% interval on its own paired spread. Full columns: summary.csv."
)


def _show_verdict(verdict: Any) -> None:
    """The decisions: the family sentence, the table (within 100 columns), each chain and context."""
    if verdict is None:
        return
    console.result(Text(_plain(verdict.intro)))
    if verdict.rows:
        table = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            collapse_padding=True,
            title="Decisions",
            title_justify="left",
            width=100,
        )
        for i, name in enumerate(verdict.header):
            table.add_column(name, overflow="fold", max_width=None if i else ROW_WIDTH)
        for row in verdict.rows:
            table.add_row(*(Text(c) for c in row))
        console.result(table)
    for line in verdict.details:
        console.result(Text(_plain(line)))


def _show_loaded(shown: Any) -> None:
    """Runs that waited for their cores: the saving in CPU time first (`analysis.render.load`)."""
    if shown:
        console.result(Text(_plain("\n".join([*shown, ""]))))


def _show_collapsed(found: Any) -> None:
    """Runs that collapsed, named after the decisions they are part of."""
    from ..analysis.read.collapse import lines

    shown = lines(list(found))
    if shown:
        console.result(Text("\n".join(["", *shown])))


def _show_compression(found: Any) -> None:
    """Shorter arms off regular's learning-rate schedule, or not checked, after the decisions."""
    from ..analysis.group.compression import lines

    shown = lines(list(found))
    if shown:
        console.result(Text("\n".join(["", *shown])))


def _plain(markdown: str) -> str:
    """The verdict's Markdown emphasis left out on a terminal."""
    return markdown.replace("**", "").replace("*", "")


def _compare_table(rows: list[dict]) -> None:
    """One table per group of rows that share a regular baseline, each under 100 columns wide:
    numbers never wrap; a long row name folds rather than being cut. Where a group's runs waited for
    their cores, its saved column is the saving in CPU time."""
    from ..analysis.group.timing import LOADED

    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["dataset"], r.get("variant", "")), []).append(r)
    for (model, dataset, variant), members in groups.items():
        loaded = any(isinstance(r.get("cpu_share_low"), float) and r["cpu_share_low"] < LOADED for r in members)
        table = Table(
            title=Text(f"{model} on {dataset}" + (f" (regular: {variant})" if variant else "")),
            box=box.SIMPLE_HEAD,
            show_edge=False,
            collapse_padding=True,
            title_justify="left",
        )
        for name in COLUMNS:
            name = CPU_SAVED if loaded and name == "saved %" else name
            table.add_column(
                name,
                justify="left" if name == "row" else "right",
                overflow="fold" if name == "row" else "ellipsis",
                no_wrap=name != "row",
                max_width=ROW_WIDTH if name == "row" else None,
            )
        for r in members:
            table.add_row(
                Text(r["policy"]),
                str(r["seeds"]),
                _pm(r, "train_s", 1, 100),
                _pm(r, "cpu_saved_pct" if loaded else "saved_pct", 1, 10),
                _pm(r, "skipped_pct", 1),
                _pm(r, "final_acc", 2),
                _interval(r, "d_final"),
            )
        console.result(table)
    console.result(TABLE_NOTE)


ROW_WIDTH = 26  # the row name's column: the numbers beside it take the rest of 100 columns


def show_report(rep: Any, as_json: bool) -> None:
    from ..analysis.render.summary import summary_rows

    rows = summary_rows(rep.study) if rep.runs else []
    if as_json:
        console.print_json(
            {
                "out": str(rep.out),
                "runs": [str(r.path) for r in rep.runs],
                "problems": [{"path": str(p.path), "status": p.status, "reason": p.reason} for p in rep.problems],
                "files": [str(f) for f in rep.files],
                "verdict": rep.verdict.markdown() if rep.verdict else [],
                "decisions": _json_rows(rows),
                "collapsed": [{"path": str(c.run.path), "reason": c.reason} for c in rep.study.collapsed],
                "compression": [
                    {"arm": a.name, "schedule": a.state, "seeds_off": sorted(a.off)} for a in rep.study.compression
                ],
            }
        )
        return
    from ..analysis.render.load import lines

    _show_loaded(lines(rep.study))
    if rows:
        _compare_table(rows)
    _show_verdict(rep.verdict)
    _show_collapsed(rep.study.collapsed)
    _show_compression(rep.study.compression)
    for p in rep.problems:
        console.info(f"left out {p.path}: {p.status} ({p.reason})")
    count = len({(r["model"], r["dataset"], r["variant"], r["policy"]) for r in rows})
    console.result(
        f"{_count(count, 'row')} (runs that share every setting but the seed) from "
        f"{_count(len(rep.runs), 'run')}, {len(rep.problems)} left out; "
        f"tables and plots in {rep.out} (start at {rep.out / 'index.md'})"
    )


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def show_scale(done: tuple[list[dict], Path] | None, node_rank: int, as_json: bool) -> None:
    if done is None:  # another node of a multi-node scale: node rank 0 writes the tables
        if as_json:
            console.print_json({"node_rank": node_rank, "tables": None})
        else:
            console.result(f"node {node_rank}: runs done; node rank 0 writes the tables")
        return
    rows, path = done
    if as_json:
        console.print_json(rows)
        return
    show_rows(
        [{short: r[name] for name, short in SCALE_COLUMNS.items()} for r in rows],
        "Scaling (one thread per process; speedup against 1 sync process)",
    )
    console.result(f"all columns: {path} and {path.with_suffix('.csv')} (explained in {path.name})")


# the scale table's columns a terminal shows, with headers short enough to fit 100 columns whole
SCALE_COLUMNS = {
    "mode": "mode",
    "workers": "workers",
    "servers": "servers",
    "nodes": "nodes",
    "processes": "procs",
    "images_per_s": "images/s",
    "speedup": "speedup",
    "efficiency": "efficiency",
    "final_accuracy": "final %",
    "seconds_to_accuracy": "s to acc",
    "train_seconds": "train s",
}


def show_policies(as_json: bool) -> None:
    from ..pruning.registry import get, list_policies

    entries = [{"name": n, "label": get(n).label, "description": get(n).help} for n in list_policies()]
    if as_json:
        console.print_json(entries)
        return
    table = Table(title="Pruning policies")
    for column in ("name", "label", "description"):
        table.add_column(column)
    for e in entries:
        table.add_row(*(Text(e[k]) for k in ("name", "label", "description")))
    console.result(table)


def show_rows(rows: list[dict], title: str) -> None:
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    for name in rows[0]:
        table.add_column(name.replace("_", " "), justify="right", no_wrap=True)
    for r in rows:
        table.add_row(*[str(v) for v in r.values()])
    console.result(table)

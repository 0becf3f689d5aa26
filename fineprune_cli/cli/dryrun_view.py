"""What `--dry-run` and `--print-config` print: the plan of a run or a comparison, as text or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from .. import console
from ..engine.setup.yamlvalues import dump


def show_config(config: dict[str, Any], as_json: bool) -> None:
    """The resolved config: YAML that `--config` reads back (JSON with --json). A config file
    may not write outside its working folder, so an absolute or '..' output folder becomes a
    comment that says to pass it as --out."""
    if as_json:
        console.print_json(config)
        return
    config, notes = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}, []
    for section, key, listed in (("model", "name", "models"), ("data", "dataset", "datasets")):
        # compare's --model/--dataset fill compare.models/datasets: an empty model.name beside
        # them read as a model without a name (issue 41)
        if (config.get(section) or {}).get(key) == "" and (config.get("compare") or {}).get(listed):
            del config[section][key]
    for section in ("run", "compare"):
        out = (config.get(section) or {}).get("out")
        if out is not None and (Path(str(out)).is_absolute() or ".." in Path(str(out)).parts):
            del config[section]["out"]
            notes.append(
                f"# {section}.out {out} is outside the working folder, which --config refuses: pass it as --out"
            )
    console.result(Text("\n".join([dump(config).rstrip(), *notes])))


def epochs_text(epochs: list[int] | None, unplanned: str = "chosen during the run") -> str:
    """[1, 2, 3, 7] -> '1-3, 7' (4 epochs); None: `unplanned`, how the policy chooses them."""
    if epochs is None:
        return unplanned
    if not epochs:
        return "none"
    spans, first = [], epochs[0]
    for prev, cur in zip(epochs, epochs[1:] + [None]):
        if cur != prev + 1:
            spans.append(f"{first}" if first == prev else f"{first}-{prev}")
            first = cur
    return f"{', '.join(spans)} ({len(epochs)} of them)"


def duration(seconds: float) -> str:
    """A rough time for a person: '40 s', '3 min 20 s', '2 h 05 min', '3 d 4 h'."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


RANDOM_EQUAL = (
    "random-equal: a pruning epoch whose DroppingCount is empty when it selects (it opens a window, or "
    "the run), so fine-pruning leaves out there the samples its random control of the same seed leaves out"
)


def show_dry_run(dry: Any, as_json: bool) -> None:
    if as_json:
        console.print_json({"dry_run": True, **dry.to_dict()})
        return
    console.result("Dry run: nothing is trained, nothing is written. Resolved settings:")
    show_config(dry.config, False)
    table = Table(title=f"{len(dry.runs)} run{'s' if len(dry.runs) != 1 else ''} planned", title_justify="left")
    for name in ("model", "data", "arm", "seeds", "epochs", "pruning epochs", "per run"):
        table.add_column(name, justify="right" if name in ("epochs", "per run") else "left")
    for runs in _arms(dry.runs).values():
        first = runs[0]
        each = "?" if first.seconds is None else "~" + duration(first.seconds)
        pruning = epochs_text(first.pruning_epochs, first.unplanned or "chosen during the run")
        if first.pruning_epochs:
            pruning += f", {100 * first.prune_fraction:g}% left out"
        if first.random_equal_epochs:
            every = first.random_equal_epochs == first.pruning_epochs
            pruning += "; all random-equal" if every else f"; random-equal: {epochs_text(first.random_equal_epochs)}"
        table.add_row(
            Text(first.model),
            Text(first.dataset),
            Text(first.arm),
            ",".join(str(r.seed) for r in runs),
            str(first.epochs),
            Text(pruning),
            each,
        )
    console.result(table)
    if any(r.random_equal_epochs for r in dry.runs) and not dry.random_equal:  # else the line says it
        console.result(RANDOM_EQUAL)
    for line in dry.random_equal:
        console.result(Text(line))
    if dry.shared_schedules:
        console.result(dry.shared_schedules)
    folders = sorted({r.run_dir for r in dry.runs})
    console.result(
        f"run folder{'s' if len(folders) > 1 else ''}: "
        + (folders[0] if len(folders) == 1 else f"{len(folders)} under {_common(folders)}")
    )
    done = sum(r.state in ("complete", "diverged") for r in dry.runs)
    if done:
        console.result(f"{done} of {len(dry.runs)} runs already finished there: compare would skip them")
    console.result(estimate_text(dry))
    if dry.schedule_check:
        console.result(dry.schedule_check)


def estimate_text(dry: Any) -> str:
    """The time line: one figure, a range for --until-decided (and Slurm), or why there is none."""
    one = dry.one_thread_seconds
    faster = (
        ""
        if one is None
        else (
            f"\nwith 1 thread a run, at this load: ~{duration(one)} (set OMP_NUM_THREADS=1 "
            "for train, --threads 1 for compare)"
        )
    )
    if dry.estimated_seconds is None:
        return f"no time estimate: {dry.cannot_estimate}{faster}"
    todo = sum(r.state in ("new", "incomplete") for r in dry.runs)
    how = {0: "as many at once as the queue allows", 1: "one after the other"}.get(
        dry.pace.at_once, f"{dry.pace.at_once} at once"
    )
    what = f"{todo} run to train" if todo == 1 else f"{todo} runs to train{' at most' * bool(dry.looks)}, {how}"
    fewest, most = about(dry.fewest_seconds, dry.fewest_range), about(dry.estimated_seconds, dry.estimated_range)
    if dry.looks:
        span = (
            f"{fewest} if the first look ({dry.looks[0]} seeds) decides every "
            f"policy, up to {most} for all {len(dry.looks)} looks "
            f"({', '.join(map(str, dry.looks))} seeds)"
        )
    elif dry.fewest_seconds != dry.estimated_seconds:
        span = f"{fewest} to {most}"
    else:
        span = most
    spread = max((p.spread() for p in dry.probes.values()), default=1.0)
    noisy = (
        f"\n(in brackets: at the pace of the probe's fastest and slowest timed repeat, {spread:.2g}x apart; "
        "the machine's pace is not steady, so the runs may go at either)"
        if dry.estimated_range and not dry.range_note
        else f"\n({dry.range_note})"
        if dry.range_note and (dry.estimated_range or dry.fewest_range)
        else ""
    )
    return f"estimated time on {dry.device}: {span} ({what})\n({dry.note}){noisy}{faster}"


def about(seconds: float, span: tuple[float, float] | None) -> str:
    """'~12 min 30 s', or with a noisy probe '~12 min 30 s (~9 min 10 s to ~20 min 00 s)'."""
    text = f"~{duration(seconds)}"
    return text if span is None else f"{text} (~{duration(span[0])} to ~{duration(span[1])})"


def _arms(runs: list[Any]) -> dict[tuple, list[Any]]:
    grouped: dict[tuple, list[Any]] = {}
    for r in runs:
        grouped.setdefault((r.model, r.dataset, r.arm), []).append(r)
    return grouped


def _common(paths: list[str]) -> str:
    import os.path

    return os.path.commonpath(paths) or "."

"""The report's tables, formatted from the study's numbers, comparisons and reach of each row
(`analysis.study`, made once): the paper's Tables 1 and 2, and Table 3 (time-to-accuracy). Every
policy present gets its rows, named by the policy registry's label; a row a column lacks reads '—'.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ...arms import REGULAR
from ..decide import decision
from ..group import paired, timing
from ..group.groups import Context, pruned_policies
from ..group.reach import Reach
from ..group.rownumbers import NA, RowNumbers, Stat
from ..read.runs import Run, policy_label
from ..study import Study

PAPER_FILE = Path(__file__).with_name("paper_results.yaml")


@lru_cache(maxsize=1)
def paper_results() -> dict[str, Any]:
    return yaml.safe_load(PAPER_FILE.read_text())


def display_name(model: str) -> str:
    return paper_results()["models"].get(model, {}).get("name", model)


def context_title(context: Context) -> str:
    """'LeNet-5 on CIFAR-10 (JPEG q75)', and how its regular run differs where there are several."""
    return f"{display_name(context.model)} on {context.label}" + (f" ({context.variant})" if context.variant else "")


def interval_text(p: paired.Paired, quantum: float, unit: str = " pt") -> str:
    """'-0.31 [-1.22, +0.60] pt (n 3)': the descriptive 90% interval on the comparison's own
    paired spread; without a spread to judge by, the value alone."""
    e = decision.estimate(p, quantum)
    if e is not None:
        return f"{e.fmt()}{unit} (n {e.n})"
    if len(p.diffs) > 1:
        return f"{p.mean:+.2f}{unit} (n {len(p.diffs)}, no spread to judge by: no interval)"
    return f"{p.mean:+.2f}{unit} (1 seed, no interval)" if p.diffs else NA


def _columns(groups) -> list[tuple[Context, str]]:
    """Column titles: the model, with the dataset and the regular variant where they vary."""
    labels, variants = {c.label for c in groups}, {c.variant for c in groups}
    return [
        (
            c,
            display_name(c.model)
            + (f" ({c.label})" if len(labels) > 1 else "")
            + (f" ({c.variant})" if len(variants) > 1 and c.variant else ""),
        )
        for c in groups
    ]


PAPER_DATASET = re.compile(r"cifar-?10(?!\d)", re.IGNORECASE)  # CIFAR-10, not CIFAR-100


def paper_entry(model: str, label: str, by: dict[str, dict[int, Run]] | None = None) -> dict[str, Any] | None:
    """The paper's row for this model, where the runs' dataset is the paper's: CIFAR-10 (the
    built-in one or an image folder labelled so, as the JPEG copy is) and fineprune's trainer
    made them. On another dataset its CIFAR-10 figures compare with nothing, and a user's script
    named 'lenet' is another recipe than the paper's LeNet: the tables leave them out."""
    if by and any(r.is_script for seeds in by.values() for r in seeds.values()):
        return None
    entry = paper_results()["models"].get(model)
    return entry if entry and PAPER_DATASET.search(label) else None


def _paper(entry: dict[str, Any], key: str, fmt: str) -> str:
    return fmt.format(entry[key])


def _table(found: Study, cells) -> tuple[list[str], list[list[str]]]:
    """Rows by name, one column per (model, dataset); `cells(found, context, by_policy)` gives
    a column as (row name, text) pairs. A row a column lacks reads '—'."""
    cols = _columns(found.groups)
    body: dict[str, list[str]] = {}
    for i, (context, _) in enumerate(cols):
        for name, text in cells(found, context, found.groups[context]):
            body.setdefault(name, [NA] * len(cols))[i] = text
    return [""] + [c for _, c in cols], [[name] + vals for name, vals in body.items()]


def _seeds(seeds: dict[int, Run]) -> str:
    """'5 (0 1 2 3 4)': how many, and which, so a row with fewer seeds than regular shows it."""
    return f"{len(seeds)} ({' '.join(map(str, sorted(seeds)))})"


def _time_cells(found: Study, context: Context, by: dict[str, dict[int, Run]]) -> list[tuple[str, str]]:
    reg = found.numbers[context, REGULAR]
    cells = [
        ("Dataset", context.label),
        ("Seeds", _seeds(by.get(REGULAR, {}))),
        ("Regular", reg.train_s.fmt(1, " s")),
        ("Regular: sample-epochs trained", reg.sample_epochs.fmt(2)),
        ("Regular: optimizer steps", reg.steps.fmt(0)),
    ]
    runs = [r for seeds in by.values() for r in seeds.values()]
    loaded = timing.load_of(runs) is not None
    timed = any(timing.cpu_seconds(r) is not None for r in runs)  # runs made before CPU time was recorded: no row
    for p in pruned_policies(by):
        st, name = found.numbers[context, p], policy_label(p)
        cpu = [(f"{name}: saved in CPU time (same machine)", _cpu_text(st))] if timed else []
        cells += [
            (name, st.pruned_s.fmt(1, " s")),
            (f"{name}: seeds", _seeds(by[p])),
            (f"{name}: overhead", st.overhead_s.fmt(2, " s")),
            *(cpu if loaded else []),  # where other work stretched the clock, the figure to trust first
            (f"{name}: saved (same machine)", _saved_text(st)),
            (f"{name}: whole run saved (same machine, test passes included)", _clock_text(st)),
            *([] if loaded else cpu),
            (f"{name}: saved at own pace", st.pace_saved_pct.fmt(2, "%")),
            (f"{name}: sample-epochs skipped", st.budget_pct.fmt(2, "%")),
            (f"{name}: sample-epochs trained", st.sample_epochs.fmt(2)),
            (f"{name}: optimizer steps", st.steps.fmt(0)),
            (f"{name}: pruned epoch / full epoch", st.epoch_ratio.fmt(3, "×")),
        ]
    entry = paper_entry(context.model, context.label, by)
    if entry is None:
        return cells
    return cells + [
        ("Paper regular (CIFAR-10)", _paper(entry, "regular_s", "{:g} s")),
        ("Paper pruned (CIFAR-10)", _paper(entry, "pruned_s", "{:g} s")),
        ("Paper overhead (CIFAR-10)", _paper(entry, "overhead_s", "{:.2f} s")),
        ("Paper saved (CIFAR-10)", _paper(entry, "speedup_pct", "{:.2f}%")),
    ]


def _saved_text(st: RowNumbers) -> str:
    """Time saved over the seeds whose pair ran on one machine; the others are counted, not used."""
    saved, left = st.saved_pct, st.not_timed
    if not saved.values:
        return f"not compared ({', '.join(sorted({x.reason for x in left}))})" if left else NA
    pairs = len(saved.values)
    return saved.fmt(2, "%") + (f" ({pairs} of {pairs + len(left)} pairs)" if left else "")


def _clock_text(st: RowNumbers) -> str:
    """The saving on the user's clock, over the pairs *saved* compares that recorded it."""
    clock, pairs = st.clock_saved_pct, len(st.saved_pct.values)
    if not clock.values:
        return "not recorded" if pairs else NA
    return clock.fmt(2, "%") + (f" ({len(clock.values)} of {pairs} pairs)" if len(clock.values) < pairs else "")


def _cpu_text(st: RowNumbers) -> str:
    """The saving in CPU seconds, over the pairs *saved* compares that recorded them."""
    cpu, pairs = st.cpu_saved_pct, len(st.saved_pct.values)
    if not cpu.values:
        return "not recorded" if pairs else NA
    return cpu.fmt(2, "%") + (f" ({len(cpu.values)} of {pairs} pairs)" if len(cpu.values) < pairs else "")


def _accuracy_cells(found: Study, context: Context, by: dict[str, dict[int, Run]]) -> list[tuple[str, str]]:
    reg, q = found.numbers[context, REGULAR], found.quanta[context]
    cells = [
        ("Dataset", context.label),
        ("Seeds", _seeds(by.get(REGULAR, {}))),
        ("Regular (best-3, selected on the test set)", reg.best3_acc.fmt(2, "%")),
        ("Regular (final)", reg.final_acc.fmt(2, "%")),
    ]
    for p in pruned_policies(by):
        st, vs, name = found.numbers[context, p], found.compared[context, p], policy_label(p)
        cells += [
            (f"{name}: seeds", _seeds(by[p])),
            (f"{name} (best-3, selected on the test set)", st.best3_acc.fmt(2, "%")),
            (f"{name} − regular (best-3; mean ± std, descriptive)", st.d_best3.fmt(2, " pt")),
            (f"{name} (final)", st.final_acc.fmt(2, "%")),
            (f"{name} − regular (final)", interval_text(vs.regular, q)),
        ]
        cells += [(f"{name} − {_short(c.against)} (final)", interval_text(c, q)) for c in vs.controls()]
    entry = paper_entry(context.model, context.label, by)
    if entry is None:
        return cells
    return cells + [
        ("Paper regular (CIFAR-10)", _paper(entry, "regular_acc", "{:.2f}%")),
        ("Paper pruned (CIFAR-10)", _paper(entry, "pruned_acc", "{:.2f}%")),
        ("Paper pruned − regular (CIFAR-10)", f"{entry['pruned_acc'] - entry['regular_acc']:.2f} pt"),
    ]


def _short(against: str) -> str:
    if against == paired.SHORTER_LINE:
        return "fewer epochs at its budget"
    return "random control" if "control" in against else "random frontier at its budget"


def _reach_cells(found: Study, context: Context, by: dict[str, dict[int, Run]]) -> list[tuple[str, str]]:
    target = found.targets[context]
    if target is None:
        return [("Dataset", context.label), ("Target (test accuracy)", NA)]
    machine = timing.reference_signature([r for seeds in by.values() for r in seeds.values()])
    cells = [
        ("Dataset", context.label),
        ("Seeds", _seeds(by.get(REGULAR, {}))),
        ("Target (test accuracy)", f"{target:.2f}%"),
        ("Seconds measured on", machine or f"{NA} ({timing.UNKNOWN})"),
    ]
    for p in by:
        cells += _row_reach_cells(
            "Regular" if p == REGULAR else policy_label(p), by[p], found.reach[context, p], machine
        )
    return cells


def _row_reach_cells(name: str, seeds: dict[int, Run], reach: Reach, machine: str | None) -> list[tuple[str, str]]:
    """A row's reach: how many seeds, the epoch, sample-epochs and (on `machine` only) seconds."""
    reached = reach.reached()
    timed = [x.seconds for s, x in reached.items() if timing.signature(seeds[s]) == machine]
    last = max(r.summary.epochs for r in seeds.values())
    return [
        (
            f"{name}: reached",
            f"{len(reached)} of {len(seeds)} seeds"
            + (f" (the others not by epoch {last}: censored)" if len(reached) < len(seeds) else ""),
        ),
        (f"{name}: epoch", Stat([float(x.epoch) for x in reached.values()]).fmt(1)),
        (f"{name}: sample-epochs", Stat([x.sample_epochs for x in reached.values()]).fmt(2)),
        (
            f"{name}: seconds",
            Stat(timed).fmt(1, " s") + (f" ({len(timed)} run{'s' if len(timed) > 1 else ''})" if timed else ""),
        ),
    ]


def table1(found: Study) -> tuple[list[str], list[list[str]]]:
    """Time: the paper's rows (regular, pruned, overhead, saved) for every policy present, and
    the machine-independent costs (sample-epochs, optimizer steps)."""
    return _table(found, _time_cells)


def table2(found: Study) -> tuple[list[str], list[list[str]]]:
    """Accuracy: best-3 and final with their spread over seeds; final changes with descriptive
    90% intervals (on their own paired spread: the judging settings do not change them)."""
    return _table(found, _accuracy_cells)


def table3(found: Study) -> tuple[list[str], list[list[str]]]:
    """Time-to-accuracy at the target of the study's judging: the first epoch at it, its
    sample-epochs and seconds."""
    return _table(found, _reach_cells)

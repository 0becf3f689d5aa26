"""Where a report's runs waited for their cores (`analysis.group.timing.Load`): the saving in CPU
time for every pruned row, ahead of the tables, with which figure to trust. Other work on the
machine stretches a run's clock by whatever it takes, not the process's own CPU seconds (issue
55: savings on the clock read at a load many times the cores with no word that they meant
nothing there); index.md, `compare` and `report` lead with these lines."""

from __future__ import annotations

from ..group import timing
from ..group.groups import pruned_policies
from ..group.rownumbers import RowNumbers
from ..read.runs import policy_label
from ..study import Study
from .tables import context_title


def _figure(st: RowNumbers) -> str:
    cpu, clock = st.cpu_saved_pct, st.saved_pct
    pairs = f" ({len(cpu.values)} pair{'s' if len(cpu.values) != 1 else ''})" if cpu.values else ""
    said = f"{cpu.fmt(1, '%')} saved in CPU time{pairs}" if cpu.values else "no CPU time recorded for its pairs"
    return said + (f"; on the clock {clock.fmt(1, '%')}" if clock.values else "")


def lines(found: Study) -> list[str]:
    """A paragraph and a list per context whose runs waited for their cores; [] where none did."""
    out: list[str] = []
    for context, by in found.groups.items():
        runs = [r for seeds in by.values() for r in seeds.values()]
        load = timing.load_of(runs)
        if load is None:
            continue
        script = (
            " (a script run's CPU time is its whole epochs', test passes included)"
            if any(r.is_script for r in runs)
            else ""
        )
        out.append(
            f"{context_title(context)}: {load.text()}. Their clock times measure that load as much as the "
            f"policies, so the saving in CPU time, which other work does not stretch, is the figure to trust "
            f"here, not *saved (same machine)* on the clock{script}:"
        )
        out.append("\n".join(f"- {policy_label(p)}: {_figure(found.numbers[context, p])}" for p in pruned_policies(by)))
    return out

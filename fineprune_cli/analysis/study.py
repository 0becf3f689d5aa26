"""One study per report: the runs, the judging plan they were made under, and the report's one
family of decisions, computed once. Every renderer (the verdict, summary.csv, index.md, the
terminal tables of `compare` and `report`) reads the decisions from here and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from . import plan as plans_
from .collapse import Collapse, collapsed
from .decision import Decision
from .groups import Groups, group
from .judging import Judging
from .plan import Plan
from .runs import Run
from .sequence import Look, disagreements, replay, single


@dataclass(frozen=True)
class Study:
    runs: list[Run]
    groups: Groups  # the runs grouped into contexts and rows, once for every renderer
    judging: Judging
    decisions: list[Decision]
    plans: list[Plan] = field(default_factory=list)
    post_hoc: list[str] = field(default_factory=list)  # why these decisions are not the planned ones
    looks: tuple[int, ...] = ()  # the planned looks replayed (() without a looks plan)
    replayed: list[Look] = field(default_factory=list)
    beyond: list[int] = field(default_factory=list)  # seeds present past the last planned look
    collapsed: list[Collapse] = field(default_factory=list)  # named beside the decisions, kept in them
    recorded: list[str] = field(default_factory=list)  # where a looks.json says otherwise than the replay

    @property
    def decision_of(self) -> dict[tuple[object, str], Decision]:
        return {(d.context, d.policy): d for d in self.decisions}


def study(runs: list[Run], judging: Judging | None = None, plans: list[Plan] | None = None) -> Study:
    """Decide `runs` under `judging` (default: the one plan recorded, else the defaults)."""
    plans = list(plans or [])
    agreed = plans_.agreed(plans)
    judging = judging or (agreed.judging if agreed else Judging())
    looks = agreed.looks if agreed else ()
    reasons = plans_.post_hoc(plans, judging)
    groups = group(runs)
    failed = collapsed(runs)
    if not looks:
        return Study(runs, groups, judging, single(groups, judging), plans, reasons, collapsed=failed)
    decisions, replayed = replay(groups, judging, looks)
    beyond = sorted({r.seed for r in runs if r.seed >= looks[-1]})
    return Study(runs, groups, judging, decisions, plans, reasons, looks, replayed, beyond, failed)


def for_folders(runs: list[Run], paths: list[Path], judging: Judging | None = None) -> Study:
    """The study of the runs read from `paths`, with the plans recorded there and what their
    looks.json files say otherwise."""
    found = study(runs, judging, plans_.find(paths))
    return replace(found, recorded=disagreements(paths, found.decisions))

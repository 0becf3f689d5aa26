"""One study per report: the runs, the judging plan they were made under, each row's numbers and
paired comparisons, each context's quantum and time-to-accuracy target and each row's reach of
it, and the report's one family of decisions, computed once. Every renderer (the verdict,
summary.csv, runs.csv, index.md, the plots, the terminal tables of `compare` and `report`) reads
them from here and neither groups, decides nor recomputes a row's numbers or its reach.

The fourth of analysis's five stages: the one place that puts the first three together (it reads,
groups and decides), below `render/`, which formats what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..arms import REGULAR
from .decide import plan as plans_
from .decide.decision import Decision, scored
from .decide.judging import Judging
from .decide.leftout import mark
from .decide.plan import Plan
from .decide.sequence import Look, decidable, disagreements, replay, single
from .decide.shape import Measured, measured
from .group.compression import Compression, compression
from .group.groups import Context, Groups, group
from .group.reach import Quanta, Reaches, Targets, reaching
from .group.rownumbers import Compared, RowNumbers, compared, row_numbers
from .read.collapse import Collapse, collapsed
from .read.planruns import applying, made_under, nearest, recorded
from .read.runs import Problem, Run

Rows = dict[tuple[Context, str], RowNumbers]  # by (context, row name)
Comparisons = dict[tuple[Context, str], Compared]


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
    compression: list[Compression] = field(default_factory=list)  # each shorter arm's lr against regular's
    recorded: list[str] = field(default_factory=list)  # where a looks.json says otherwise than the replay
    # every row of `groups`, and each context's regular (present or not: a row's numbers quote it)
    numbers: Rows = field(default_factory=dict)
    compared: Comparisons = field(default_factory=dict)
    quanta: Quanta = field(default_factory=dict)  # each context's test-set quantum (pt per image)
    targets: Targets = field(default_factory=dict)  # each context's time-to-accuracy target
    reach: Reaches = field(default_factory=dict)  # every row of `groups` at its context's target
    left_out: list[Problem] = field(default_factory=list)  # the runs read but not judged (`with_left_out`)
    shape: Measured | None = None  # the shape the decisions' own differences show

    @property
    def decision_of(self) -> dict[tuple[object, str], Decision]:
        return {(d.context, d.policy): d for d in self.decisions}


def study(
    runs: list[Run], judging: Judging | None = None, plans: list[Plan] | None = None, by_folder: bool = False
) -> Study:
    """Decide `runs` under `judging` (default: the one plan recorded, else the defaults). `plans`:
    the plan compare recorded for these runs, or (`by_folder`) those found in the folders read,
    each applying to the runs below it (`planruns.nearest`)."""
    plans = applying(list(plans or []), [r.path for r in runs]) if by_folder else list(plans or [])
    owners = [nearest(plans, r.path) if by_folder else (plans[0] if plans else None) for r in runs]
    agreed = plans_.agreed(plans)
    judging = judging or (agreed.judging if agreed else Judging())
    looks = agreed.looks if agreed else ()
    groups = group(runs)
    off = plans_.off_plan(agreed, judged(groups)) if agreed else []
    reasons = (
        plans_.post_hoc(plans, judging)
        + made_under(plans, [(recorded(r.summary.plan, r.config), o) for r, o in zip(runs, owners)])
        + off
    )
    # the plan's k where the report stays inside its family: a part of it is judged at the planned level
    k = agreed.family.size if agreed and agreed.family and not off else None
    numbers, vs = rows_of(groups)
    quanta, targets, reach = reaching(groups, judging.target)
    made = Study(
        runs,
        groups,
        judging,
        [],
        plans,
        reasons,
        collapsed=collapsed(runs),
        compression=compression(groups),
        numbers=numbers,
        compared=vs,
        quanta=quanta,
        targets=targets,
        reach=reach,
    )
    if not looks:
        decided = single(groups, judging, k, agreed.seeds if agreed and not off else ())
        return _measured(replace(made, decisions=decided), agreed)
    decisions, replayed = replay(groups, judging, looks, family=k)
    beyond = sorted({r.seed for r in runs if r.seed >= looks[-1]})
    return _measured(replace(made, decisions=decisions, looks=looks, replayed=replayed, beyond=beyond), agreed)


def _measured(found: Study, plan: Plan | None) -> Study:
    """The study with the shape its differences show, and post hoc where a plan that predates the
    failure rule had runs set aside by it (the claims then moved to the runs that did not fail)."""
    named = [
        (f"{d.policy} − {c.against}", [(s, c.diffs[s]) for s in c.seeds])
        for d in found.decisions
        for c in (d.regular, d.cheap)
        if c is not None
    ]
    reasons = list(found.post_hoc)
    aside = {(f.arm, f.seed) for d in found.decisions for f in d.failures}
    if plan is not None and "failure" in plan.unrecorded and aside:
        reasons.append(f"the plan predates the failure rule, and it set {len(aside)} run{'s' * (len(aside) > 1)} aside")
    return replace(found, shape=measured(named), post_hoc=list(dict.fromkeys(reasons)))


def judged(groups: Groups) -> plans_.Judged:
    """The scored policies a report decides, its contexts, and the seeds that pair a policy
    with regular: what the plan's family and seeds are checked against."""
    at = decidable(groups)
    names = tuple(p for by in at.values() for p in scored(by))
    seeds = {s for by in at.values() for p in scored(by) for s in by[p] if s in by[REGULAR]}
    return plans_.Judged(names, len(at), frozenset(seeds))


def rows_of(groups: Groups) -> tuple[Rows, Comparisons]:
    """Each row's comparisons, and its numbers from them; each context's regular's too, present
    or not (its numbers are quoted beside every row's)."""
    vs = {(c, p): compared(by, p) for c, by in groups.items() for p in dict.fromkeys([REGULAR, *by])}
    return {(c, p): row_numbers(groups[c], p, found) for (c, p), found in vs.items()}, vs


def for_folders(runs: list[Run], paths: list[Path], judging: Judging | None = None) -> Study:
    """The study of the runs read from `paths`, with the plans recorded there and what their
    looks.json files say otherwise."""
    found = study(runs, judging, plans_.find(paths), by_folder=True)
    return replace(found, recorded=disagreements(paths, found.decisions))


def with_left_out(found: Study, problems: list[Problem]) -> Study:
    """The study with its decisions marked by the runs left out (`decide.leftout.mark`) and the
    problems kept for the verdict's rows (`render.leftout`)."""
    return replace(found, decisions=mark(found.decisions, problems), left_out=list(problems))

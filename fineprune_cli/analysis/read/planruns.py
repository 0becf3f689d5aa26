"""Which judging plan applies to which run, and whether the runs were made under it.

A plan applies to the runs below its own folder, each run keeping to the nearest plan above it:
a folder that holds its own plan is judged by it, never by one found in a folder above, and the
names of sibling folders change nothing. Each run records in its summary.json the digest of the
plan in force when it was made (`plan`: '' with none, absent from runs made before runs recorded
it), so a plan.json edited after its runs, written over runs made without it, or found above
another comparison's runs is told apart from the plan those runs were made under.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence, TypeVar


class Planned(Protocol):
    """What this module reads of a plan (analysis.decide.plan.Plan)."""

    @property
    def path(self) -> Path | None: ...
    @property
    def digest(self) -> str: ...
    @property
    def runs_before(self) -> int: ...


P = TypeVar("P", bound=Planned)


def nearest(plans: Sequence[P], run: Path) -> P | None:
    """The plan in the deepest folder above `run`; a plan with no file (the one a compare holds
    as it runs) applies to every run."""
    here = run.resolve()
    best: tuple[int, P] | None = None
    for plan in plans:
        if plan.path is None:
            return plan
        folder = plan.path.resolve().parent
        if folder == here or folder in here.parents:
            depth = len(folder.parts)
            best = best if best is not None and best[0] >= depth else (depth, plan)
    return best[1] if best else None


def applying(plans: list[P], runs: Sequence[Path]) -> list[P]:
    """The plans nearest to at least one of `runs` (all of them when there are no runs)."""
    if not runs:
        return plans
    used = {id(p) for p in (nearest(plans, run) for run in runs) if p is not None}
    return [p for p in plans if id(p) in used]


LOST = "(lost)"  # the digest of a run whose summary.json lost the plan its config.yaml records


def recorded(summary_plan: str | None, config: dict) -> str | None:
    """The plan digest a run records: its summary.json's; LOST where that key is gone but the
    run's config.yaml has `run.plan` (written by a version that records it: only a run made before
    runs recorded their plan lacks both), so an edited summary cannot pass as an older run."""
    run = config.get("run") if isinstance(config, dict) else None
    return LOST if summary_plan is None and isinstance(run, dict) and "plan" in run else summary_plan


def made_under(plans: Sequence[P], runs: Sequence[tuple[str | None, P | None]]) -> list[str]:
    """Why the runs (each the plan digest its summary records, and the plan that applies to it)
    do not keep to their plans ([] when they do): runs under no plan, runs made under another plan
    (plan.json changed after them, or another comparison's), and runs made with no plan under one
    that says it came before the first run. A run recorded before runs recorded their plan (None)
    says nothing here."""
    if not plans:
        return []
    reasons = []
    loose = sum(plan is None for _, plan in runs)
    if loose:
        reasons.append(f"{loose} of the runs lie under no plan")
    for plan in plans:
        if plan.runs_before < 0:  # read from an older looks.json: no plan, already said
            continue
        mine = [digest for digest, p in runs if p is plan]
        other = sum(digest not in (None, "", LOST, plan.digest) for digest in mine)
        without = sum(digest == "" for digest in mine)
        lost = sum(digest == LOST for digest in mine)
        name = plan.path or "the plan"
        if lost:
            reasons.append(
                f"{lost} of the runs under {name} lost the plan digest from their summary.json (their "
                "config.yaml records one): nothing shows they were made under it"
            )
        if other:
            reasons.append(
                f"{other} of the runs under {name} were made under another plan (as their summary.json "
                "records): the plan.json changed after runs were made, or the runs are another comparison's"
            )
        if without and not plan.runs_before:
            reasons.append(
                f"{name} says it was recorded before the first run, but {without} of the runs under it "
                "were made with no plan in force"
            )
    return reasons

"""The runs a report left out, in its decisions: each decision names its row's left-out runs (its
own arm's and its regular's), and a policy with a diverged run is not decided on the runs that
did not diverge (the rest would be a survivor's result): it reads *can't tell yet*, saying so."""

from __future__ import annotations

from dataclasses import replace

from ...arms import REGULAR
from ..group.paired import is_baseline
from ..read.leftout import Row, by_row, diverged, text
from ..read.runs import Problem, arm_of
from .decision import CANT_TELL, Decision


def mark(decisions: list[Decision], problems: list[Problem]) -> list[Decision]:
    """Each decision with its row's left-out runs named; one whose own runs diverged reads can't
    tell yet."""
    rows, out = by_row(problems), []
    for d in decisions:
        arm = arm_of(d.policy)
        found = [p for a in (arm, REGULAR) for p in rows.get((d.context.model, d.context.label, a), [])]
        if not found:
            out.append(d)
            continue
        lost = diverged(found, arm)
        word = CANT_TELL if lost else d.word
        why = text(found, arm) + (
            f"; a policy whose runs diverge ({len(lost)} of them) is not judged on the rest" if lost else ""
        )
        out.append(replace(d, word=word, left_out=why))
    return out


def orphans(decisions: list[Decision], problems: list[Problem]) -> dict[Row, list[Problem]]:
    """The rows of scored arms whose every run was left out: no decision holds them. A policy
    left with no run at all still gets its row, saying why (`render.leftout`)."""
    held = {(d.context.model, d.context.label, arm_of(d.policy)) for d in decisions}
    return {row: ps for row, ps in by_row(problems).items() if row not in held and not is_baseline(row[2])}


def orphan_word(row: Row, problems: list[Problem]) -> str:
    return f"{CANT_TELL} (no run to judge: {text(problems, row[2])})"

"""The runs a report leaves out, named in the rows they belong to. A row whose runs vanish
without a word reads as if those seeds were never trained: every fine-pruning run diverged once
read *can't tell yet* with no reason. So each decision says which of its row's runs (and of its
context's regular) were left out and why, and a policy with a diverged run is not decided on the
runs that did not diverge (the rest would be a survivor's result): it reads *can't tell yet*,
saying so. A policy left with no run at all still gets its row, saying why."""

from __future__ import annotations

from dataclasses import replace

from ...arms import REGULAR
from ..decide.decision import CANT_TELL, Decision
from ..group.paired import is_baseline
from .runs import Problem, arm_of, policy_label
from ..group.study import Study

Row = tuple[str, str, str]  # (model, dataset label, arm)


def by_row(problems: list[Problem]) -> dict[Row, list[Problem]]:
    rows: dict[Row, list[Problem]] = {}
    for p in problems:  # an identical record kept once is judged: nothing of its row is missing
        if p.row is not None and p.status != "duplicate":
            rows.setdefault(p.row, []).append(p)
    return rows


def text(problems: list[Problem], arm: str) -> str:
    """'runs left out: seed 0 diverged, seed 1 implausible, regular seed 2 interrupted' (a
    report's "Runs left out" gives each one's reason in full)."""

    def one(p: Problem) -> str:
        return f"{'' if p.row and p.row[2] == arm else (p.row[2] if p.row else '?') + ' '}seed {p.seed} {p.status}"

    return "runs left out: " + ", ".join(one(p) for p in problems)


def diverged(problems: list[Problem], arm: str) -> list[Problem]:
    return [p for p in problems if p.status == "diverged" and p.row is not None and p.row[2] == arm]


def mark(decisions: list[Decision], problems: list[Problem]) -> list[Decision]:
    """Each decision with its row's left-out runs (its own arm's and its regular's) named; one
    whose own runs diverged reads can't tell yet."""
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
    """The rows of scored arms whose every run was left out: no decision holds them."""
    held = {(d.context.model, d.context.label, arm_of(d.policy)) for d in decisions}
    return {row: ps for row, ps in by_row(problems).items() if row not in held and not is_baseline(row[2])}


def orphan_word(row: Row, problems: list[Problem]) -> str:
    return f"{CANT_TELL} (no run to judge: {text(problems, row[2])})"


def apply(found: Study, problems: list[Problem]) -> Study:
    """The study with its decisions marked (`mark`) and the problems kept for the verdict's rows."""
    return replace(found, decisions=mark(found.decisions, problems), left_out=list(problems))


def orphan_rows(found: Study) -> list[list[str]]:
    """The decisions table's rows of scored arms none of whose runs could be judged."""
    rows = orphans(found.decisions, found.left_out)
    several = len({row[:2] for row in rows} | {(d.context.model, d.context.label) for d in found.decisions}) > 1
    return [
        [
            policy_label(row[2]) + (f" ({row[0]} on {row[1]})" if several else ""),
            "—",
            "—",
            "—",
            "—",
            "—",
            orphan_word(row, problems),
        ]  # fmt: skip
        for row, problems in rows.items()
    ]

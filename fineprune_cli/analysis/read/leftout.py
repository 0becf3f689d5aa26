"""The runs a report leaves out (`runs.Problem`), by the row they belong to and named in words.
A row whose runs vanish without a word reads as if those seeds were never trained, so the stages
above name them: `decide.leftout` in each decision of their row (a diverged run makes its policy
*can't tell yet*), `render.leftout` as a row of its own where no decision holds them."""

from __future__ import annotations

from .runs import Problem

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

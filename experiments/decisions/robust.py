"""The tables of issue 56 for `make simulate`: the decision rule where the per-seed differences
are skewed, where an arm fails rarely, and what holding it there costs where they are normal.

Every cell runs the rule at its defaults (`sim.NOW`: the skew-robust t and the failure rule) and
the rule at 2aeb5f6 (`sim.BEFORE`: Student's t, failures averaged in) on the same draws (the same
random seed), so a difference between the two columns is the rules', not the draws'.
"""

from __future__ import annotations

import math
import sys
from typing import Callable

import simulation as sim
from fineprune_cli.engine.records.files import to_markdown

ROLES = {"policy": "every policy", "regular": "regular", "cheap": "C(p)'s arm"}
SKEWS = (0.35, 0.71, -0.35, -0.71)
SCHEDULES = {"looks 3,5,8": (3, 5, 8), "looks 5,8,12": (5, 8, 12), "one look, 8 seeds": ()}
FAILURE_TRUTHS = {  # per role: the truths whose false claim its failures could feed
    "policy": (("level with C(p)", sim.LEVEL_WITH_C), ("just past δ", sim.NOT_WORTH_EDGE)),
    "regular": (("on the half-line", sim.WORTH_EDGE), ("just inside the margin", sim.ABOVE_MARGIN)),
    "cheap": (("level with C(p)", sim.LEVEL_WITH_C), ("just past δ", sim.NOT_WORTH_EDGE)),
}


def _se(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / reps)


def cell(rate: float, reps: int) -> str:
    return f"{100 * rate:.1f} ± {100 * _se(rate, reps):.1f}"


def flagged(rate: float, reps: int) -> str:
    """A cell, in bold where it exceeds 5% by more than two Monte Carlo standard errors."""
    text = cell(rate, reps)
    return f"**{text}**" if rate > sim.bound(reps) else text


def _pair(design: sim.Design, looks: tuple[int, ...], reps: int) -> str:
    before = sim.error_rate(design, reps, looks=looks, rule=sim.BEFORE)
    now = sim.error_rate(design, reps, looks=looks, rule=sim.NOW)
    return f"{flagged(before, reps)} → {flagged(now, reps)}"


def _table(header: list[str], rows: list[tuple[str, Callable[[str], str]]], columns: list[str]) -> list[str]:
    body = []
    for name, make in rows:
        body.append([name] + [make(c) for c in columns])
        print(f"  {name}", file=sys.stderr, flush=True)
    return to_markdown(header, body).splitlines()


def skewed_table(reps: int) -> list[str]:
    """Wrong reports where one arm role's noise is skewed (gamma), before → now."""
    header = ["skewed role, skewness of its differences"] + list(SCHEDULES)
    rows = [
        (f"{ROLES[role]}, {g:+g}", lambda name, role=role, g=g: _pair(sim.skewed(role, g), SCHEDULES[name], reps))
        for role in ROLES
        for g in SKEWS
    ]
    return _table(header, rows, list(SCHEDULES))


SHAPES = {  # the policies' arms three times as noisy, so each difference is nearly that arm's shape
    "Weibull": "weibull",
    "lognormal": "lognormal",
    "gamma": "gamma",
}


def shapes_table(reps: int) -> list[str]:
    """The same with a difference shaped nearly like the skewed arm itself (policies 3x noisier):
    the reference's families, not the gamma alone."""
    header = ["skewness of every policy's differences"] + [f"{s}, looks 5,8,12" for s in SHAPES]
    rows = []
    for g in (0.71, -0.71):

        def make(column: str, g: float = g) -> str:
            family = SHAPES[column.split(",")[0]]
            design = sim.Design(
                sim.skewed("policy", g).truths,
                seeds=8,
                sigma=0.2,
                noisier=(3.0,) * 4,
                skew=("policy", g),
                family=family,
            )
            return _pair(design, (5, 8, 12), reps)

        rows.append((f"{g:+g}", make))
    return _table(header, rows, [f"{s}, looks 5,8,12" for s in SHAPES])


def failures_table(reps: int) -> list[str]:
    """Wrong reports where one arm role loses 3 points one run in ten, before → now: about the runs
    that did not fail (what the rule claims since issue 56), and about the arm's mean."""
    header = ["failing role, truth", "of the runs that did not fail, looks 5,8,12", "one look, 8 seeds",
              "of the means, looks 5,8,12"]  # fmt: skip
    rows = []
    for role, truths in FAILURE_TRUTHS.items():
        for name, truth in truths:

            def make(column: str, role: str = role, truth: tuple[float, float] = truth) -> str:
                of = "mean" if "means" in column else "bulk"
                looks = () if column.startswith("one look") else (5, 8, 12)
                return _pair(sim.failing(role, truth, truth_of=of), looks, reps)

            rows.append((f"{ROLES[role]}, {name}", make))
    return _table(header, rows, header[1:])


POWER_CASES = {
    "worth it (Δ_reg = 0, Δ_C = +1)": sim.CLEARLY_WORTH,
    "worth it (Δ_reg = 0, Δ_C = +0.5)": (0.0, 0.5),
    "not worth it: level with C(p) (Δ_C = 0)": sim.LEVEL_WITH_C,
    "not worth it: 1 pt below regular (Δ_reg = −1, Δ_C = 0)": (-1.0, 0.0),
}


def power_table(reps: int, sigmas: tuple[float, ...], seeds: tuple[int, ...]) -> list[str]:
    """Policies decided, and rightly, under normal noise: the rule at 2aeb5f6 → today's, each cell
    from the same draws."""
    columns = [(s, n) for s in sigmas for n in seeds]
    header = ["truth (four such policies)"] + [f"σ {s:g}, {n} seeds" for s, n in columns]

    def rows_for(truth: tuple[float, float]) -> Callable[[str], str]:
        def make(column: str) -> str:
            s, n = columns[header.index(column) - 1]
            design = sim.Design((truth,) * 4, seeds=n, sigma=s)
            before = sim.decided_rate(design, reps, rule=sim.BEFORE)
            now = sim.decided_rate(design, reps, rule=sim.NOW)
            return f"{100 * before:.0f} → {100 * now:.0f}"

        return make

    return _table(header, [(name, rows_for(t)) for name, t in POWER_CASES.items()], header[1:])


FAILING_POWER = {
    "regular fails, policies worth it (Δ_C = +1), σ 0.2": sim.failing("regular", sim.CLEARLY_WORTH),
    "C(p)'s arm fails, policies 1 pt below regular, σ 0.2": sim.failing("cheap", (-1.0, 0.0)),
    "the policies fail, level with C(p), σ 0.2": sim.failing("policy", sim.LEVEL_WITH_C),
}


def failing_power_table(reps: int) -> list[str]:
    """Policies decided, and rightly (of the runs that did not fail), where an arm fails one run in
    ten: failures averaged in (2aeb5f6) → set aside (today), looks 5,8,12."""
    header = ["case (four such policies)", "decided, 2aeb5f6 → today (%)"]
    rows = []
    for name, design in FAILING_POWER.items():
        before = sim.looks_power(design, (5, 8, 12), "late", reps, rule=sim.BEFORE)[0]
        now = sim.looks_power(design, (5, 8, 12), "late", reps, rule=sim.NOW)[0]
        rows.append([name, f"{100 * before:.0f} → {100 * now:.0f}"])
        print(f"  {name}", file=sys.stderr, flush=True)
    return to_markdown(header, rows).splitlines()

"""The judging plan, fixed before the data: m, δ, alpha, the family's correction, the variance
model and the planned looks, recorded as `plan.json` in a `compare` folder before its first run.

A decision's error rate holds only for a plan chosen before the runs were seen. `compare` records
the plan when it starts a folder, and refuses to change it once runs exist; `report` judges by the
recorded plan, and says *post hoc* wherever that promise does not hold: no plan recorded, a plan
recorded after runs existed, or the report's own settings differ from it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..engine.files import atomic_write_text, read_regular_text
from ..errors import ConfigError
from .judging import Judging

PLAN_FILE = "plan.json"
LOOKS_FILE = "looks.json"  # what `compare --until-decided` wrote before plans were recorded
VARIANCE = "own paired t"  # the variance model of every decision (analysis.decision.estimate)
SEARCH_UP = 2  # parent folders searched for a plan above each folder a report reads


@dataclass(frozen=True)
class Plan:
    judging: Judging
    looks: tuple[int, ...] = ()
    variance: str = VARIANCE
    recorded: str = ""  # when (UTC, ISO 8601)
    runs_before: int = 0  # complete runs in the folder when it was recorded: the plan followed them
    note: str = ""  # what a reader must know (e.g. why the plan came after the runs)
    path: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judging": self.judging.decisive(),
            "looks": list(self.looks),
            "variance": self.variance,
            "recorded": self.recorded,
            "runs_before": self.runs_before,
            "note": self.note,
        }

    @property
    def rules(self) -> tuple[object, ...]:
        """What a decision depends on: two plans with the same rules decide alike."""
        return (tuple(sorted(self.judging.decisive().items())), self.looks, self.variance)

    def same_rules(self, other: Plan) -> bool:
        return self.rules == other.rules


def agreed(plans: list[Plan]) -> Plan | None:
    """The plan the folders share, if they share one."""
    return plans[0] if plans and len({p.rules for p in plans}) == 1 else None


def from_dict(data: Any, where: str) -> Plan:
    try:
        j = data["judging"]
        judging = Judging(margin=float(j["margin"]), min_gain=float(j["min_gain"]), alpha=float(j["alpha"]))
        judging = replace(judging, family=str(j["family"]))
        looks = tuple(int(n) for n in data.get("looks", []))
        return Plan(
            judging,
            looks,
            str(data.get("variance", VARIANCE)),
            str(data.get("recorded", "")),
            int(data.get("runs_before", 0)),
            str(data.get("note", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a judging plan ({exc})") from None


def read(path: Path) -> Plan:
    try:
        data = json.loads(read_regular_text(path, 1 << 16))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the judging plan {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return replace(from_dict(data, str(path)), path=path)


def record(out: Path, judging: Judging, looks: list[int] | None, runs: int) -> Plan:
    """`compare`'s plan for folder `out` (holding `runs` complete runs): written when the folder
    has none; kept when it matches (looks None: whatever was planned); refused when it differs
    and runs exist, since a plan changed after the data is post hoc."""
    path = out / PLAN_FILE
    mine = Plan(judging, tuple(looks or ()))
    if path.is_file():
        found = read(path)
        if looks is None:
            mine = replace(mine, looks=found.looks)
        if found.same_rules(mine):
            return found
        if runs:
            raise ConfigError(
                f"{out} was planned with {describe(found)} ({path}); a different plan ({describe(mine)}) "
                f"after {runs} runs would be chosen after seeing them: compare into a new --out, or judge "
                "these runs another way with `fineprune report` (marked post hoc)"
            )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    written = replace(mine, recorded=stamp, runs_before=runs, path=path)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(written.to_dict(), indent=2) + "\n")
    return written


def describe(plan: Plan) -> str:
    j = plan.judging
    looks = f", looks after {','.join(map(str, plan.looks))} seeds" if plan.looks else ""
    return f"m {j.margin:g} pt, δ {j.gain:g} pt, alpha {j.alpha:g}, {j.correction.name}, {plan.variance}{looks}"


def find(paths: list[Path]) -> list[Plan]:
    """The plans recorded in, below or just above the folders a report reads (each once); an
    older `--until-decided` folder without one gives its looks.json's looks under the defaults."""
    found: dict[Path, Plan] = {}
    for root in paths:
        if not root.is_dir():
            continue
        candidates = sorted(root.rglob(PLAN_FILE)) + [
            p / PLAN_FILE for p in list(root.resolve().parents)[:SEARCH_UP] if (p / PLAN_FILE).is_file()
        ]
        for path in candidates:
            found.setdefault(path.resolve(), read(path))
        if not candidates:
            for looks in sorted(root.rglob(LOOKS_FILE)):
                found.setdefault(looks.resolve(), _from_looks(looks))
    return list(found.values())


def _from_looks(path: Path) -> Plan:
    try:
        data = json.loads(read_regular_text(path, 1 << 20))
        looks = tuple(int(n) for n in data["looks"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return Plan(Judging(), (), runs_before=-1, note=f"{path} could not be read", path=path)
    note = f"no judging plan was recorded with these runs; the looks were read from {path}"
    return Plan(Judging(), looks, runs_before=-1, note=note, path=path)


def post_hoc(plans: list[Plan], judging: Judging) -> list[str]:
    """Why decisions under `judging` are not the ones planned before the data ([] when they are)."""
    if not plans:
        return ["no judging plan was recorded with these runs (`compare` records one before its first run)"]
    if agreed(plans) is None:
        return ["the folders read were planned differently: " + "; ".join(f"{p.path}: {describe(p)}" for p in plans)]
    plan, reasons = plans[0], []
    if plan.runs_before < 0:
        reasons.append(plan.note)
    elif plan.runs_before:
        reasons.append(
            f"the plan was recorded after {plan.runs_before} runs existed" + (f": {plan.note}" if plan.note else "")
        )
    if plan.variance != VARIANCE:
        reasons.append(f"the plan named the variance model '{plan.variance}'; this version uses '{VARIANCE}'")
    mine, theirs = judging.decisive(), plan.judging.decisive()
    changed = [
        f"{k} {mine[k]:g} (planned {theirs[k]:g})" for k in ("margin", "min_gain", "alpha") if mine[k] != theirs[k]
    ]
    if mine["family"] != theirs["family"]:
        changed.append(f"family {mine['family']} (planned {theirs['family']})")
    if changed:
        reasons.append("this report judges with " + ", ".join(changed))
    return reasons

"""The judging plan, fixed before the data: m, δ, alpha, the family's correction and its split
over looks, the variance model, the family (the policies and the models and datasets they are
judged on), and the seeds (the planned looks, or the seeds of a single look), recorded as
`plan.json` in a `compare` folder before its first run.

A decision's error rate holds only for a plan chosen before the runs were seen. `compare` records
the plan when it starts a folder, and refuses to change its rules once runs exist; `report` judges
by the recorded plan, at the level its family fixes, and says *post hoc* wherever that promise
does not hold: no plan recorded, a plan recorded after runs existed or without its family, the
report's own settings differ from it, or it judges policies, contexts or seeds the plan did not
hold. plan.json is read strictly (`planfile`); which plan applies to which run, and whether the
runs were made under it (each records its plan's `digest`), is `planruns`.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...engine.records.files import atomic_write_text, read_regular_text
from ...engine.records.record import SUMMARY
from ...errors import ConfigError
from ..read.planruns import applying
from .judging import EARLIER_ALLOCATION, Judging, variance_key
from .planfile import LATER, checked
from .procedures import DEFAULT_VARIANCE, VARIANCES

PLAN_FILE = "plan.json"
LOOKS_FILE = "looks.json"  # what `compare --until-decided` wrote before plans were recorded
VARIANCE = VARIANCES[DEFAULT_VARIANCE].label  # what a plan recorded before it named its model was judged by
SEARCH_UP = 2  # parent folders searched for a plan above each folder a report reads


@dataclass(frozen=True)
class Family:
    """What the plan's alpha is shared over: every scored policy on every (model, dataset)."""

    policies: tuple[str, ...]
    models: tuple[str, ...]
    datasets: tuple[str, ...]

    @property
    def contexts(self) -> int:
        return len(self.models) * len(self.datasets)

    @property
    def size(self) -> int:
        """k: the decisions the plan's alpha is split over."""
        return len(self.policies) * self.contexts

    def to_dict(self) -> dict[str, list[str]]:
        return {"policies": list(self.policies), "models": list(self.models), "datasets": list(self.datasets)}


@dataclass(frozen=True)
class Plan:
    judging: Judging
    looks: tuple[int, ...] = ()
    variance: str = VARIANCE
    recorded: str = ""  # when (UTC, ISO 8601)
    runs_before: int = 0  # complete runs in the folder when it was recorded: the plan followed them
    note: str = ""  # what a reader must know (e.g. why the plan came after the runs)
    path: Path | None = field(default=None, compare=False)
    family: Family | None = None  # None: a plan recorded before plans held their family
    seeds: tuple[int, ...] = ()  # a single look's seeds (planned looks fix theirs: 0 .. looks[j] - 1)
    # judging settings its file does not record (it came before them): judged by this version's
    # defaults, and left out of its digest, which the runs made under it recorded without them
    unrecorded: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "judging": {k: v for k, v in self.judging.decisive().items() if k not in self.unrecorded},
            "looks": list(self.looks),
            "seeds": list(self.seeds),
            "family": self.family.to_dict() if self.family else None,
            "variance": self.variance,
            "recorded": self.recorded,
            "runs_before": self.runs_before,
            "note": self.note,
        }

    @property
    def digest(self) -> str:
        """sha256 of the plan's canonical JSON: what each run made under it records (its summary's
        `plan`), so a report finds a plan.json changed after its runs or not theirs at all."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def rules(self) -> tuple[object, ...]:
        """What a decision depends on: two plans with the same rules decide alike."""
        return (tuple(sorted(self.judging.decisive().items())), self.looks, self.variance)

    def same_rules(self, other: Plan) -> bool:
        return self.rules == other.rules


def agreed(plans: list[Plan]) -> Plan | None:
    """The plan the folders share, if they share one (its rules, family and seeds)."""
    return plans[0] if plans and len({(p.rules, p.family, p.seeds) for p in plans}) == 1 else None


def from_dict(data: Any, where: str) -> Plan:
    """The plan in plan.json's `data`, checked (`planfile.checked`): ConfigError naming `where`."""
    fields = checked(data, where)
    j, family = fields["judging"], fields["family"]
    judging = Judging(margin=float(j["margin"]), min_gain=float(j["min_gain"]), alpha=float(j["alpha"]))
    variance = fields["variance"] or VARIANCE
    judging = replace(
        judging, family=j["family"], allocation=j["allocation"], variance=variance_key(variance) or DEFAULT_VARIANCE
    )
    if "shape" in j:  # recorded from issue 56 on; an older plan is judged by today's defaults
        judging = replace(judging, shape=str(j["shape"]))
    if "failure" in j:
        judging = replace(judging, failure=float(j["failure"]))
    return Plan(
        judging,
        tuple(fields["looks"]),
        variance,
        fields["recorded"],
        fields["runs_before"],
        fields["note"],
        family=Family(*(tuple(family[k]) for k in ("policies", "models", "datasets"))) if family else None,
        seeds=tuple(fields["seeds"]),
        unrecorded=tuple(k for k in LATER if k not in j),
    )


def read(path: Path) -> Plan:
    try:
        data = json.loads(read_regular_text(path, 1 << 16))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the judging plan {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return replace(from_dict(data, str(path)), path=path)


def record(
    out: Path,
    judging: Judging,
    looks: list[int] | None,
    runs: int,
    family: Family | None = None,
    seeds: list[int] | tuple[int, ...] = (),
) -> Plan:
    """`compare`'s plan for folder `out` (holding `runs` complete runs): written when the folder
    has none, or none of its runs exist yet; kept when it matches (looks None: whatever was
    planned); refused when its rules differ and runs exist, since a plan changed after the data
    is post hoc. A compare over other policies or seeds than a kept plan's trains them, and the
    report says where its decisions go beyond the plan (`beyond`)."""
    path = out / PLAN_FILE
    mine = Plan(judging, tuple(looks or ()), judging.variance_model.label, family=family, seeds=tuple(seeds))
    if path.is_file():
        found = read(path)
        if looks is None:
            mine = replace(mine, looks=found.looks)
        mine = replace(mine, seeds=() if mine.looks else mine.seeds)
        if found.same_rules(mine) and (runs or (found.family, found.seeds) == (mine.family, mine.seeds)):
            return found
        if runs:
            raise ConfigError(
                f"{out} was planned with {describe(found)} ({path}); a different plan ({describe(mine)}) "
                f"after {runs} runs would be chosen after seeing them: compare into a new --out, or judge "
                "these runs another way with `fineprune report` (marked post hoc)"
            )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    written = replace(mine, seeds=() if mine.looks else mine.seeds, recorded=stamp, runs_before=runs, path=path)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(written.to_dict(), indent=2) + "\n")
    return written


def recorded_judging(out: Path) -> Judging | None:
    """The judging a folder's plan recorded: what `compare` into it judges by unless its flags or
    experiment file say otherwise (a plan from before a setting existed keeps what it ran under)."""
    path = out / PLAN_FILE
    return read(path).judging if path.is_file() else None


def beyond(plan: Plan, family: Family | None, seeds: list[int] | tuple[int, ...]) -> list[str]:
    """Where a compare goes beyond the plan kept in its folder: its decisions will be post hoc."""
    lines = []
    if plan.family is None:
        lines.append("the plan does not record its family (recorded by an earlier version)")
    elif family is not None:
        extra = [p for p in family.policies if p not in plan.family.policies]
        extra += [f"{m} on {d}" for m in family.models for d in family.datasets if m not in plan.family.models
                  or d not in plan.family.datasets]  # fmt: skip
        if extra:
            lines.append(f"{', '.join(extra)} not in the plan's family")
    if not plan.looks and set(seeds) - set(plan.seeds):
        lines.append(
            f"seeds {seeds_text(sorted(set(seeds) - set(plan.seeds)))} not among the plan's ({seeds_text(plan.seeds)})"
        )
    return lines


def seeds_text(seeds: list[int] | tuple[int, ...]) -> str:
    """'0–4', '0, 1, 3': a run of consecutive seeds as a range."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def describe(plan: Plan) -> str:
    j = plan.judging
    looks = ""
    if plan.looks:
        looks = f", looks after {','.join(map(str, plan.looks))} seeds ({j.allocation} allocation)"
    elif plan.seeds:
        looks = f", seeds {seeds_text(plan.seeds)}"
    family = f", family {describe_family(plan.family)}" if plan.family else ""
    rule = f"{plan.variance}, {rule_text(j)}" if not plan.unrecorded else plan.variance
    return f"m {j.margin:g} pt, δ {j.gain:g} pt, alpha {j.alpha:g}, {j.correction.label}, {rule}{family}{looks}"


def rule_text(j: Judging) -> str:
    """The test's shape and the failure rule, as a plan and a report name them."""
    failure = f"failed runs: more than {j.failure:g} pt below their arm's median" if j.failure else "no failure rule"
    return f"{j.shape_model.label}, {failure}"


def unrecorded_text(plan: Plan) -> str:
    """What a report says of a plan recorded before the shape and the failure rule existed."""
    j = plan.judging
    return (
        f"plan predates the {' and the '.join(UNRECORDED[k] for k in plan.unrecorded)} (issue 56): it is "
        f"judged by this version's ({rule_text(j)})"
    )


UNRECORDED = {"shape": "tests' shape", "failure": "failure rule"}


def find(paths: list[Path]) -> list[Plan]:
    """The plans recorded in, below or just above the folders a report reads that apply to a run
    there (`planruns.nearest`: a run keeps to the plan nearest above it), each once, in the order
    of their paths; an older `--until-decided` folder without one gives its looks.json's looks
    under the defaults."""
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
    runs = [summary.parent for root in paths if root.is_dir() for summary in root.rglob(SUMMARY)]
    return applying(sorted(found.values(), key=lambda p: str(p.path)), runs)


def _from_looks(path: Path) -> Plan:
    try:
        data = json.loads(read_regular_text(path, 1 << 20))
        looks = tuple(int(n) for n in data["looks"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return Plan(Judging(), (), runs_before=-1, note=f"{path} could not be read", path=path)
    note = f"no judging plan was recorded with these runs; the looks were read from {path}"
    return Plan(Judging(allocation=EARLIER_ALLOCATION), looks, runs_before=-1, note=note, path=path)


def post_hoc(plans: list[Plan], judging: Judging) -> list[str]:
    """Why decisions under `judging` are not the ones planned before the data ([] when they are)."""
    if not plans:
        return ["no judging plan was recorded with these runs (`compare` records one before its first run)"]
    if agreed(plans) is None:
        return ["the folders read were planned differently: " + "; ".join(f"{p.path}: {describe(p)}" for p in plans)]
    plan, reasons = plans[0], []
    for each in plans:  # each plan's own record: which folder's name sorts first must not matter
        if each.runs_before < 0:
            reasons.append(each.note)
        elif each.runs_before:
            where = f" ({each.path})" if len(plans) > 1 else ""
            reasons.append(
                f"the plan{where} was recorded after {each.runs_before} runs existed"
                + (f": {each.note}" if each.note else "")
            )
    if plan.runs_before >= 0 and plan.family is None:
        reasons.append(
            "the plan does not record its family, the policies and contexts its alpha is shared over "
            "(recorded by an earlier version)"
        )
    if plan.variance != judging.variance_model.label:
        have = "" if variance_key(plan.variance) else ", which this version does not have"
        reasons.append(
            f"the plan named the variance model '{plan.variance}'{have}; this report uses '{judging.variance_model.label}'"
        )
    mine, theirs = judging.decisive(), plan.judging.decisive()
    changed = [
        f"{k} {mine[k]:g} (planned {theirs[k]:g})" for k in ("margin", "min_gain", "alpha") if mine[k] != theirs[k]
    ]
    changed += [
        f"{k} {mine[k]} (planned {theirs[k]})"
        for k in ("family", "allocation")
        if mine[k] != theirs[k] and (k == "family" or plan.looks)
    ]
    # a plan from before the shape and the failure rule fixed neither: judging it by either value is
    # no change of plan (the study says post hoc where the failure rule then set runs aside)
    changed += [
        f"{k} {mine[k]:g} (planned {theirs[k]:g})" if k == "failure" else f"{k} {mine[k]} (planned {theirs[k]})"
        for k in LATER
        if mine[k] != theirs[k] and k not in plan.unrecorded
    ]
    if changed:
        reasons.append("this report judges with " + ", ".join(changed))
    return list(dict.fromkeys(reasons))


@dataclass(frozen=True)
class Judged:
    """What a report decides, as the plan's family and seeds are checked against: each scored
    policy's row name (one per context), the contexts, and the seeds its comparisons pair."""

    policies: tuple[str, ...]
    contexts: int
    seeds: frozenset[int]


def off_plan(plan: Plan, judged: Judged) -> list[str]:
    """Where a report judges more than the plan held: policies outside its family, more contexts
    (a user's script may name its own model and data, so contexts are counted, not named) or
    decisions than it shared alpha over, or (a single look) seeds outside its seeds. Fewer is no
    reason: they keep the plan's level."""
    reasons = []
    f = plan.family
    if f is not None:
        extra = sorted({p for p in judged.policies if p not in f.policies})
        if extra:
            reasons.append(f"it judges {', '.join(extra)}, outside the plan's family ({describe_family(f)})")
        elif judged.contexts > f.contexts or len(judged.policies) > f.size:
            reasons.append(
                f"it judges {len(judged.policies)} policies in {judged.contexts} contexts, more than the plan's "
                f"{f.size} in {f.contexts}"
            )
    if not plan.looks and plan.seeds and judged.seeds - set(plan.seeds):
        reasons.append(
            f"seeds {seeds_text(sorted(judged.seeds - set(plan.seeds)))} are not among the plan's "
            f"({seeds_text(plan.seeds)}): adding seeds and judging again at the full level is a second look "
            "the plan did not have (`compare --until-decided --looks` plans more seeds)"
        )
    return reasons


def describe_family(f: Family) -> str:
    return f"{', '.join(f.policies)} on {', '.join(f.models)} × {', '.join(f.datasets)}: k = {f.size}"

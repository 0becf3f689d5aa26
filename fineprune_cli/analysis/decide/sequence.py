"""Planned looks, replayed from the runs present: at look j the first `looks[j]` seeds of every
arm decide every policy not yet decided, each policy's claims at the level the family's
correction (`Judging.correction`) gives k policies at the part of alpha / k the plan's allocation
(`Judging.allocation`) gives look j; a decision reached at a look stands. A look decides a policy
only over all of its seeds: where regular, the policy or an arm of its C(p) lacks one, the look
is *incomplete* for it and decides nothing (a look read early, then again when its seeds exist,
would be two looks at that level). `compare --until-decided` and `report` both call `replay`, so
the procedure and its report are one computation from one set of runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ...arms import REGULAR
from ...engine.records.files import read_regular_text
from ..group.groups import Groups, subset
from .advice import enrich
from .decision import CANT_TELL, Decision, decide
from .judging import Judging, shares
from .plan import seeds_text


@dataclass(frozen=True)
class Look:
    number: int  # 1-based
    seeds: int  # the seeds it plans: 0 .. seeds - 1
    level: float  # what each policy's claims spend at it
    decided: tuple[str, ...]  # the policies first decided at this look
    open: tuple[str, ...]  # still can't tell after it
    incomplete: tuple[str, ...] = ()  # of `open`, those whose seeds of this look are not all there


def key(d: Decision) -> str:
    return f"{d.policy} ({d.context.model} on {d.context.label})"


def decidable(groups: Groups) -> Groups:
    """The contexts that hold regular runs: the only ones a decision can be made in."""
    return {c: by for c, by in groups.items() if by.get(REGULAR)}


def replay(
    groups: Groups,
    judging: Judging,
    looks: tuple[int, ...],
    upto: int | None = None,
    family: int | None = None,
    described: bool = True,
) -> tuple[list[Decision], list[Look]]:
    """Each policy's decision (from the look that reached it, else the last look present) and
    the looks replayed, from the runs as grouped once, in a family of `family` policies (default:
    those at the first look). A look whose seeds no run has yet is not replayed; `upto` stops
    earlier. `described` False leaves out what decides nothing (the advice and the δ and pooled
    lines): the simulations replay thousands of procedures."""
    seeds_present = {s for by in groups.values() for runs in by.values() for s in runs}
    parts = shares(judging, looks)
    reached: dict[str, Decision] = {}
    last: dict[str, Decision] = {}
    done: list[Look] = []
    k = family
    before = 0
    for number, seeds in enumerate(looks[: upto or len(looks)], start=1):
        if number > 1 and not any(before <= s < seeds for s in seeds_present):
            break
        at = decidable(subset(groups, seeds))
        found = decide(at, judging, parts[number - 1], family=k, looks=len(looks), look=number)
        found = [complete(d, at, set(range(seeds)), judging) for d in found if key(d) not in reached]
        found = enrich(found, at, judging, looks) if described else found
        k = k or (found[0].family if found else None)
        new: list[str] = []
        still: list[str] = []
        for d in found:
            last[key(d)] = d if d.look == number else replace(d, look=number)
            (new if d.word != CANT_TELL else still).append(key(d))
        reached.update({name: last[name] for name in new})
        level = judging.correction.level(judging.alpha, k or 1, parts[number - 1])
        lacking = tuple(key(d) for d in found if d.incomplete)
        done.append(Look(number, seeds, level, tuple(new), tuple(still), lacking))
        before = seeds
        if not still:
            break
    order = list(last)
    return [reached.get(name, last[name]) for name in order], done


def single(groups: Groups, judging: Judging, family: int | None = None, seeds: tuple[int, ...] = ()) -> list[Decision]:
    """A report without planned looks: every policy over all its seeds, one family of `family`
    policies (default: those found); with the plan's `seeds`, a policy lacking one is undecided."""
    at = decidable(groups)
    found = decide(at, judging, family=family)
    if seeds:
        found = [complete(d, at, set(seeds), judging) for d in found]
    return enrich(found, at, judging)


def complete(d: Decision, groups: Groups, wanted: set[int], judging: Judging) -> Decision:
    """`d`, undecided with the reason where regular, the policy or an arm of its C(p) lacks a
    seed its look fixed (the runs of a look, not some of them, are what its level was set for)."""
    by = groups[d.context]
    arms = dict.fromkeys([REGULAR, d.policy, *(d.cheap.arms if d.cheap else ())])
    gaps = [f"{arm} lacks seed{'s' * (len(m) > 1)} {seeds_text(m)}" for arm in arms if (m := _lacks(by, arm, wanted))]
    if not gaps:
        return d
    why = f"its look (seeds {seeds_text(sorted(wanted))}) is incomplete: " + "; ".join(gaps)
    return replace(d, incomplete=why, word=CANT_TELL)  # its p-values stand; its look decides nothing


def _lacks(by: dict, arm: str, wanted: set[int]) -> list[int]:
    return sorted(wanted - set(by.get(arm, {})))


def record(planned: tuple[int, ...], looks: list[Look], decisions: list[Decision], judging: Judging) -> dict[str, Any]:
    """The looks as scripts read them (looks.json, `compare --json`): the plan, each look, and the
    decisions reached with the look that reached them."""
    return {
        "rule": judging.correction.label,
        "alpha": judging.alpha,
        "looks": list(planned),
        "done": [asdict(look) for look in looks],
        "decisions": {
            key(d): {"word": d.word, "look": d.look, "p_adjusted": d.p_adjusted}
            for d in decisions
            if d.word != CANT_TELL
        },
    }


LOOKS_FILE = "looks.json"


def disagreements(paths: list[Path], decisions: list[Decision]) -> list[str]:
    """Where a looks.json that `compare --until-decided` wrote among these runs records another
    decision than the looks replayed from the runs present (runs deleted, added or edited since,
    or the file edited): the replay is what the report says; the file is named, not believed."""
    now = {key(d): d.word for d in decisions}
    files = sorted({f for root in paths if root.is_dir() for f in root.rglob(LOOKS_FILE) if f.is_file()})
    lines = []
    for path in files:
        try:
            recorded = json.loads(read_regular_text(path, 1 << 20)).get("decisions", {})
            words = {name: entry["word"] for name, entry in recorded.items()}
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            lines.append(f"{path} is unreadable; the looks are replayed from the runs present")
            continue
        for name in sorted(set(words) | {n for n, w in now.items() if w != CANT_TELL}):
            if words.get(name, CANT_TELL) != now.get(name, CANT_TELL):
                lines.append(
                    f"{path} records {name}: {words.get(name, CANT_TELL)}; replayed from the runs present: "
                    f"{now.get(name, 'not judged (its runs are not here)')}"
                )
    return lines

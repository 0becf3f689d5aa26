"""Planned looks, replayed from the runs present: at look j the first `looks[j]` seeds of every
arm decide every policy not yet decided, each policy's claims at the level the family's
correction (`Judging.correction`) gives k policies over L looks; a decision reached at a look
stands. `compare --until-decided` and `report` both call `replay`, so the procedure and its
report are one computation from one set of runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..arms import REGULAR
from ..engine.files import read_regular_text
from .advice import enrich
from .decision import CANT_TELL, Decision, decide
from .groups import Groups, subset
from .judging import Judging


@dataclass(frozen=True)
class Look:
    number: int  # 1-based
    seeds: int  # the seeds it plans: 0 .. seeds - 1
    level: float  # what each policy's claims spend at it
    decided: tuple[str, ...]  # the policies first decided at this look
    open: tuple[str, ...]  # still can't tell after it


def key(d: Decision) -> str:
    return f"{d.policy} ({d.context.model} on {d.context.label})"


def decidable(groups: Groups) -> Groups:
    """The contexts that hold regular runs: the only ones a decision can be made in."""
    return {c: by for c, by in groups.items() if by.get(REGULAR)}


def replay(
    groups: Groups, judging: Judging, looks: tuple[int, ...], upto: int | None = None
) -> tuple[list[Decision], list[Look]]:
    """Each policy's decision (from the look that reached it, else the last look present) and
    the looks replayed, from the runs as grouped once. A look whose seeds no run has yet is not
    replayed; `upto` stops earlier."""
    seeds_present = {s for by in groups.values() for runs in by.values() for s in runs}
    reached: dict[str, Decision] = {}
    last: dict[str, Decision] = {}
    done: list[Look] = []
    k: int | None = None
    before = 0
    for number, seeds in enumerate(looks[: upto or len(looks)], start=1):
        if number > 1 and not any(before <= s < seeds for s in seeds_present):
            break
        at = decidable(subset(groups, seeds))
        found = decide(at, judging, looks=len(looks), family=k)
        found = enrich([d for d in found if key(d) not in reached], at, judging, looks)
        k = k or (found[0].family if found else None)
        new: list[str] = []
        still: list[str] = []
        for d in found:
            last[key(d)] = replace(d, look=number)
            (new if d.word != CANT_TELL else still).append(key(d))
        reached.update({name: last[name] for name in new})
        level = found[0].level if found else judging.correction.level(judging.alpha, 1, len(looks))
        done.append(Look(number, seeds, level, tuple(new), tuple(still)))
        before = seeds
        if not still:
            break
    order = list(last)
    return [reached.get(name, last[name]) for name in order], done


def single(groups: Groups, judging: Judging) -> list[Decision]:
    """A report without planned looks: every policy over all its seeds, one family."""
    at = decidable(groups)
    return enrich(decide(at, judging), at, judging)


def record(planned: tuple[int, ...], looks: list[Look], decisions: list[Decision], judging: Judging) -> dict[str, Any]:
    """The looks as scripts read them (looks.json, `compare --json`): the plan, each look, and the
    decisions reached with the look that reached them."""
    return {
        "rule": judging.correction.name,
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

"""The decisions table's rows of scored arms none of whose runs could be judged
(`decide.leftout.orphans`): a policy left with no run at all still gets its row, saying why."""

from __future__ import annotations

from ..decide.leftout import orphan_word, orphans
from ..read.runs import policy_label
from ..study import Study


def orphan_rows(found: Study) -> list[list[str]]:
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

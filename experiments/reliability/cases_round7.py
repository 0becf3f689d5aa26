"""Hostile cases of issue 57 (round 7), what landed with issues 48-51 attacked again:

1. a policy that silently does nothing: a `--script` run under rs2 whose script never draws from
   `run.sampler()` fails at its first epoch, naming the sampler, where it was recorded complete
   with 0% skipped (the library's PruningSampler refusing selective-backprop: tests/test_selective.py);
"""

from __future__ import annotations

import json
from pathlib import Path

from cases import Case
from cases_round5_script import FULL, scripted


def _rs2_not_complete(work: Path) -> str | None:
    for seed in (0, 1):
        path = work / "cmp" / "s-data" / f"rs2-seed{seed}" / "summary.json"
        if path.exists() and json.loads(path.read_text())["status"] == "complete":
            return f"rs2-seed{seed} never drew from its sampler and is recorded complete"
    return None


ROUND7_CASES = [
    Case(
        "r7-script-never-draws-from-its-sampler",
        setup=scripted(FULL, seeds="0,1", policies="regular,rs2"),
        expect="failed",
        words=("policy rs2", "never drew", "run.sampler()"),
        check=_rs2_not_complete,
    ),
]

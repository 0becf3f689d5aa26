"""What an epoch's figures can be: the bounds a report checks a record against
(`analysis.read.checks`) and a script's `run.log()` checks each figure against as it is logged
(`harness.logged`), declared once so that a record the harness accepts is one a report reads."""

from __future__ import annotations

MAX_SECONDS = 10**9  # ~32 years of training: beyond it a record is damaged, not slow
MAX_LOSS = 1e12  # a loss past this has diverged, and its square overflows no statistic
MAX_LR = 1e6
GRID = 1e-6  # images: how far 100 x hits / n, written as a float, may be from whole hits


def on_grid(accuracy: float, num_test: int) -> bool:
    """`accuracy` (%) is a whole number of `num_test` test images."""
    hits = accuracy * num_test / 100
    return abs(hits - round(hits)) <= GRID

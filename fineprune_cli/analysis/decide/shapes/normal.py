"""Student's t: holds for normal differences only, the rule before issue 56 (a plan recorded
before then is judged by it)."""

from __future__ import annotations

from typing import Any

from ..procedures import EARLIER_SHAPE, ShapeModel, register_shape


def _student() -> Any:
    from ..stats import STUDENT  # scipy loads when a report decides, not for --help

    return STUDENT


register_shape(
    ShapeModel(
        EARLIER_SHAPE,
        "Student's t",
        "Student's t: holds for normal differences only (the rule before issue 56)",
        "each comparison's per-seed differences normal",
        _student,
    )
)

"""The skew-robust t (`decide/shape.py`, its table made by `experiments/decisions/shape.py`): the
default shape since issue 56."""

from __future__ import annotations

from typing import Any

from ..procedures import DEFAULT_SHAPE, ShapeModel, register_shape


def _skewed() -> Any:
    from ..shape import SKEWED  # its table is read when a report decides, not for --help

    return SKEWED


register_shape(
    ShapeModel(
        DEFAULT_SHAPE,
        "skew-robust t",
        "critical values that hold when the differences are skewed toward a test's tail by up to 0.71 "
        "(the worst of five unimodal shapes), never below Student's",
        "each comparison's per-seed differences normal or skewed by up to 0.71 toward a test's tail "
        "(unimodal: gamma, lognormal, inverse Gaussian, skew-normal or Weibull, alone or less a normal arm)",
        _skewed,
    )
)

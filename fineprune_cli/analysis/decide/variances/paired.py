"""Each comparison's own paired t: its spread over the seeds it pairs, n - 1 df, no arm assumed as
noisy as another. The default variance model."""

from __future__ import annotations

from typing import Any

from ..procedures import DEFAULT_VARIANCE, VarianceModel, register_variance


def _own_paired_t(comparison: Any, quantum: float) -> Any:
    from ..stats import paired_estimate  # scipy loads when a report decides, not for --help

    return paired_estimate(comparison.values(), quantum)


register_variance(
    VarianceModel(
        DEFAULT_VARIANCE,
        "own paired t",
        "each comparison's own spread over the seeds it pairs, n - 1 df: no arm assumed as noisy as another",
        _own_paired_t,
    )
)

"""Bonferroni: each policy's two claims at alpha / k, split over the planned looks by the plan's
allocation. The default family procedure."""

from __future__ import annotations

from typing import Sequence

from ..procedures import DEFAULT_FAMILY, Claim, Correction, register_family


def _bonferroni(claims: Sequence[Claim], k: int) -> list[float]:
    return [min(1.0, c.p * k / c.share) for c in claims]


register_family(
    Correction(
        DEFAULT_FAMILY,
        "Bonferroni",
        "each policy's claims at alpha / policies, split over the planned looks by --allocation",
        "Bonferroni over {policies}{looks_text}: each policy's claims are tested at {level}",
        _bonferroni,
        lambda alpha, k, share: alpha * share / k,
    )
)

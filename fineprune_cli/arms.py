"""The arms of a comparison by name: what `compare` names a run folder and `report` reads back.

An arm is a policy (`regular`, `fine`, ...), a point of the random frontier (`random-every-20`:
random pruning in every epoch at 20%), or a point of the shorter-schedule frontier (`shorter-30`:
regular training with 30% fewer epochs, its schedule compressed by `shorter_schedule`). Written
and parsed here only, below both the drivers that make the arms and the analysis that reads them.
"""

from __future__ import annotations

import math

from .errors import ConfigError

REGULAR = "regular"  # the baseline arm: no pruning
FRONTIER = "random-every-"  # arm names of the random frontier: random-every-20 = 20% every epoch
SHORTER = "shorter-"  # arm names of the shorter-schedule frontier: shorter-30 = 30% fewer epochs


def _arm_name(prefix: str, share: float) -> str:
    return f"{prefix}{round(100 * share):g}"


def _arm_share(prefix: str, arm: str) -> float | None:
    """The share in an arm's name with this prefix (random-every-20 -> 0.2), None for any other arm."""
    try:
        return float(arm[len(prefix) :]) / 100 if arm.startswith(prefix) else None
    except ValueError:
        return None


def frontier_arm(fraction: float) -> str:
    return _arm_name(FRONTIER, fraction)


def frontier_fraction(arm: str) -> float | None:
    """The prune fraction of a frontier arm's name, None for any other arm."""
    return _arm_share(FRONTIER, arm)


def shorter_arm(budget: float) -> str:
    return _arm_name(SHORTER, budget)


def shorter_budget(arm: str) -> float | None:
    """The budget b of a shorter-schedule arm's name, None for any other arm."""
    return _arm_share(SHORTER, arm)


def _half_up(x: float) -> int:
    return math.floor(x + 0.5)


def shorter_schedule(
    epochs: int,
    milestones: list[int],
    warmup: float,
    budget: float,
) -> tuple[int, list[int], float]:
    """Epochs, milestones and warm-up of regular training compressed by (1 - budget): each epoch
    count rounded half up (200 epochs at 0.3: 140, milestones 60/120/160 -> 42/84/112), the
    warm-up (fractional epochs, counted in steps) scaled exactly; milestones that land on or
    after the arm's last epoch change nothing and are left out."""
    factor = 1 - budget
    short = max(1, _half_up(epochs * factor))
    # a milestone at or after the last epoch decays an lr no epoch uses: dropped, so short runs
    # whose milestones would meet there (2 epochs at b = 0.5: 1,2 -> 1,1 on a 1-epoch arm) still run
    scaled = [m for m in (_half_up(m * factor) for m in milestones) if m < short]
    if any(m < 1 for m in scaled) or any(a >= b for a, b in zip(scaled, scaled[1:])):
        raise ConfigError(
            f"{shorter_arm(budget)}: milestones {','.join(map(str, milestones))} scaled by "
            f"{factor:g} give {','.join(map(str, scaled))}, which is not strictly increasing "
            "from epoch 1; use a smaller budget or fewer milestones"
        )
    return short, scaled, warmup * factor

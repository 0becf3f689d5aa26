"""Where a shorter run's epochs meet regular's, for the schedule check (compression.py): the
points of regular's learning-rate curve that each epoch of the shorter run may match.

Each way of lining the runs up below counts as the same point of training:
- by the share of the whole run: the shorter run's epoch j (of E') is regular's epoch
  (j - 1/2)·E/E' + 1/2, within one of the shorter run's epochs (E/E' of regular's);
- part by part, where the shorter run's warm-up, or cool-down, or both, are regular's held fixed,
  or scaled by E'/E and rounded to whole epochs (as practitioners train fewer epochs: timm's
  `--warmup-epochs` is an integer): that part onto regular's, and the rest onto the rest, each by
  its share of its part, with the same tolerance. Whether the warm-up is a part of its own
  depends on the script (a timm cosine counts its warm-up in its length, a SequentialLR does
  not), so each way is tried.
A warm-up is the epochs before the first at the run's peak lr; a cool-down the epochs after the
first at the run's last lr, where that lies below the peak (timm's `--cooldown-epochs` at its
lr_min; a cosine's last epoch alone is none).

Where the warm-up is held or rounded, the shorter run's main schedule starts earlier or later on
its curve than regular's compressed (a cosine that counts the warm-up in its length starts a
warm-up rounded down at a larger lr than regular ever logs), so regular's main curve is carried
back over its warm-up, on the straight line of its first two epochs, as the lr regular would have
reached there; the shorter run's epochs may match that too. A main schedule that does not
follow the epochs (a cosine of fixed length, milestones left uncompressed) is off in every view:
its epochs near the end stay at an lr regular has long left (tests/test_warmup.py sweeps timm's
scheduler both ways).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Phases:
    """A run's lr per epoch as warm-up, main schedule and cool-down (epoch counts)."""

    epochs: int
    warmup: int
    cooldown: int


SAME = 1e-9  # of the peak lr: two lrs this close are one (float noise); a cosine's tail near 0 is not


def phases(lrs: Sequence[float]) -> Phases:
    """The run's warm-up and cool-down."""
    peak = max(lrs)
    gap = SAME * abs(peak)
    warmup = next(i for i, lr in enumerate(lrs) if lr >= peak - gap)
    last, cooldown = lrs[-1], 0
    if last < peak - gap:  # the epochs after the first at the last lr: a cosine's last epoch is none
        while cooldown < len(lrs) - warmup - 1 and abs(lrs[-2 - cooldown] - last) <= gap:
            cooldown += 1
    return Phases(len(lrs), warmup, cooldown)


def held(regular: int, shorter: int, factor: float) -> bool:
    """A part of `shorter` epochs is regular's `regular` held fixed, or scaled by `factor` and
    rounded to whole epochs (down or up)."""
    return shorter in (regular, math.floor(regular * factor), math.ceil(regular * factor))


@dataclass(frozen=True)
class Window:
    """Regular's lr around one epoch of the shorter run: from low to high, over regular's epochs first–last."""

    low: float
    high: float
    first: int
    last: int

    def gap(self, lr: float) -> float:
        return max(self.low - lr, lr - self.high)


def _span(n: int, m: int, j: int) -> tuple[int, int]:
    """Regular's epochs (of n) within one of the shorter run's epochs (of m) of its epoch j."""
    k = n / m
    centre = 0.5 + (j - 0.5) * k
    first, last = max(1, math.ceil(centre - k)), min(n, math.floor(centre + k))
    if first > last:  # a run over twice regular's length (no shorter arm): its nearest epoch
        first = last = min(n, max(1, round(centre)))
    return first, last


def carried_back(regular: Sequence[float], warmup: int) -> list[float | None]:
    """Regular's main curve carried back over its warm-up epochs (None after them): the peak,
    plus its first epochs' fall per epoch for each epoch back."""
    if warmup == 0:
        return [None] * len(regular)
    peak = regular[warmup]
    fall = max(0.0, peak - regular[warmup + 1]) if warmup + 1 < len(regular) else 0.0
    return [peak + fall * (warmup - i) if i < warmup else None for i in range(len(regular))]


View = tuple[list[int], list[int], bool]  # the shorter run's parts, regular's (epochs before each), carried back


def views(regular: Phases, shorter: Phases) -> list[View]:
    """The ways of lining the runs up: by the whole run, and with a warm-up or cool-down held or
    rounded taken apart. A short run's warm-up may end an epoch after its peak (its last epoch
    above the start of the cosine), so that boundary is tried too."""
    n, m, factor = regular.epochs, shorter.epochs, shorter.epochs / regular.epochs
    warmups = [w for w in (shorter.warmup, shorter.warmup + 1) if w < m and held(regular.warmup, w, factor)]
    ends: list[tuple[list[int], list[int]]] = [([], [])]
    if held(regular.cooldown, shorter.cooldown, factor):
        ends.append(([m - shorter.cooldown], [n - regular.cooldown]))
    found: list[View] = []
    for mine, theirs in ends:
        found.append(([0, *mine, m], [0, *theirs, n], bool(warmups)))
        for w in warmups:
            if w <= ([*mine, m])[0] and regular.warmup <= ([*theirs, n])[0]:
                found.append(([0, w, *mine, m], [0, regular.warmup, *theirs, n], False))
    return found


def windows(regular: Sequence[float], shorter: Sequence[float]) -> list[list[Window]]:
    """For each epoch of `shorter`, the windows of regular's curve it may lie in (any one will do)."""
    theirs = phases(regular)
    back = carried_back(regular, theirs.warmup)
    out: list[list[Window]] = [[] for _ in shorter]
    for ours, their, carry in views(theirs, phases(shorter)):
        for part in range(len(ours) - 1):
            length, size = ours[part + 1] - ours[part], their[part + 1] - their[part]
            if not size:  # regular has no such part (a warm-up of none)
                continue
            for j in range(ours[part] + 1, ours[part + 1] + 1):
                a, b = _span(size, length, j - ours[part])
                first, last = their[part] + a, their[part] + b
                carried = [v for v in back[first - 1 : last] if v is not None] if carry else []
                values = [*regular[first - 1 : last], *carried]
                out[j - 1].append(Window(min(values), max(values), first, last))
    return out

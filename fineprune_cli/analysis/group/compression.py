"""Whether a shorter arm trained regular's learning-rate schedule compressed to its epochs, read off
the learning rate each run logged per epoch.

Training fewer epochs is the cheap alternative C(p) of the decisions only when the shorter run
follows the regular schedule compressed, as `arms.shorter_schedule` compresses the built-in
trainer's epochs, milestones and warm-up. A script's own schedule need not: a cosine with a fixed
T_max (kuangliu's pytorch-cifar has T_max=200) stops a shorter arm part way down its curve, at a
large learning rate, which is not the regular schedule trained for fewer epochs. So each epoch j
of a shorter run (E' epochs) is held against regular's epochs (E of them) within one of the
shorter run's epochs (E/E' of regular's) of the same point of training, regular's epoch
(j - 1/2)·E/E' + 1/2: its lr must lie within theirs (or, where the arm's warm-up or cool-down is
regular's held fixed or rounded to whole epochs, within theirs phase by phase: `lrphases`). Rounding a compressed milestone or the arm's
epochs moves a step by less than that, and a script may log its lr before or after its scheduler
steps. An arm off by more is named beside every decision that reads it; one whose runs log no lr
(a script that passes none to `run.log` records 0) is said not to be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ...arms import REGULAR
from .groups import Context, Groups, is_shorter
from .lrphases import windows

REL = 1e-4  # of the largest lr logged: float noise, or an lr logged rounded, is no other schedule
ADVICE = (
    "derive the script's main schedule from {epochs} (CosineAnnealingLR's T_max = epochs, milestones from "
    "{milestones}; a warm-up or cool-down may stay fixed or be scaled to whole epochs), then compare again "
    "into a new --out (docs/howto/own-script.md)"
)


@dataclass(frozen=True)
class Mismatch:
    """The epoch of a shorter run furthest off regular's curve compressed, and regular's lr there."""

    epoch: int
    epochs: int  # the shorter run's
    lr: float
    low: float  # regular's lr around the same point of training: from low to high
    high: float
    first: int  # regular's epochs read there
    last: int

    def text(self) -> str:
        return (
            f"epoch {self.epoch} of {self.epochs} at lr {self.lr:.3g}, where regular's epochs {self.first}–"
            f"{self.last}, the same point of training, are at {self.low:.3g}–{self.high:.3g}"
        )


def logged(lrs: Sequence[float]) -> bool:
    """Whether a run logged its learning rate (one that logged none records 0 every epoch)."""
    return any(lr != 0 for lr in lrs)


def mismatch(regular: Sequence[float], shorter: Sequence[float]) -> Mismatch | None:
    """The epoch at which `shorter` (its lr per epoch) is furthest from `regular`'s curve
    compressed to its epochs (`lrphases`: by the share of the run, or phase by phase where a
    warm-up or cool-down is held fixed or rounded); None when every epoch is on it."""
    if not regular or not shorter:
        return None
    worst, gap = None, REL * max(abs(lr) for lr in [*regular, *shorter])  # within it: float noise
    for j, (lr, found) in enumerate(zip(shorter, windows(regular, shorter)), start=1):
        near = min(found, key=lambda w: w.gap(lr))  # the view that puts this epoch on the curve, if any
        if near.gap(lr) > gap:
            worst, gap = Mismatch(j, len(shorter), lr, near.low, near.high, near.first, near.last), near.gap(lr)
    return worst


@dataclass(frozen=True)
class Compression:
    """A shorter arm's schedule against its context's regular, seed by seed: the seeds checked
    (both runs logged an lr) and those off regular's curve compressed, with the epoch furthest off."""

    context: Context
    arm: str  # the row's name
    checked: tuple[int, ...]
    off: dict[int, Mismatch] = field(default_factory=dict)
    unlogged: tuple[int, ...] = ()  # seeds both runs have, where one of them logged no lr

    @property
    def state(self) -> str:
        if self.off:
            return "not compressed"
        return "compressed" if self.checked else "not checked"

    @property
    def name(self) -> str:
        return f"{self.context.model} on {self.context.label}, {self.arm}"

    def why_unchecked(self) -> str:
        if self.unlogged:
            return "its runs, or regular's, log no learning rate (pass `lr=` to `run.log` every epoch)"
        return "no seed has both it and regular"

    def off_text(self) -> str:
        seed = min(self.off)
        more = f"; off in seeds {', '.join(map(str, sorted(self.off)))}" if len(self.off) > 1 else ""
        return f"seed {seed}: {self.off[seed].text()}{more}"


def compression(groups: Groups) -> list[Compression]:
    """Every shorter row of a context that holds regular, checked against regular seed by seed."""
    found = []
    for context, by in groups.items():
        regular = by.get(REGULAR, {})
        for arm in (p for p in by if is_shorter(p) and regular):
            shared = [s for s in sorted(by[arm]) if s in regular]
            lrs = {s: ([r.lr for r in regular[s].metrics], [r.lr for r in by[arm][s].metrics]) for s in shared}
            checked = tuple(s for s in shared if logged(lrs[s][0]) and logged(lrs[s][1]))
            off = {s: m for s in checked if (m := mismatch(*lrs[s])) is not None}
            found.append(Compression(context, arm, checked, off, tuple(s for s in shared if s not in checked)))
    return found


def lines(found: list[Compression]) -> list[str]:
    """What the terminal and index.md say, one paragraph an item (the arms off regular's schedule
    make one, a list): the arms off regular's schedule, what to do, the arms not checked."""
    off = [a for a in found if a.off]
    unchecked = [a for a in found if a.state == "not checked"]
    out = []
    if off:
        n = len(off)
        out += [
            f"{n} shorter arm{'s' if n != 1 else ''} did not train regular's learning-rate schedule compressed to "
            f"{'their' if n != 1 else 'its'} epochs, so {'they are' if n != 1 else 'it is'} not training fewer "
            "epochs of this schedule (named beside each decision that reads it):",
            "\n".join(f"- {a.name}, {a.off_text()}" for a in off),
            f"What to do: {ADVICE}.",
        ]
    out += [f"{a.name}: its schedule was not checked, as {a.why_unchecked()}." for a in unchecked]
    return out


def beside(context: Context, arms: Sequence[str], found: list[Compression]) -> list[str]:
    """The lines a decision's chain gives the shorter arms its C(p) reads, where one is off
    regular's schedule or was not checked."""
    out = []
    for a in (a for a in found if a.context == context and a.arm in arms):
        if a.off:
            out.append(
                f"  - C(p) reads {a.arm}, which did not train regular's learning-rate schedule compressed to its "
                f"epochs ({a.off_text()}): it is not training fewer epochs of this schedule; {ADVICE}."
            )
        elif a.state == "not checked":
            out.append(f"  - C(p) reads {a.arm}, whose schedule was not checked: {a.why_unchecked()}.")
    return out

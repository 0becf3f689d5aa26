"""Runs that collapsed: complete, plausible records whose training failed all the same.

A new user's InfoBatch seed sat at chance level (25.0% of 4 classes) from epoch 4 on and was
averaged in like any other seed (−16.3 ± 14 points), with nothing said. Such a run is named
wherever the decisions are shown (the terminal of `compare` and `report`, and index.md), with
what to try. It stays in the decisions: a collapse is something the policy did at these
settings, as much its outcome as a good run is, and leaving out the seeds that went badly would
bias every comparison towards the policy that collapses (and break the plan's seed counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from .runs import Run

CHANCE_FACTOR = 1.2  # at or below 1.2 x chance level (30% of 4 classes): the model learnt nothing
FLAT = 0.9  # a last training loss above 0.9 x the first epoch's did not fall: flat, or diverging
MIN_EPOCHS = 3  # fewer epochs say nothing about a loss's course
BUILT_IN_CLASSES = {"fashion-mnist": 10, "mnist": 10, "cifar10": 10, "cifar100": 100}  # runs before `classes`
ADVICE = (
    "a lower --lr (e.g. half) or a longer train.warmup_epochs usually avoids it; compare again with "
    "them into a new --out (this folder's plan and settings stay as they are)"
)


@dataclass(frozen=True)
class Collapse:
    run: Run
    reason: str

    @property
    def name(self) -> str:
        return f"{self.run.summary.model} on {self.run.label}, {self.run.policy}, seed {self.run.seed}"


def classes_of(run: Run) -> int | None:
    """The run's label classes: recorded, else known for a built-in dataset, else None."""
    recorded = run.summary.classes
    if isinstance(recorded, int) and recorded >= 2:
        return recorded
    return BUILT_IN_CLASSES.get(run.summary.dataset)


def at_chance(run: Run) -> str | None:
    """'at chance level (25% of 4 classes) from epoch 4 on', where the last epoch is."""
    classes = classes_of(run)
    if classes is None:
        return None
    chance = 100 / classes
    rows = run.metrics
    if not rows or rows[-1].test_accuracy > CHANCE_FACTOR * chance:
        return None
    first = len(rows)
    while first > 1 and rows[first - 2].test_accuracy <= CHANCE_FACTOR * chance:
        first -= 1
    return (
        f"test accuracy {rows[-1].test_accuracy:g}% at chance level ({chance:.3g}% for {classes} classes)"
        f" from epoch {first} on"
    )


def flat_loss(run: Run) -> str | None:
    """'training loss did not fall (epoch 1: 1.21, epoch 23: 1.39)', where it did not."""
    rows = run.metrics
    if len(rows) < MIN_EPOCHS or rows[-1].train_loss <= FLAT * rows[0].train_loss:
        return None
    trend = "rose" if rows[-1].train_loss > rows[0].train_loss else "did not fall"
    return f"training loss {trend} (epoch 1: {rows[0].train_loss:.3g}, epoch {len(rows)}: {rows[-1].train_loss:.3g})"


def collapsed(runs: list[Run]) -> list[Collapse]:
    """The runs that collapsed, in the order given, each with what shows it."""
    found = []
    for run in runs:
        reasons = [r for r in (at_chance(run), flat_loss(run)) if r]
        if reasons:
            found.append(Collapse(run, "; ".join(reasons)))
    return found


def lines(found: list[Collapse]) -> list[str]:
    """What the terminal and index.md say: each run, and that it stays in the decisions."""
    if not found:
        return []
    n = len(found)
    head = (
        f"{n} run{'s' if n != 1 else ''} collapsed and {'are' if n != 1 else 'is'} kept in the decisions "
        "as an outcome of its arm (docs/decisions.md):"
    )
    return [head, *(f"- {c.name} ({c.run.path}): {c.reason}" for c in found), f"What to do: {ADVICE}."]

"""What a script's `run.log()` may record, checked as it is logged: a figure outside its meaning
(a NaN lr, negative seconds, -3 or 10^30 samples, an accuracy that is no whole number of the
test images) fails the run at once, naming the field and its value, where a report would
otherwise leave the run out later without a word to the script's author. A loss that is no
longer finite (or past `MAX_LOSS`) is not refused: that run diverged, a legitimate record, kept
with status 'diverged' as the built-in trainer keeps its own (`engine.training.totals.mark_diverged`)."""

from __future__ import annotations

import math
import operator
from typing import Any

from ..engine.records.bounds import MAX_LOSS, MAX_LR, MAX_SECONDS, on_grid
from ..errors import ConfigError


class ScriptError(ConfigError):
    """The script and its run disagree (a seed, the epochs, the order of its records, a figure)."""


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ScriptError(f"run.log(): {name} {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ScriptError(f"run.log(): {name} {value!r} is not a number") from None


def _within(name: str, value: Any, high: float, what: str) -> float:
    number = _number(name, value)
    if not (math.isfinite(number) and 0 <= number <= high):
        raise ScriptError(f"run.log(): {name} {value!r} is not {what} (0 to {high:g})")
    return number


def samples(value: Any, num_train: int) -> int:
    """The samples an epoch trained: a whole number from 0 to the run's training samples."""
    try:
        count = operator.index(value)  # an int, or numpy's or a 0-d tensor's; 2.5 or 8.0 are not counts
        if isinstance(value, bool):
            raise TypeError
    except TypeError:
        raise ScriptError(f"run.log(): samples {value!r} is not a whole number of samples") from None
    if not 0 <= count <= num_train:
        raise ScriptError(f"run.log(): samples {count} is not between 0 and the run's {num_train} training samples")
    return count


def seconds(value: Any) -> float:
    return _within("train_seconds", value, MAX_SECONDS, "a duration in seconds")


def lr(value: Any) -> float:
    return _within("lr", value, MAX_LR, "a learning rate")


def accuracy(value: Any, num_test: int) -> float:
    """Percent of the test images, and (where the script gave num_test) a whole number of them."""
    number = _within("test_accuracy", value, 100, "a percentage")
    if num_test > 0 and not on_grid(number, num_test):
        raise ScriptError(
            f"run.log(): test_accuracy {value!r} is no whole number of the run's {num_test} test images "
            f"(each is {100 / num_test:.4g} pt): give the percentage of test images right"
        )
    return number


def loss(name: str, value: Any, measured: bool = True) -> tuple[float, bool]:
    """(the loss, whether it diverged): not finite or past MAX_LOSS is divergence, below 0 no loss.
    A test loss not `measured` (NaN, the default: not given) is neither."""
    number = _number(name, value)
    if math.isnan(number) and not measured:
        return number, False
    if number < 0:
        raise ScriptError(f"run.log(): {name} {value!r} is below 0: not a loss")
    return number, not (math.isfinite(number) and number <= MAX_LOSS)


def drawn(policy: str, drew: bool, epoch: int) -> None:
    """A pruning policy acts only through run.sampler(): an epoch whose DataLoader never drew from
    it trained every sample, regular training that would be recorded complete under the policy's
    name with 0% skipped (issue 57); it fails at its first epoch instead."""
    if policy != "regular" and not drew:
        raise ScriptError(
            f"epoch {epoch} was logged under policy {policy}, but the script never drew that epoch's "
            "samples from run.sampler(): it trained regular under the policy's name; give "
            "run.sampler() to the training DataLoader (docs/howto/own-script.md)"
        )

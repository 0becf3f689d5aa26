"""Which epochs prune: Algorithm 2 of Li et al. (2018), with the meaning fixed in README.md.

Epochs are numbered e = 1..n. With window w: position p = e mod w, window k = e // w.
Starting point a_0 = start and a_k = int(a_{k-1} / attenuation), once per new window
(the paper's text; its pseudocode would divide at every epoch after the first window).
Epoch e prunes iff p >= a_k and e mod block < count.

`--anneal δ` (any policy) stops pruning after epoch floor(δ·n): `last_pruning_epoch`.

Unset, the window and the starting point are the paper's shares of the run's length n
(`paper_window`, `paper_start`): w = 30% and a_0 = 15% of n, rounded half up, so 200 epochs
give the paper's 60 and 30 and shorter runs a proportionate schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError

WINDOW_PERCENT, START_PERCENT = 30, 15  # the paper's w = 60, a_0 = 30 of n = 200 epochs


def percent_of(epochs: int, percent: int) -> int:
    """percent% of epochs rounded half up, in integers (no float ties: 15% of 30 is 5)."""
    return (epochs * percent + 50) // 100


def paper_window(epochs: int) -> int:
    """w = 30% of the run, at least one epoch."""
    return max(1, percent_of(epochs, WINDOW_PERCENT))


def paper_start(epochs: int, window: int) -> int:
    """a_0 = 15% of the run, kept inside the window (a_0 < w; only runs under 7 epochs need it)."""
    return min(percent_of(epochs, START_PERCENT), window - 1)


@dataclass(frozen=True)
class PruneSchedule:
    window: int = 60
    start: int = 30
    attenuation: float = 2.0
    block: int = 2
    count: int = 1

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ConfigError(f"--window must be >= 1, got {self.window}")
        if not 0 <= self.start < self.window:
            raise ConfigError(f"--start must be in [0, window={self.window}), got {self.start}")
        if self.block < 1:
            raise ConfigError(f"--block must be >= 1, got {self.block}")
        if not 1 <= self.count <= self.block:
            raise ConfigError(f"--count must be in [1, block={self.block}], got {self.count}")
        if not self.attenuation >= 1:
            raise ConfigError(f"--attenuation must be >= 1, got {self.attenuation}")

    def window_index(self, epoch: int) -> int:
        return epoch // self.window

    def position(self, epoch: int) -> int:
        return epoch % self.window

    def resets(self, epoch: int) -> bool:
        """DroppingCount is cleared at the start of this epoch (Algorithm 1, line 1)."""
        return epoch % self.window == 0

    def starting_point(self, k: int) -> int:
        points = self._points()
        return points[min(k, len(points) - 1)]

    def _points(self) -> tuple[int, ...]:
        """a_0, a_1, ... up to the fixed point, computed once: an attenuation just above 1
        lowers a by one a window, and recomputing per epoch made long runs quadratic."""
        cached = self.__dict__.get("_cache")
        if cached is None:
            points = [self.start]
            while points[-1] > 0 and self.attenuation > 1:
                nxt = int(points[-1] / self.attenuation)
                if nxt == points[-1]:
                    break
                points.append(nxt)
            cached = tuple(points)
            object.__setattr__(self, "_cache", cached)  # frozen dataclass: a derived value only
        return cached

    @classmethod
    def paper(cls, epochs: int) -> "PruneSchedule":
        """The paper's schedule scaled to a run of `epochs`: window 30%, start 15% of it."""
        window = paper_window(epochs)
        return cls(window, paper_start(epochs, window))

    @classmethod
    def from_config(cls, cfg) -> "PruneSchedule":
        """The schedule of a `PruneConfig`'s fields (raises ConfigError when invalid)."""
        return cls(cfg.window, cfg.start, cfg.attenuation, cfg.block, cfg.count)

    def prunes(self, epoch: int, last: int | None = None) -> bool:
        """Algorithm 2, lines 5-6, and not past `last` (`--anneal`: `last_pruning_epoch`). The
        schedule's half of a policy's `prunes`, which adds that m > 0."""
        a = self.starting_point(self.window_index(epoch))
        return not annealed(epoch, last) and self.position(epoch) >= a and epoch % self.block < self.count

    def pruning_epochs(self, epochs: int, last: int | None = None) -> list[int]:
        return [e for e in range(1, epochs + 1) if self.prunes(e, last)]

    def first_pruning_epoch(self) -> int | None:
        """The first epoch that prunes in a run of any length, None if none ever does (window
        10, start 9, block 2, attenuation 1: position 9 always falls on an odd epoch). a_k stops
        falling after len(points) windows; from there the pattern repeats every lcm(w, block)."""
        horizon = self.window * len(self._points()) + math.lcm(self.window, self.block)
        return next((e for e in range(1, horizon + 1) if self.prunes(e)), None)

    def window_ends(self, epoch: int, epochs: int) -> bool:
        """Last epoch of a window (its counts are final) or of the run."""
        return self.resets(epoch + 1) or epoch == epochs


def formula_n_prune(epochs: int, window: int, start: int, block: int, count: int) -> int:
    """n_prune from the paper's Formulas 3/4 as printed (r = PruningBlock, c = PruningCount).

    They ignore attenuation, count a whole remainder (w - a) mod r as pruning epochs and
    assume every window's block starts at a; a negative tail (n mod w < a) is taken as 0.
    """
    per_window = ((window - start) // block) * count + (window - start) % block
    n = per_window * (epochs // window)
    if epochs % window:
        tail = max(epochs % window - start, 0)
        n += (tail // block) * count + tail % block
    return n


def counts_empty(epoch: int, window: int) -> bool:
    """Whether fine-pruning's DroppingCount holds no observation when epoch `epoch` selects:
    Algorithm 1 cleared it at this epoch's start (the epoch opens a window, e mod w = 0), or
    nothing has trained yet (epoch 1). A selection then rests on the seeded tie order alone."""
    return epoch % window == 0 or epoch == 1


def last_pruning_epoch(anneal: float | None, epochs: int | None, in_float: bool = False) -> int | None:
    """The last epoch that may prune under `--anneal δ`: epoch e prunes only if e <= δ·n
    (InfoBatch's rule), so floor(δ·n); None when nothing stops pruning (no δ, or δ >= 1).
    `in_float`: δ·n as the float product, as SeTa's code compares it (`e > n * delta`), so
    0.29 x 100 = 28.999... makes 28 the last; otherwise δ·n as the real number (29)."""
    if anneal is None or anneal >= 1:
        return None
    if epochs is None:
        raise ConfigError(f"--anneal {anneal:g} needs the run's length: create the policy with epochs=n")
    return math.floor(anneal * epochs + (0 if in_float else 1e-9))


def annealed(epoch: int, last: int | None) -> bool:
    """Past `last_pruning_epoch`: the epoch trains every sample (seta: its random draw)."""
    return last is not None and epoch > last

"""The statistics behind a report's decisions, from the field's libraries.

Pure numbers, no runs (`analysis.group.paired` supplies per-seed differences, `analysis.decide.decision`
the rules). Student t quantiles from scipy; the randomized-block fit (a sensitivity check only)
and the power of a one-sample t test from statsmodels. An accuracy difference is an `Estimate`:
its mean, the standard error (the comparison's own paired spread; the block model's pooled one
only where a report asks what equal noise would say), and its degrees of freedom, from which
come its bounds and one-sided p-values.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
from scipy import special
from scipy import stats as sps
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.power import TTestPower
from statsmodels.tools.sm_exceptions import SingularMatrixWarning

from ..read.quantum import DEFAULT_QUANTUM

ALPHA = 0.05  # the family-wise error of a report's decisions (the default of `Judging.alpha`)
LEVEL = 0.90  # descriptive intervals (tables, summary.csv's ci90 columns): 90%, two-sided
POWER = 0.80  # "seeds for a decision": the seeds at which one is reached with this chance
MAX_SEEDS = 50  # beyond this, a number of seeds is not a plan; say what 50 could resolve


@lru_cache(maxsize=4096)  # a report asks for the same few (q, df) again and again
def t_quantile(q: float, df: float) -> float:
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return float(sps.t.ppf(q, df))


def _student_tail(t: float, n: int, df: float) -> float:
    # Student's t distribution function as scipy's special function: the same values as
    # scipy.stats.t.cdf, without its argument checking (a simulated procedure asks thousands)
    return float(special.stdtr(df, t))


def _student_critical(a: float, n: int, df: float) -> float:
    return t_quantile(1 - a, df)


@dataclass(frozen=True)
class Shape:
    """What a one-sided test reads its p-value and its critical value off, for the t statistic of
    a difference over `n` seeds on `df` degrees of freedom: `tail(t, n, df)` = P(T <= t) under
    the shape the test holds for (the other tail by symmetry of the claim: each one-sided test
    takes the skew toward its own tail), and `critical(a, n, df)` the c > 0 with tail(-c) = a.
    Student's t holds for normal differences; `analysis.decide.shape` gives one that holds for
    skewed ones too."""

    name: str
    tail: Callable[[float, int, float], float]
    critical: Callable[[float, int, float], float]

    def level(self, a: float, n: int) -> float:
        """The level of Student's t with this shape's critical value at `a` over `n` seeds:
        what a test at `a` is under normal differences (the power of the advice)."""
        return a if self is STUDENT else _student_tail(-self.critical(a, n, n - 1), n, n - 1)


STUDENT = Shape("normal", _student_tail, _student_critical)


@dataclass(frozen=True)
class Estimate:
    """A mean difference over `n` seeds with its standard error on `df` degrees of freedom.
    `sd` is the per-seed spread used (pooled, or the paired one), `pooled` says which; the 90%
    interval is never narrower than ± one test image. Its one-sided tests (the p-values and the
    bounds a claim reads off) hold for `shape`; its descriptive intervals are Student's."""

    mean: float
    se: float
    df: float
    n: int
    sd: float
    pooled: bool
    shape: Shape = STUDENT

    def with_shape(self, shape: Shape) -> "Estimate":
        """The same estimate, its tests holding for `shape` (dataclasses.replace, without its
        field-by-field introspection: a simulated procedure makes tens of thousands)."""
        return Estimate(self.mean, self.se, self.df, self.n, self.sd, self.pooled, shape)

    def bounds(self, level: float = LEVEL) -> tuple[float, float]:
        half = t_quantile(0.5 + level / 2, self.df) * self.se
        return self.mean - half, self.mean + half

    def claim_bounds(self, a: float) -> tuple[float, float]:
        """The one-sided bounds a decision at level `a` tests: the lower at `a` (each test of
        'worth it'), the upper at a / 2 (each route of 'not worth it'), so a claim reads off them."""
        lower = self.mean - self.shape.critical(a, self.n, self.df) * self.se
        upper = self.mean + self.shape.critical(a / 2, self.n, self.df) * self.se
        return lower, upper

    @property
    def low(self) -> float:
        return self.bounds()[0]

    @property
    def high(self) -> float:
        return self.bounds()[1]

    def p_above(self, threshold: float) -> float:
        """One-sided p-value for 'the true difference exceeds `threshold`' (H0: at most it)."""
        return self.shape.tail(-(self.mean - threshold) / self.se, self.n, self.df)

    def p_below(self, threshold: float) -> float:
        """One-sided p-value for 'the true difference is below `threshold`' (H0: at least it)."""
        return self.shape.tail((self.mean - threshold) / self.se, self.n, self.df)

    def fmt(self, digits: int = 2, bounds: tuple[float, float] | None = None) -> str:
        """'+0.11 [-1.93, +2.16]': signed, with the 90% interval or the `bounds` given."""
        low, high = bounds or self.bounds()
        return f"{self.mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _estimate(mean: float, sd: float, n: int, df: float, pooled: bool, quantum: float) -> Estimate:
    """No interval narrower than ± one test image: below that the test set cannot tell."""
    se = max(sd / math.sqrt(n), quantum / t_quantile(1 - ALPHA, df))
    return Estimate(mean, se, df, n, sd, pooled)


def paired_estimate(diffs: list[float], quantum: float = DEFAULT_QUANTUM) -> Estimate | None:
    """The comparison's own paired t; None below two seeds (one seed has no spread), and None when
    the differences spread by less than one test image: a zero spread is no evidence of precision."""
    n = len(diffs)
    if n < 2:
        return None
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    if sd < quantum:
        return None
    return _estimate(mean, sd, n, n - 1, False, quantum)


def pooled_estimate(
    diffs: list[float], norms: list[float], sigma: float, df: float, quantum: float = DEFAULT_QUANTUM
) -> Estimate | None:
    """A mean of per-seed contrasts whose coefficients have squared norms `norms` (2 for a plain
    difference), with the block model's residual sd `sigma`: Var = sigma^2 * sum(norms) / n^2."""
    n = len(diffs)
    if n < 1 or df < 1:
        return None
    return _estimate(statistics.fmean(diffs), sigma * math.sqrt(statistics.fmean(norms)), n, df, True, quantum)


def block_residual(cells: dict[tuple[str, int], float]) -> tuple[float, int] | None:
    """Residual sd and df of the randomized-block model y = arm + seed + error over the cells
    (arm, seed) -> value; None when no degree of freedom is left."""
    arms = sorted({a for a, _ in cells})
    seeds = sorted({s for _, s in cells})
    if not arms:
        return None
    keys = list(cells)
    x = np.zeros((len(keys), 1 + len(arms) - 1 + len(seeds) - 1))
    x[:, 0] = 1.0
    for row, (a, s) in enumerate(keys):
        if arms.index(a):
            x[row, arms.index(a)] = 1.0
        if seeds.index(s):
            x[row, len(arms) - 1 + seeds.index(s)] = 1.0
    y = np.array([cells[k] for k in keys])
    with warnings.catch_warnings():
        # expected where seeds lack arms (an arm of one seed only is that seed's column again):
        # the pseudo-inverse fit is still the least-squares one and df_resid counts the rank,
        # so the residual is right; the library's warning printed once per policy and look
        warnings.simplefilter("ignore", SingularMatrixWarning)
        fit = OLS(y, x).fit()
    df = int(round(fit.df_resid))
    if df < 1:
        return None
    return math.sqrt(max(fit.ssr, 0.0) / df), df


def power(effect: float, sd: float, n: int, alpha: float, shape: Shape = STUDENT) -> float:
    """Chance that a one-sided one-sample t test at `alpha` over `n` seeds, its critical value
    the `shape`'s, shows a true difference `effect` (in the direction tested) with per-seed sd
    `sd` and normal noise: the noncentral t."""
    if n < 2 or sd <= 0:
        return 0.0
    level = shape.level(alpha, n)
    value = float(TTestPower().power(effect_size=effect / sd, nobs=n, alpha=level, alternative="larger"))
    # the library's noncentral t gives NaN far in its tails (an effect of -5 sd at alpha 0.0005)
    return value if not math.isnan(value) else (0.0 if effect < 0 else 1.0)


def seeds_for(chance: Callable[[int], float], target: float = POWER) -> int | None:
    """The fewest seeds (2 .. MAX_SEEDS) at which `chance(n)`, rising in n, reaches `target`;
    None when not even MAX_SEEDS do. Bisection: a report asks this for every undecided policy."""
    if chance(MAX_SEEDS) < target:
        return None
    low, high = 1, MAX_SEEDS  # chance(low) < target <= chance(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if chance(mid) >= target else (mid, high)
    return high


def resolvable(sd: float, alpha: float, n: int = MAX_SEEDS, target: float = POWER, shape: Shape = STUDENT) -> float:
    """The smallest difference (points) that `n` seeds show with probability `target` at `alpha`."""
    level = shape.level(alpha, n)
    size = TTestPower().solve_power(effect_size=None, nobs=n, alpha=level, power=target, alternative="larger")
    return float(size) * sd


def rate_excluded(events: int, n: int, level: float = 0.95) -> float:
    """The one-sided upper bound on a rate after `events` in `n` independent runs (Clopper and
    Pearson's exact bound): rates above it are excluded at `level`. 0 of 5: 45%."""
    if events >= n:
        return 1.0
    return float(sps.beta.ppf(level, events + 1, n - events))


DRAWS = 4000  # Monte Carlo draws of a predictive chance: its own error is at most 0.8 points


def predictive_power(
    effect: float, sd: float, n: int, total: int, alpha: float, draws: int = DRAWS, shape: Shape = STUDENT
) -> float:
    """The chance that a one-sided one-sample t test at `alpha` over `total` seeds rejects, the
    `n` seeds observed so far (mean `effect` in the direction tested, spread `sd`) among them,
    averaged over what those seeds leave uncertain: the true spread (its posterior under the
    reference prior, (n - 1) sd² / χ²(n - 1)) and the true difference (normal about `effect`),
    then the `total - n` seeds still to come. Not the power at the observed difference: that
    takes a noisy guess for the truth, and with 2 or 3 seeds promised chances well above those
    realised (docs/decisions.md has both, simulated)."""
    if n < 2 or sd <= 0 or total <= n:
        return 0.0
    rng = np.random.default_rng(0)  # the same report gives the same advice
    more = total - n
    sigma = sd * np.sqrt((n - 1) / rng.chisquare(n - 1, draws))
    truth = rng.normal(effect, sigma / np.sqrt(n))
    future = rng.normal(truth, sigma / np.sqrt(more))
    spread = sigma**2 * rng.chisquare(more - 1, draws) if more > 1 else np.zeros(draws)
    mean = (n * effect + more * future) / total
    ss = (n - 1) * sd**2 + spread + n * more / total * (effect - future) ** 2
    t = mean / np.sqrt(ss / (total - 1) / total)
    return float(np.mean(t > shape.critical(alpha, total, total - 1)))

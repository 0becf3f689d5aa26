"""The decision procedure simulated end to end: per-seed final accuracies drawn from a known
model, made into in-memory runs, and decided by `analysis.decide.decision.decide` itself, many times.
Shared by tests/test_decision_simulation.py and experiments/decisions/simulate.py (which writes
the error and power tables of docs/decisions.md); imported as a plain module, as `factories` is.

The model: accuracy = 90 + arm mean + seed effect (sd 0.2, shared by every arm of a seed) +
noise (sd sigma, times `noisier` for a policy's arm), on a 10,000-image test set's grid. Each
policy has a budget and the shorter-schedule arm(s) at that budget, so its cheap alternative C(p)
is training fewer epochs, read at one arm or (`interpolated`) between two. A truth is, per
policy, (its change against regular, its change against C(p)); a report is wrong when it says
*worth it* where that is false, or *not worth it* where that is false.

Two departures from normal noise, each in one arm *role* (every policy, regular, or every arm of
C(p)), so that the paired differences are what departs (a skew in every arm would cancel):
- `skew` (role, g): that role's noise skewed (`family`, gamma by default) so that each paired
  difference it enters has skewness g (positive: a long tail of the policy minus its baseline
  upward), its sd unchanged;
- `fail` (role, rate, size): each run of that role ends `size` points low with chance `rate`.
  The truth is of the runs that do not fail (`truth_of` "bulk", what the decisions claim since
  issue 56), or of the arm's mean, failures included ("mean", what the rule before claimed).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize
from scipy import stats as sps

from factories import N, make
from fineprune_cli.analysis.decide.decision import NOT_WORTH, WORTH, decide
from fineprune_cli.analysis.decide.sequence import replay
from fineprune_cli.analysis.group.groups import Context
from fineprune_cli.analysis.read.runs import Run
from fineprune_cli.arms import REGULAR, shorter_arm

try:  # the judging settings moved to their own module with the 5%-holds issue; the old code had them here
    from fineprune_cli.analysis.decide.judging import Judging
except ImportError:  # pragma: no cover - only when this harness is run against older decision code
    from fineprune_cli.analysis.decide.decision import Judging  # type: ignore[no-redef]

M = Judging().margin
GAIN = Judging().gain
ALPHA = 0.05
EPOCHS = 20  # a shorter arm at budget b trains round(20 (1 - b)) epochs: 5% steps land exactly
POLICIES = ("fine", "infobatch", "ucb", "egreedy", "kakurenbo")  # scored policies, in this order
SEED_SD = 0.2
CTX = Context("lenet", "simulated")

# truths (change against regular, change against C(p))
WORTH_EDGE = (-M, 1.0)  # exactly m below regular: worth it is false, not worth it true (the half-line)
NOT_WORTH_EDGE = (0.0, GAIN + 1e-9)  # just past the minimum gain over C(p): not worth it is false
LEVEL_WITH_C = (0.0, 0.0)  # level with C(p): worth it is false, not worth it true
CLEARLY_WORTH = (0.0, 1.0)
CLEARLY_NOT = (-2.0, -2.0)


def wrong(word: str, truth: tuple[float, float]) -> bool:
    """Whether a decision's word contradicts the truth. The claims cover every truth (not worth
    it includes its boundary: Δ_reg <= -m or Δ_C <= δ), so at most one of the two is false."""
    d_reg, d_c = truth
    worth_true = d_reg > -M and d_c > 0
    not_worth_true = d_reg <= -M or d_c <= GAIN
    return (word == WORTH and not worth_true) or (word == NOT_WORTH and not not_worth_true)


def _run(policy: str, seed: int, final: float, epochs: int = EPOCHS, skipped: int = 0, arm: str = "") -> Run:
    """A run of the simulated report: its last epoch's row only (what a decision reads)."""
    return make(policy, seed, final, epochs, skipped, arm, dataset="sim", label=CTX.label, curve=False)


@dataclass(frozen=True)
class Design:
    """What one simulated report holds: the truths, seeds, noise, and how C(p) is read."""

    truths: tuple[tuple[float, float], ...]
    seeds: int = 5
    sigma: float = 0.2
    noisier: tuple[float, ...] = ()  # per policy: its arm's sd over sigma (default 1)
    interpolated: bool = False  # C(p) read between two shorter arms (budgets on 5% steps, policies between)
    skew: tuple[str, float] | None = None  # (role, skewness of the differences it enters)
    family: str = "gamma"  # the skewed role's noise: gamma, weibull, lognormal
    fail: tuple[str, float, float] | None = None  # (role, chance a run fails, points it loses)
    truth_of: str = "bulk"  # what the truths are of: the runs that do not fail, or the arm's mean

    def role(self, name: str) -> str:
        """An arm's role: policy, regular or cheap (a shorter arm)."""
        return "regular" if name == REGULAR else "cheap" if name.startswith("shorter") else "policy"

    def budgets(self) -> list[float]:
        """Each policy's budget: its own shorter arm's (10%, 20%, ...), or halfway between two."""
        return [round(0.1 * (i + 1) + (0.05 if self.interpolated else 0.0), 4) for i in range(len(self.truths))]

    def arms(self) -> dict[str, tuple[float, float, dict]]:
        """name -> (mean change against regular, sd factor, kwargs for _run)."""
        out: dict[str, tuple[float, float, dict]] = {REGULAR: (0.0, 1.0, {})}
        budgets = self.budgets()
        lines = [d_reg - d_c for d_reg, d_c in self.truths]  # C(p)'s mean at each policy's budget
        if self.interpolated:  # arms at 10%, 20%, ...: each policy halfway between two of them
            values = [lines[0]]
            for value in lines:
                values.append(2 * value - values[-1])
            shares = [round(0.1 * (i + 1), 4) for i in range(len(values))]
        else:
            values, shares = lines, budgets
        for value, share in zip(values, shares):
            name = shorter_arm(share)
            out[name] = (value, 1.0, {"policy": REGULAR, "arm": name, "epochs": round(EPOCHS * (1 - share))})
        for i, ((d_reg, _), share) in enumerate(zip(self.truths, budgets)):
            factor = self.noisier[i] if i < len(self.noisier) else 1.0
            out[POLICIES[i]] = (d_reg, factor, {"policy": POLICIES[i], "skipped": round(share * EPOCHS * N)})
        return out


def draw(rng: np.random.Generator, design: Design, seeds: int | None = None) -> dict[str, dict[int, Run]]:
    """One report's runs: arm -> seed -> run."""
    n = seeds or design.seeds
    arms = design.arms()
    seed_effect = rng.normal(0.0, SEED_SD, n)
    by: dict[str, dict[int, Run]] = {}
    for name, (mean, factor, kw) in arms.items():
        noise = _noise(rng, design, name, design.sigma * factor, n)
        # rounded at once: np.round is what round() of each numpy float did, at a tenth of the cost;
        # as Python floats, the same numbers, which `make` rounds again far faster than numpy's
        finals = np.round(90.0 + mean + seed_effect + noise, 2).tolist()
        rest = _rest(kw)
        by[name] = {s: _run(kw.get("policy", name), s, finals[s], **rest) for s in range(n)}
    return by


def _noise(rng: np.random.Generator, design: Design, arm: str, sd: float, n: int) -> np.ndarray:
    """An arm's noise over n seeds: normal, or its role's skewed noise, less its role's failures."""
    role = design.role(arm)
    if design.skew and design.skew[0] == role:
        g = design.skew[1]
        sign = math.copysign(1.0, g) * (1.0 if role == "policy" else -1.0)  # a baseline enters with a minus
        noise = sign * sd * standard(rng, design.family, arm_skew(design, abs(g)), n)
    else:
        noise = rng.normal(0.0, sd, n)
    if design.fail and design.fail[0] == role:
        _, rate, size = design.fail
        noise = noise - size * (rng.random(n) < rate) + (rate * size if design.truth_of == "mean" else 0.0)
    return noise


def arm_skew(design: Design, g: float) -> float:
    """The skewness the role's arm needs for its differences to have skewness `g`: a difference
    adds the other arm's normal noise (equal sd: the arm's skewness is g times 2^1.5)."""
    factor = design.noisier[0] if design.noisier and design.skew and design.skew[0] == "policy" else 1.0
    other = 1.0 if design.skew and design.skew[0] == "policy" else (design.noisier[0] if design.noisier else 1.0)
    return g * (factor**2 + other**2) ** 1.5 / factor**3


def standard(rng: np.random.Generator, family: str, skew: float, n: int) -> np.ndarray:
    """n draws of mean 0, sd 1 and skewness `skew` (> 0) from a gamma, Weibull or lognormal."""
    if skew <= 0:
        return rng.normal(0.0, 1.0, n)
    dist, mean, sd = _family(family, round(skew, 6))
    return (dist.rvs(size=n, random_state=rng) - mean) / sd


_FAMILIES: dict = {}


def _family(family: str, skew: float):
    """The frozen distribution, its mean and its sd (scipy's moments cost more than its draws)."""
    key = (family, skew)
    if key not in _FAMILIES:
        if family == "gamma":
            dist = sps.gamma((2 / skew) ** 2)
        elif family == "weibull":
            c = optimize.brentq(lambda c: float(sps.weibull_min(c).stats(moments="s")) - skew, 0.3, 3.6)
            dist = sps.weibull_min(c)
        elif family == "lognormal":
            s = optimize.brentq(lambda s: (math.exp(s * s) + 2) * math.sqrt(math.exp(s * s) - 1) - skew, 1e-4, 3)
            dist = sps.lognorm(s)
        else:
            raise ValueError(f"unknown family {family}")
        mean, var = dist.stats(moments="mv")
        _FAMILIES[key] = dist, float(mean), math.sqrt(float(var))
    return _FAMILIES[key]


def _rest(kw: dict) -> dict:
    return {k: v for k, v in kw.items() if k != "policy"}


NOW = Judging()  # the rule at its defaults
BEFORE = Judging(shape="normal", failure=0.0)  # the rule at 2aeb5f6: Student's t, no failure rule
# Student's t with today's failure rule: where noise is normal, the skew-robust t's slack would hide a
# flaw of another part of the procedure that the harness must still catch.
NORMAL_TAILS = Judging(shape="normal")


def words(by: dict[str, dict[int, Run]], alpha: float = ALPHA, rule: Judging = NOW) -> list[str]:
    """The report's word for each policy, in POLICIES order, as `decide` gives them."""
    found = {d.policy: d.word for d in decide({CTX: by}, ruled(rule, alpha=alpha))}
    return [found[p] for p in POLICIES if p in found]


@functools.lru_cache(maxsize=64)  # one copy of a rule per setting, not one per simulated report
def ruled(rule: Judging, **changes) -> Judging:
    return replace(rule, **changes)


def subset(by: dict[str, dict[int, Run]], n: int) -> dict[str, dict[int, Run]]:
    return {arm: {s: r for s, r in seeds.items() if s < n} for arm, seeds in by.items()}


def looked(
    rng: np.random.Generator,
    design: Design,
    looks: tuple[int, ...],
    per_look: float | None = None,
    allocation: str = "late",
    rule: Judging = NOW,
) -> list[str]:
    """One procedure of planned looks: all seeds drawn up front, then replayed by
    `analysis.decide.sequence.replay` itself (each look decides the first n seeds at its share of
    alpha / k under `allocation`; a decision reached stands). `per_look`: the wrong procedure, every
    look at that level as if it were the only one."""
    by = draw(rng, design, looks[-1])
    if per_look is None:
        decisions, _ = replay({CTX: by}, ruled(rule, allocation=allocation), looks, described=False)
        found = {d.policy: d.word for d in decisions}
        return [found[p] for p in POLICIES if p in found]
    words_now = [""] * len(design.truths)
    for n in looks:
        now = words(subset(by, n), per_look, rule)
        words_now = [w if w and w != "can't tell yet" else x for w, x in zip(words_now, now)]
        if all(w in (WORTH, NOT_WORTH) for w in words_now):
            break
    return words_now


@contextlib.contextmanager
def uncollected():
    """The cyclic garbage collector off: a simulation makes millions of short-lived objects and no
    cycle among them (none found after 300 reports of any case), and every few hundred objects
    the collector walked the heap that torch and scipy left (a third of a planned look's time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@uncollected()
def error_rate(
    design: Design,
    reps: int = 2000,
    seed: int = 0,
    looks: tuple[int, ...] = (),
    per_look: float | None = None,
    allocation: str = "late",
    rule: Judging = NOW,
) -> float:
    """The share of simulated reports with any wrong worth it or not worth it."""
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(reps):
        found = looked(rng, design, looks, per_look, allocation, rule) if looks else words(draw(rng, design), rule=rule)
        bad += any(wrong(w, t) for w, t in zip(found, design.truths))
    return bad / reps


@uncollected()
def decided_rate(
    design: Design,
    reps: int = 500,
    seed: int = 0,
    looks: tuple[int, ...] = (),
    allocation: str = "late",
    rule: Judging = NOW,
) -> float:
    """The share of policies decided, and rightly, over the simulated reports (or procedures of
    planned `looks`): the power."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        found = looked(rng, design, looks, None, allocation, rule) if looks else words(draw(rng, design), rule=rule)
        hits += sum(w in (WORTH, NOT_WORTH) and not wrong(w, t) for w, t in zip(found, design.truths))
    return hits / (reps * len(design.truths))


def decidable_at(by: dict[str, dict[int, Run]], n: int) -> dict:
    """The first `n` seeds of one simulated report, as `decide` takes its groups."""
    return {CTX: subset(by, n)}


@uncollected()
def looks_power(
    design: Design, looks: tuple[int, ...], allocation: str, reps: int = 500, seed: int = 0, rule: Judging = NOW
) -> tuple[float, float]:
    """Over procedures of planned looks: the share of policies decided, and rightly, and the mean
    seeds each policy was trained on (the look that decided it, else the last)."""
    rng = np.random.default_rng(seed)
    hits, seeds = 0, 0
    for _ in range(reps):
        by = draw(rng, design, looks[-1])
        decisions, _ = replay({CTX: by}, ruled(rule, allocation=allocation), looks, described=False)
        for d in decisions:
            truth = design.truths[POLICIES.index(d.policy)]
            hits += d.word in (WORTH, NOT_WORTH) and not wrong(d.word, truth)
            seeds += looks[d.look - 1] if d.word in (WORTH, NOT_WORTH) else looks[-1]
    total = reps * len(design.truths)
    return hits / total, seeds / total


def bound(reps: int, rate: float = ALPHA, ses: float = 2.0) -> float:
    """The promised rate plus `ses` Monte Carlo standard errors of a rate estimated from `reps`."""
    return rate + ses * math.sqrt(rate * (1 - rate) / reps)


ABOVE_MARGIN = (-M + 1e-9, 1.0)  # just inside the margin: *not worth it* false by the worse-than-regular route


def skewed(role: str, g: float, seeds: int = 8, sigma: float = 0.2, family: str = "gamma") -> Design:
    """Four policies on the boundary whose test the skew `g` of the `role`'s differences makes
    too lenient: a right-skewed difference (g > 0) lengthens the lower tail of its t (the routes
    of *not worth it*), a left-skewed one the upper tail (the tests of *worth it*)."""
    if g > 0:
        truth = ABOVE_MARGIN if role == "regular" else NOT_WORTH_EDGE
    else:
        truth = WORTH_EDGE if role == "regular" else LEVEL_WITH_C
    return Design((truth,) * 4, seeds=seeds, sigma=sigma, skew=(role, g), family=family)


def failing(role: str, truth: tuple[float, float], seeds: int = 8, sigma: float = 0.2, **kw) -> Design:
    """Four policies at `truth`, the `role`'s runs losing 3 points one run in ten."""
    return Design((truth,) * 4, seeds=seeds, sigma=sigma, fail=(role, 0.1, 3.0), **kw)

"""One decision per policy: worth it, not worth it, or can't tell yet.

The rules are fixed before any run is read (docs: the decision page):

- C(p), the policy's *cheap alternative*, is training fewer epochs at its budget when the runs
  hold that line there, else random pruning in every epoch at its budget, else the equal-budget
  random control; the decision names which.
- *Worth it*: not worse than regular by more than the margin m (one-sided test of
  difference > -m) and better than C(p) (difference > 0). Both must hold, so each runs at the
  full level (an intersection-union test).
- *Not worth it*: worse than regular by more than m, or shown not to beat C(p) by the minimum
  gain (difference < min_gain). Either route suffices, so each runs at half the level
  (Bonferroni): the claim's p-value is twice the smaller of the two.
- Across the policies of a report, Holm at 5%: a policy's claim (the one with the smallest
  p-value) stands only when its Holm-adjusted p-value is at most 5%; otherwise *can't tell
  yet*, with the seeds at which a decision would be reached with 80% probability if the
  observed differences were the truth.

Differences use the pooled residual sd of a randomized-block model (arm + seed) over the
context's runs, except for an arm whose paired spread against regular is out of line with the
other arms' pool (upper-tail F test at 5%): it leaves the pool and its comparisons keep their
own paired t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import reduce

from . import paired, stats
from .groups import Context, is_frontier, is_shorter
from .runs import Run

WORTH, NOT_WORTH, CANT_TELL = "worth it", "not worth it", "can't tell yet"


@dataclass(frozen=True)
class Judging:
    """How the report judges: the margin m and minimum gain (points; min_gain None: m), the
    family-wise error, and the time-to-accuracy target (percent; None: regular's mean final
    accuracy minus 0.5 pt, on the test set's quantum)."""

    margin: float = 0.3
    target: float | None = None
    min_gain: float | None = None
    alpha: float = stats.ALPHA

    @property
    def gain(self) -> float:
        return self.margin if self.min_gain is None else self.min_gain


@dataclass(frozen=True)
class Noise:
    """A context's noise: the block model's residual sd (None: no df left) over the arms whose
    spread is in line, the test-set quantum, and the arms out of line (they keep their own t)."""

    sigma: float | None
    df: int
    quantum: float
    loud: frozenset[str] = frozenset()


def quantum(runs: list[Run]) -> float:
    """Points per test image: 100 / the test set's size, read off the accuracies the runs
    recorded (the finest grid they all lie on); DEFAULT_QUANTUM when they do not tell."""
    denominators = [
        Fraction(r.test_accuracy / 100).limit_denominator(100_000).denominator for run in runs for r in run.metrics
    ]
    if not denominators:
        return stats.DEFAULT_QUANTUM
    size = reduce(math.lcm, denominators)
    return 100.0 / size if size <= 1_000_000 else stats.DEFAULT_QUANTUM


def _cells(by_policy: dict[str, dict[int, Run]], leave: set[str]) -> dict[tuple[str, int], float]:
    return {(p, s): paired.final(run) for p, seeds in by_policy.items() if p not in leave for s, run in seeds.items()}


def noise(by_policy: dict[str, dict[int, Run]]) -> Noise:
    """The pooled sd over the arms in line: an arm is out of line when its paired spread against
    regular is above what the block model of the *other* arms predicts (upper-tail F at 5%); such
    arms leave the pool, so one wild arm cannot widen every other interval."""
    q = quantum([run for seeds in by_policy.values() for run in seeds.values()])
    loud = set()
    for arm in by_policy:
        rest = stats.block_residual(_cells(by_policy, {arm}))
        diffs = paired.vs_regular(by_policy, arm).values()
        if rest and stats.out_of_line(diffs, [2.0] * len(diffs), *rest) < stats.OUT_OF_LINE:
            loud.add(arm)
    cells = _cells(by_policy, loud)
    fit = stats.block_residual(cells) if cells else None
    sigma, df = fit if fit else (None, 0)
    return Noise(sigma, df, quantum=q, loud=frozenset(loud))


def estimate(p: paired.Paired, n: Noise) -> stats.Estimate | None:
    """Pooled, unless an arm of the comparison is out of line with the pool (then its own t)."""
    values, norms = p.values(), p.norm_values()
    if n.sigma is None or n.loud & {p.policy, *p.arms}:
        return stats.paired_estimate(values, n.quantum)
    return stats.pooled_estimate(values, norms, n.sigma, n.df, n.quantum)


@dataclass(frozen=True)
class Decision:
    context: Context
    policy: str
    budget: float
    regular: paired.Paired
    vs_regular: stats.Estimate | None
    cheap: paired.Paired | None
    vs_cheap: stats.Estimate | None
    why_cheap: str  # why C(p) is not an earlier choice, or why there is none ("" when the first)
    p: dict[str, float]  # raw one-sided p-values: not_worse, worse, better, short
    route: str  # the claim with the smallest p: worse | worth | short | "" (none possible)
    p_claim: float
    p_holm: float = 1.0
    word: str = CANT_TELL
    seeds_80: int | None = None
    resolvable: float | None = None  # what MAX_SEEDS could resolve, when no feasible number would
    family: int = 1  # how many decisions share the Holm family


def scored(by_policy: dict[str, dict[int, Run]]) -> list[str]:
    """The policies a report decides: every arm but regular, the control and the frontiers."""
    return [p for p in by_policy if not paired.is_baseline(p)]


def decide(groups: dict[Context, dict[str, dict[int, Run]]], judging: Judging = Judging()) -> list[Decision]:
    """Every scored policy of every context, as one Holm family."""
    found = [_chain(c, by, p, noise(by), judging) for c, by in groups.items() for p in scored(by)]
    words, adjusted = settle([(d.route, d.p_claim) for d in found], judging.alpha)
    level = judging.alpha / max(len(found), 1)  # Holm's strictest step: the plan for more seeds
    out = []
    for d, word, p_adj in zip(found, words, adjusted):
        d = replace(d, p_holm=p_adj, word=word, family=len(found))
        out.append(d if word != CANT_TELL else _plan(d, judging, level))
    return out


def claims(
    reg: stats.Estimate | None, alt: stats.Estimate | None, judging: Judging
) -> tuple[dict[str, float], str, float]:
    """A policy's one-sided p-values, the claim with the smallest p-value and that p-value:
    'worth' needs both not worse than -m and better than C(p) (each at the full level, the larger
    p); 'worse' and 'short' are the two routes to not worth it (each at half the level)."""
    p: dict[str, float] = {}
    if reg is not None:
        p["not_worse"], p["worse"] = reg.p_above(-judging.margin), reg.p_below(-judging.margin)
    if alt is not None:
        p["better"], p["short"] = alt.p_above(0.0), alt.p_below(judging.gain)
    routes = {}
    if "worse" in p:
        routes["worse"] = min(1.0, 2 * p["worse"])
    if "worse" in p and "better" in p:
        routes["worth"] = max(p["not_worse"], p["better"])
        routes["short"] = min(1.0, 2 * p["short"])
    route = min(routes, key=routes.__getitem__) if routes else ""
    return p, route, routes.get(route, 1.0)


def settle(found: list[tuple[str, float]], alpha: float) -> tuple[list[str], list[float]]:
    """Holm over the family's claims: each claim's word where its adjusted p-value is at most alpha."""
    adjusted = stats.holm([p for _, p in found])
    words = [
        (WORTH if route == "worth" else NOT_WORTH) if route and p_adj <= alpha else CANT_TELL
        for (route, _), p_adj in zip(found, adjusted)
    ]
    return words, adjusted


def cheap_alternative(by: dict[str, dict[int, Run]], policy: str) -> tuple[paired.Paired | None, str]:
    """C(p) and a sentence on the choice: the first of fewer epochs, the random frontier, the
    random control that the runs hold at the policy's budget."""
    notes: list[str] = []
    for kind, found in (
        ("training fewer epochs", paired.vs_line(by, policy, is_shorter)),
        ("random pruning in every epoch", paired.vs_line(by, policy, is_frontier)),
        ("the random control", paired.vs_control(by, policy)),
    ):
        if isinstance(found, paired.Paired) and found.diffs:
            return found, "; ".join(notes)
        if isinstance(found, paired.Miss):
            notes.append(
                f"{kind} does not reach {paired.mean_budget(by, policy):.1f}% ({found.reason}; "
                f"{_suggest(by, policy, kind)})"
            )
    if not notes:
        notes.append("no cheap alternative measured (`compare --shorter 0.1,0.3` adds training fewer epochs)")
    return None, "; ".join(notes)


def bracketing_shares(by: dict[str, dict[int, Run]], policy: str) -> list[float]:
    """The shorter-schedule budgets (fractions, on 5% steps) that would make the line reach the
    policy's budget: the side(s) its arms lack; none when it already reaches."""
    return _missing(by, policy, is_shorter)


def _missing(by: dict[str, dict[int, Run]], policy: str, on_line) -> list[float]:
    at = paired.mean_budget(by, policy)
    line = [paired.mean_budget(by, p) for p in by if on_line(p)]
    if any(abs(x - at) < paired.SAME_BUDGET for x in line):
        return []
    below = math.floor(at / 5 + 1e-9) * 5 / 100 or round(at / 100, 2)  # 5% steps
    above = math.ceil(at / 5 - 1e-9) * 5 / 100
    want = ([] if any(x < at for x in line) else [below]) + ([] if any(x > at for x in line) else [above])
    return sorted(set(s for s in want if 0 < s < 1))


def _suggest(by: dict[str, dict[int, Run]], policy: str, kind: str) -> str:
    """The flag that adds the arm(s) on the side the line lacks."""
    shorter = kind == "training fewer epochs"
    shares = ",".join(f"{x:g}" for x in _missing(by, policy, is_shorter if shorter else is_frontier))
    return f"`compare {'--shorter' if shorter else '--frontier'} {shares}` would add the arm it lacks"


def _chain(context: Context, by: dict[str, dict[int, Run]], policy: str, n: Noise, judging: Judging) -> Decision:
    regular = paired.vs_regular(by, policy)
    reg = estimate(regular, n) if regular.diffs else None
    cheap, why = cheap_alternative(by, policy)
    alt = estimate(cheap, n) if cheap else None
    p, route, p_claim = claims(reg, alt, judging)
    return Decision(context, policy, paired.mean_budget(by, policy), regular, reg, cheap, alt, why, p, route, p_claim)


def _plan(d: Decision, judging: Judging, level: float) -> Decision:
    """Seeds for an 80% chance of the easiest decision the observed means allow, at Holm's
    strictest step; when no feasible number would do, the margin MAX_SEEDS could resolve."""
    reg, alt, m = d.vs_regular, d.vs_cheap, judging.margin
    if reg is None:
        return d
    routes = [[(-(reg.mean + m), reg.sd, level / 2)]]  # worse than regular by more than m
    if alt is not None:
        routes.append([(reg.mean + m, reg.sd, level), (alt.mean, alt.sd, level)])  # worth it
        routes.append([(judging.gain - alt.mean, alt.sd, level / 2)])  # short of C(p)
    needs = [k for k in map(_route_seeds, routes) if k is not None]
    if needs:
        return replace(d, seeds_80=min(needs))
    return replace(d, resolvable=stats.resolvable(reg.sd, level))


def _route_seeds(route: list[tuple[float, float, float]]) -> int | None:
    """Seeds for every test of a route (effect, sd, level) to pass at 80%; None when one cannot by MAX_SEEDS."""
    counts = [stats.seeds_for(effect, sd, level) for effect, sd, level in route]
    feasible = [k for k in counts if k is not None]
    return max(feasible) if len(feasible) == len(counts) else None

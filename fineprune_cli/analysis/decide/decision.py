"""One decision per policy: worth it, not worth it, or can't tell yet.

The rules are fixed before any run is read (docs: the decision page):

- C(p), the policy's *cheap alternative*, is training fewer epochs at its budget when the runs
  hold that line there, else random pruning in every epoch at its budget, else the equal-budget
  random control; the decision names which.
- *Worth it*: not worse than regular by m or more (Δ_reg > −m) and better than C(p) (Δ_C > 0).
  Both must hold, so each one-sided test runs at the policy's full level a (intersection-union).
- *Not worth it*: worse than regular by m or more (Δ_reg ≤ −m), or not better than C(p) by more
  than the minimum gain δ (Δ_C ≤ δ). Either route suffices, so each runs at a / 2. The two claims
  cover every truth, so at most one of a policy's two claims is false.
- The family: k policies share the report's alpha by its procedure (`Judging.correction`, an
  entry of `procedures.FAMILIES`, which adjusts a look's claims together and gives the level a of
  each claim), and over L planned looks
  each policy's alpha / k is split into parts fixed by the plan (`Judging.allocation`), so look
  j tests at a_j = alpha · w_j / k with the w_j summing to 1. Since at most one claim per policy
  can be false, at most one false claim per policy and look is ever tested, each at its look's
  level: under Bonferroni (the default) the chance of any wrong *worth it* or *not worth it* is
  at most the sum of those levels, alpha, whatever the dependence between them.
- Every comparison's standard error comes from the judging's variance model (an entry of
  `procedures.VARIANCES`); the default is its own paired spread over the seeds it pairs (a
  one-sample t on the per-seed differences, n − 1 df): no assumption that arms are equally noisy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from ...arms import REGULAR
from ..group import paired
from ..group.failures import Failure, failed, of_arms, seeds_failed, set_aside
from ..group.groups import Context, is_frontier, is_shorter
from ..read.quantum import quantum_of
from ..read.runs import Run
from . import stats
from .judging import Judging
from .procedures import Claim

WORTH, NOT_WORTH, CANT_TELL = "worth it", "not worth it", "can't tell yet"
ROUTES = ("worse", "worth", "short")  # the claims' routes: worse than regular, worth it, short of C(p)


def estimate(p: paired.Paired, q: float = stats.DEFAULT_QUANTUM, judging: Judging = Judging()) -> stats.Estimate | None:
    """The comparison's estimate by the judging's variance model (by default its own paired t
    over the seeds it pairs: None below two seeds or one image of spread), its tests holding
    for the judging's shape."""
    found = judging.variance_model.estimate(p, q) if p.diffs else None
    return found.with_shape(judging.shape_model.reference()) if found is not None else None


@dataclass(frozen=True)
class Advice:
    """How many seeds would decide an undecided policy, if the observed differences were the
    truth: `seeds` for an 80% chance at the level the next look tests, `low`-`high` the same with
    each difference at the favourable and the unfavourable end of its 80% interval (None: more
    than MAX_SEEDS), and the chance of a decision at the next planned look, when there is one."""

    route: str
    seeds: int | None
    low: int | None
    high: int | None
    level: float
    next_seeds: int | None = None
    next_chance: float | None = None
    resolvable: float | None = None  # the margin MAX_SEEDS would resolve, when no number decides


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
    p_worth: float  # the claims' p-values: max of worth's two tests; twice the smaller route of not worth
    p_not: float
    route: str  # the claim stated, else the nearest one: worse | worth | short | "" (none testable)
    p_claim: float  # that claim's p-value, raw
    p_adjusted: float  # after the family's correction: the claim stands when it is at most alpha
    word: str
    level: float  # a: what each test of worth it spends (each route of not worth it: a / 2)
    family: int  # k, the policies sharing alpha
    looks: int = 1  # L, the planned looks sharing it
    look: int = 0  # the look (1-based) that reached it; 0 outside planned looks
    share: float = 1.0  # the part of the policy's alpha / k its look spends (1 at a single look)
    incomplete: str = ""  # why its look could not decide it: seeds the plan fixed that are not there
    advice: Advice | None = None  # an undecided policy's seeds (analysis.decide.advice)
    sensitivity: tuple[tuple[float, str], ...] = ()  # (δ, the word at that minimum gain)
    pooled_word: str = ""  # the word if every arm were equally noisy (the block model's pooled sd)
    variance: str = ""  # the variance model of its estimates, as reports name it
    left_out: str = ""  # its row's runs a report left out, and why (analysis.decide.leftout)
    failures: tuple[Failure, ...] = ()  # failed runs of regular, the policy and C(p)'s arms, set aside
    withheld: str = ""  # why worth it is not said though its tests pass: more failures than a baseline

    def bounds(self, e: stats.Estimate) -> tuple[float, float]:
        """The bounds a claim of this decision reads off: the lower at a, the upper at a / 2."""
        return e.claim_bounds(self.level)


def scored(by_policy: dict[str, dict[int, Run]]) -> list[str]:
    """The policies a report decides: every arm but regular, the control and the frontiers."""
    return [p for p in by_policy if not paired.is_baseline(p)]


def decide(
    groups: dict[Context, dict[str, dict[int, Run]]],
    judging: Judging = Judging(),
    share: float = 1.0,
    family: int | None = None,
    looks: int = 1,
    look: int = 0,
) -> list[Decision]:
    """Every scored policy of every context, as one family of `family` policies (default: those
    found), at look `look` (one of `looks` planned) that spends `share` of each policy's alpha / k;
    the family procedure adjusts all their claims together."""
    read = {c: _Read(quantum_of(by), failed(by, judging.failure), paired.Budgets(by)) for c, by in groups.items()}
    chains = [_chain(c, by, p, judging, read[c], looks, look) for c, by in groups.items() for p in scored(by)]
    k = family or max(len(chains), 1)
    adjusted = judging.correction.adjust([c for d in chains for c in _claims(d, share)], k)
    pairs = [(adjusted[2 * i], adjusted[2 * i + 1]) for i in range(len(chains))]
    return [settle(d, judging, k, share, pair) for d, pair in zip(chains, pairs)]


def _claims(d: Decision, share: float) -> tuple[Claim, Claim]:
    """A decision's two claims, worth it then not worth it."""
    return Claim(d.p_worth, share, d.look), Claim(d.p_not, share, d.look)


def claims(
    reg: stats.Estimate | None, alt: stats.Estimate | None, judging: Judging
) -> tuple[dict[str, float], float, float]:
    """A policy's one-sided p-values and its two claims' p-values: worth it (both not worse than
    −m and better than C(p): the larger p) and not worth it (worse by m or more, or short of the
    minimum gain: twice the smaller p). 1.0 for a claim the estimates cannot test."""
    p: dict[str, float] = {}
    if reg is not None:
        p["not_worse"], p["worse"] = reg.p_above(-judging.margin), reg.p_below(-judging.margin)
    if alt is not None:
        p["better"], p["short"] = alt.p_above(0.0), alt.p_below(judging.gain)
    worth = max(p["not_worse"], p["better"]) if "not_worse" in p and "better" in p else 1.0
    routes = [p[r] for r in ("worse", "short") if r in p]
    return p, worth, min(1.0, 2 * min(routes)) if routes else 1.0


def settle(
    d: Decision, judging: Judging, k: int, share: float, adjusted: tuple[float, float] | None = None
) -> Decision:
    """The decision's word under the family procedure (`adjusted`: its two claims' adjusted
    p-values, worth it then not worth it, as the procedure gave them among the whole family; by
    default the procedure is handed these two alone): a claim stands when its adjusted p-value is
    at most alpha; where both stand (better than C(p), by no more than δ) the smaller p-value is
    stated, and where neither, the nearer claim is named. A look without all the seeds the plan
    fixed for it (`d.incomplete`) decides nothing."""
    worth, not_worth = adjusted or tuple(judging.correction.adjust(_claims(d, share), k))
    route = _route(d.p, d.p_worth, d.p_not)
    word = CANT_TELL
    if min(worth, not_worth) <= judging.alpha and not d.incomplete:
        word = WORTH if route == "worth" else NOT_WORTH
    if word == WORTH and d.withheld:
        word = CANT_TELL
    p_claim = d.p_worth if route == "worth" else d.p_not if route else 1.0
    return replace(
        d,
        route=route,
        p_claim=p_claim,
        p_adjusted=(worth if route == "worth" else not_worth) if route else 1.0,
        word=word,
        level=judging.correction.level(judging.alpha, k, share),
        family=k,
        share=share,
    )


def _route(p: dict[str, float], p_worth: float, p_not: float) -> str:
    if "worse" not in p and "short" not in p:
        return ""
    if "not_worse" in p and "better" in p and p_worth < p_not:
        return "worth"
    return "worse" if p.get("worse", 2.0) <= p.get("short", 2.0) else "short"


def cheap_alternative(
    by: dict[str, dict[int, Run]], policy: str, budgets: paired.Budgets | None = None
) -> tuple[paired.Paired | None, str]:
    """C(p) and a sentence on the choice: the first of fewer epochs, the random frontier, the
    random control that the runs hold at the policy's budget (each read only when the one
    before it is not there)."""
    budgets = budgets or paired.Budgets(by)
    notes: list[str] = []
    for kind, find in (
        ("training fewer epochs", lambda: paired.vs_line(by, policy, is_shorter, budgets)),
        ("random pruning in every epoch", lambda: paired.vs_line(by, policy, is_frontier, budgets)),
        ("the random control", lambda: paired.vs_control(by, policy)),
    ):
        found = find()
        if isinstance(found, paired.Paired) and found.diffs:
            return found, "; ".join(notes)
        if isinstance(found, paired.Miss):
            notes.append(
                f"{kind} does not reach {budgets.mean(policy):.1f}% ({found.reason}; {_suggest(by, policy, kind)})"
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


class _Read(NamedTuple):
    """What a decision reads off its context's runs, read once for all its policies."""

    quantum: float
    failures: list[Failure]
    budgets: paired.Budgets


def _chain(
    context: Context,
    by: dict[str, dict[int, Run]],
    policy: str,
    judging: Judging,
    read: _Read,
    looks: int = 1,
    look: int = 0,
) -> Decision:
    q, failures = read.quantum, read.failures
    regular = set_aside(paired.vs_regular(by, policy), failures)
    reg = estimate(regular, q, judging)
    cheap, why = cheap_alternative(by, policy, read.budgets)
    cheap = set_aside(cheap, failures) if cheap else None
    alt = estimate(cheap, q, judging) if cheap else None
    p, p_worth, p_not = claims(reg, alt, judging)
    return Decision(
        context,
        policy,
        read.budgets.mean(policy),
        regular,
        reg,
        cheap,
        alt,
        why,
        p,
        p_worth,
        p_not,
        route="",
        p_claim=1.0,
        p_adjusted=1.0,
        word=CANT_TELL,
        level=judging.alpha,
        family=1,
        looks=looks,
        look=look,
        variance=judging.variance_model.label,
        failures=tuple(of_arms(failures, (REGULAR, policy, *(cheap.arms if cheap else ())))),
        withheld=withheld(failures, policy, cheap),
    )


def withheld(failures: list[Failure], policy: str, cheap: paired.Paired | None) -> str:
    """Why *worth it* is not said: the policy failed more runs than regular or than C(p) did
    (a policy that fails more often is not worth it on the runs that did not fail alone)."""
    mine = len(seeds_failed(failures, (policy,)))
    others = [(REGULAR, len(seeds_failed(failures, (REGULAR,))))]
    if cheap is not None:
        others.append(("C(p)", len(seeds_failed(failures, cheap.arms))))
    more = [f"{name} {count}" for name, count in others if mine > count]
    return f"it failed {mine} run{'s' * (mine != 1)}, more than {' and '.join(more)}" if more else ""

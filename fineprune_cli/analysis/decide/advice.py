"""What a decision adds for its reader, beside the word: how many seeds would decide an
undecided policy, and how the word moves with the minimum gain δ and with a variance that
assumed every arm equally noisy. None of it decides anything.

Seeds: the chance that each test of a route passes at n seeds, at the level the next look tests,
if the observed mean difference and its per-seed spread were the truth (the noncentral t of a
one-sample t test with the critical value of the decision's shape, the test the decision runs,
under normal noise); a route of two tests (worth it) needs both, and
their chance is taken as the product (they share the policy's noise, so the real chance is at
least that). The seeds given are the fewest for an 80% chance on the easiest route, with the same
at the favourable and the unfavourable end of each difference's 80% interval: the observed
difference is itself a noisy guess of the truth.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ..group import paired
from ..group.groups import Context
from ..read.runs import Run
from . import stats
from .decision import CANT_TELL, Advice, Decision, claims, settle
from .judging import Judging, shares

DELTAS = (0.1, 0.2, 0.3, 0.5)  # the minimum gains every decision is also read at
PLAUSIBLE = 0.80  # the two-sided interval whose ends give the range of seeds

Test = tuple[float, stats.Estimate, float]  # (effect in the direction tested, its estimate, level)


def enrich(
    decisions: list[Decision],
    groups: dict[Context, dict[str, dict[int, Run]]],
    judging: Judging,
    looks: tuple[int, ...] = (),
) -> list[Decision]:
    """Each decision with its δ line, its pooled-variance word and (undecided) its seeds, with
    its chance at the next planned look of `looks` it does not hold yet, at that look's level."""
    pooled = {c: pooled_fit(by) for c, by in groups.items()}
    parts = dict(zip(looks, shares(judging, looks)))
    out = []
    for d in decisions:
        d = replace(d, sensitivity=sensitivity(d, judging), pooled_word=_pooled_word(d, judging, pooled[d.context]))
        if d.word == CANT_TELL:
            seeds = next_look(len(groups[d.context].get(d.policy, {})), looks)
            level = judging.correction.level(judging.alpha, d.family, parts[seeds]) if seeds else d.level
            d = replace(d, advice=advise(d, judging, seeds, level))
        out.append(d)
    return out


def next_look(held: int, looks: tuple[int, ...]) -> int | None:
    """The seed count of the first planned look beyond the `held` seeds a policy's runs have: a
    look whose seeds it has not trained yet (a look replayed for the others) decides it next."""
    return next((seeds for seeds in looks if seeds > held), None)


def sensitivity(d: Decision, judging: Judging) -> tuple[tuple[float, str], ...]:
    """The word at each minimum gain of DELTAS, everything else as decided."""
    out = []
    for gain in DELTAS:
        at = replace(judging, min_gain=gain)
        p, worth, not_worth = claims(d.vs_regular, d.vs_cheap, at)
        out.append((gain, settle(replace(d, p=p, p_worth=worth, p_not=not_worth), at, d.family, d.share).word))
    return tuple(out)


def pooled_fit(by: dict[str, dict[int, Run]]) -> tuple[float, int] | None:
    cells = {(p, s): paired.final(run) for p, seeds in by.items() for s, run in seeds.items()}
    return stats.block_residual(cells) if cells else None


def _pooled_word(d: Decision, judging: Judging, fit: tuple[float, int] | None) -> str:
    """The word had each comparison used the block model's pooled residual sd (arm + seed, all
    runs of the context): what equal noise in every arm would decide."""
    if fit is None:
        return ""
    sigma, df = fit
    reg = stats.pooled_estimate(d.regular.values(), d.regular.norm_values(), sigma, df) if d.regular.diffs else None
    alt = (
        stats.pooled_estimate(d.cheap.values(), d.cheap.norm_values(), sigma, df) if d.cheap and d.cheap.diffs else None
    )
    p, worth, not_worth = claims(reg, alt, judging)
    return settle(replace(d, p=p, p_worth=worth, p_not=not_worth), judging, d.family, d.share).word


def routes(d: Decision, judging: Judging, a: float) -> dict[str, list[Test]]:
    """The tests each route to a decision needs, at level `a`."""
    reg, alt = d.vs_regular, d.vs_cheap
    found: dict[str, list[Test]] = {}
    if reg is not None:
        found["worse"] = [(-judging.margin - reg.mean, reg, a / 2)]
    if reg is not None and alt is not None:
        found["worth"] = [(reg.mean + judging.margin, reg, a), (alt.mean, alt, a)]
        found["short"] = [(judging.gain - alt.mean, alt, a / 2)]
    return found


def chance(tests: list[Test], n: int, shift: float = 0.0) -> float:
    """The chance every test passes at n seeds, each effect moved by `shift` of its interval's
    half-width (+1: the favourable end, -1: the unfavourable)."""
    out = 1.0
    for effect, e, level in tests:
        half = stats.t_quantile(0.5 + PLAUSIBLE / 2, e.df) * e.se
        out *= stats.power(effect + shift * half, e.sd, n, level, e.shape)
    return out


def predictive(tests: list[Test], total: int) -> float:
    """The chance every test passes at `total` seeds, the seeds so far among them, over what
    those seeds leave uncertain (`stats.predictive_power`); a route of two tests as the product."""
    out = 1.0
    for effect, e, level in tests:
        out *= stats.predictive_power(effect, e.sd, e.n, total, level, shape=e.shape)
    return out


def advise(d: Decision, judging: Judging, next_seeds: int | None = None, level: float | None = None) -> Advice | None:
    """The seeds that would decide `d` at `level` (default its own), if the observed differences
    were the truth."""
    level = d.level if level is None else level
    found = routes(d, judging, level)
    if not found:
        return None
    need = {name: _seeds(tests) for name, tests in found.items()}
    feasible = {k: v for k, v in need.items() if v is not None}
    route = min(feasible, key=feasible.__getitem__) if feasible else d.route or "worse"
    low = _fewest(found, +1.0)
    high = _fewest(found, -1.0)
    nxt = max(predictive(t, next_seeds) for t in found.values()) if next_seeds else None
    resolvable = None
    if not feasible and d.vs_regular is not None:
        resolvable = stats.resolvable(d.vs_regular.sd, level / 2, shape=d.vs_regular.shape)
    return Advice(route, feasible.get(route), low, high, level, next_seeds, nxt, resolvable)


def _seeds(tests: list[Test], shift: float = 0.0) -> int | None:
    return stats.seeds_for(partial(chance, tests, shift=shift))


def _fewest(found: dict[str, list[Test]], shift: float) -> int | None:
    counts = [_seeds(tests, shift) for tests in found.values()]
    feasible = [c for c in counts if c is not None]
    return min(feasible) if feasible else None


def advised(a: Advice) -> str:
    """'≈12 seeds (6–40)', '≈12 seeds (6–more than 50)', or '' when no number decides."""
    if a.seeds is None:
        return ""
    low = a.low if a.low is not None else a.seeds
    high = f"{a.high}" if a.high is not None else f"more than {stats.MAX_SEEDS}"
    return f"≈{a.seeds} seeds ({low}–{high})" if (low, high) != (a.seeds, str(a.seeds)) else f"≈{a.seeds} seeds"

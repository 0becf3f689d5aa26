"""Why each comparison uses its own paired spread: the same simulated reports decided with a
variance that borrows from the other arms (docs/decisions.md, "The noise").

- pooled: the block model's residual sd (arm + seed, all runs of the report) for every
  comparison, as d26b633 did without its F pretest;
- moderated: each comparison's own variance shrunk toward a prior fitted to all the report's
  comparisons (limma's empirical Bayes: Smyth 2004, `fitFDist` without covariates), on the
  prior's df plus its own.

Both assume that the arms' noise is alike, and both are judged here where it is not. Everything
else is `analysis.decide.decision` (claims, Bonferroni, words) and tests/simulation.py (the model).

    python experiments/decisions/alternatives.py [--reps 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
from scipy.special import digamma, polygamma

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import simulation as sim  # noqa: E402
from fineprune_cli.analysis.decide import decision, stats  # noqa: E402
from fineprune_cli.analysis.decide.judging import Judging  # noqa: E402
from fineprune_cli.analysis.group import paired

REAL = decision.decide
CASES = {
    "four level with C(p)": dict(truths=(sim.LEVEL_WITH_C,) * 4),
    "four level, policies 2× noisier": dict(truths=(sim.LEVEL_WITH_C,) * 4, noisier=(2.0,) * 4),
    "four on the half-line, policies 2× noisier": dict(truths=(sim.WORTH_EDGE,) * 4, noisier=(2.0,) * 4),
    "four level, one policy 3× noisier": dict(truths=(sim.LEVEL_WITH_C,) * 4, noisier=(3.0, 1.0, 1.0, 1.0)),
    "four on the half-line, one policy 3× noisier": dict(truths=(sim.WORTH_EDGE,) * 4, noisier=(3.0, 1.0, 1.0, 1.0)),
}


def _trigamma_inverse(y: float) -> float:
    """limma's Newton iteration for the inverse of the trigamma function."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(polygamma(1, x))
        step = tri * (1 - tri / y) / float(polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def fit_prior(variances: list[float], dfs: list[float]) -> tuple[float, float]:
    """limma's fitFDist: the prior variance s0^2 and its df d0 from sample variances on their df."""
    x, d = np.maximum(np.array(variances), 1e-12), np.array(dfs)
    e = np.log(x) - digamma(d / 2) + np.log(d / 2)
    if len(x) < 2:
        return float(np.exp(e.mean())), 0.0
    spread = float(((e - e.mean()) ** 2).sum() / (len(x) - 1) - np.mean(polygamma(1, d / 2)))
    if spread <= 0:
        return float(np.exp(e.mean())), math.inf
    d0 = 2 * _trigamma_inverse(spread)
    return float(np.exp(e.mean() + digamma(d0 / 2) - math.log(d0 / 2))), d0


def _rejudge(d: decision.Decision, reg, alt, judging) -> decision.Decision:
    p, worth, not_worth = decision.claims(reg, alt, judging)
    changed = dataclasses.replace(d, vs_regular=reg, vs_cheap=alt, p=p, p_worth=worth, p_not=not_worth)
    return decision.settle(changed, judging, d.family, d.looks)


def pooled_decide(groups, judging=Judging(), looks=1, family=None):
    out = []
    for d in REAL(groups, judging, looks, family):
        by = groups[d.context]
        fit = stats.block_residual({(a, s): paired.final(r) for a, seeds in by.items() for s, r in seeds.items()})
        if fit is None:
            out.append(d)
            continue
        est = [stats.pooled_estimate(p.values(), p.norm_values(), *fit) if p else None for p in (d.regular, d.cheap)]
        out.append(_rejudge(d, est[0], est[1], judging))
    return out


def moderated_decide(groups, judging=Judging(), looks=1, family=None):
    found = REAL(groups, judging, looks, family)
    own = [e for d in found for e in (d.vs_regular, d.vs_cheap) if e is not None]
    if len(own) < 2:
        return found
    s0, d0 = fit_prior([e.sd**2 for e in own], [e.df for e in own])
    cap = sum(e.df for e in own)  # no more df than the comparisons hold together

    def shrink(e):
        if e is None:
            return None
        prior = min(d0, 1e6)
        sd = math.sqrt((prior * s0 + e.df * e.sd**2) / (prior + e.df))
        return dataclasses.replace(e, sd=sd, se=sd / math.sqrt(e.n), df=min(prior + e.df, cap))

    return [_rejudge(d, shrink(d.vs_regular), shrink(d.vs_cheap), judging) for d in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    variants = {"own paired t (the rule)": REAL, "pooled": pooled_decide, "moderated": moderated_decide}
    print("| truth (σ 0.1 for baselines) | seeds | " + " | ".join(variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for name, kw in CASES.items():
        for n in (3, 5):
            cells = []
            for fn in variants.values():
                sim.decide = fn  # the harness calls `decide` by the name it imported
                rate = sim.error_rate(sim.Design(seeds=n, sigma=0.1, **kw), args.reps)
                cells.append(f"{100 * rate:.1f} ± {100 * math.sqrt(rate * (1 - rate) / args.reps):.1f}")
            sim.decide = REAL
            print(f"| {name} | {n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

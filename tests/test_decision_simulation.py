"""The decision procedure as a whole, simulated: per-seed accuracies drawn from a known
randomized-block model (no training), decided by the rules of `analysis.decision`, many times.
The share of reports with any wrong "worth it" or "not worth it" stays at or below the promised
5% (within Monte Carlo error), and the same data judged without Holm break it."""

import math
import random

import numpy as np
import pytest

from fineprune_cli.analysis import stats
from fineprune_cli.analysis.decision import NOT_WORTH, WORTH, Judging, claims, settle
from factories import CLEARLY_WORTH, NOT_WORTH_EDGE, WORTH_EDGE, residual_sd, wrong

REPS = 2000
BOUND = 0.05 + 3 * math.sqrt(0.05 * 0.95 / REPS)  # 5% plus three Monte Carlo standard errors


def one_report(rng, truths, seeds, sigma):
    """Rows: regular, then per policy its cheap alternative and itself; truths: (change against
    regular, change against its C(p)) per policy. Returns the words of the family."""
    means = [0.0]
    for d_reg, d_c in truths:
        means += [d_reg - d_c, d_reg]
    y = np.array(means)[:, None] + rng.normal(0, 0.2, seeds)[None, :] + rng.normal(0, sigma, (len(means), seeds))
    sd, df = residual_sd(y)
    found = []
    for i in range(len(truths)):
        alt_row, row = y[1 + 2 * i], y[2 + 2 * i]
        reg = stats.pooled_estimate(list(row - y[0]), [2.0] * seeds, sd, df)
        alt = stats.pooled_estimate(list(row - alt_row), [2.0] * seeds, sd, df)
        found.append(claims(reg, alt, Judging())[1:])
    return found


def error_rate(truths, seeds=5, sigma=0.05, adjust=True, seed=0):
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(REPS):
        found = one_report(rng, truths, seeds, sigma)
        if adjust:
            words = settle(found, 0.05)[0]
        else:
            words = [(WORTH if r == "worth" else NOT_WORTH) if r and p <= 0.05 else "" for r, p in found]
        bad += any(wrong(w, t) for w, t in zip(words, truths))
    return bad / REPS


@pytest.mark.slow  # thousands of simulated decisions: seconds
@pytest.mark.parametrize(
    "truths",
    [
        [WORTH_EDGE] * 4,
        [NOT_WORTH_EDGE] * 4,
        [CLEARLY_WORTH, CLEARLY_WORTH, WORTH_EDGE, WORTH_EDGE],
    ],
    ids=["four at the worth-it edge", "four at the not-worth-it edge", "two true, two at the edge"],
)
def test_the_family_wise_rate_of_wrong_decisions_holds(truths):
    assert error_rate(truths) <= BOUND


@pytest.mark.slow  # thousands of simulated decisions: seconds
def test_the_same_reports_without_holm_break_the_promise():
    """Four policies at the worth-it edge, each judged at 5% on its own: about 1 - 0.95^4."""
    assert error_rate([WORTH_EDGE] * 4, adjust=False) > 0.10


def test_decisions_are_reached_where_the_truth_is_clear():
    """Not a procedure that never decides: clearly worth it, with 5 seeds, is found nearly always."""
    rng = np.random.default_rng(1)
    hits = sum(settle(one_report(rng, [CLEARLY_WORTH], 5, 0.05), 0.05)[0] == [WORTH] for _ in range(200))
    assert hits >= 190
    random.seed(0)

"""The statistics behind the decisions, each against a computation made here independently."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from fineprune_cli.analysis.decide import stats
from fineprune_cli.analysis.decide.stats import block_residual, paired_estimate, pooled_estimate


def seeds_for(effect, sd, alpha):
    """The seeds for 80% of a one-sided one-sample t test (stats.seeds_for over stats.power)."""
    return stats.seeds_for(lambda n: stats.power(effect, sd, n, alpha))


def test_the_t_quantile_is_the_exact_one_not_a_rounded_table():
    """The old table read 2.776 at df 4, below the exact 2.7764451 (an interval a hair too narrow)."""
    assert stats.t_quantile(0.975, 4) == pytest.approx(2.7764451, abs=1e-6)
    assert stats.t_quantile(0.975, 4) > 2.776
    assert stats.t_quantile(0.95, 18) == pytest.approx(1.7340636, abs=1e-6)
    with pytest.raises(ValueError):
        stats.t_quantile(0.975, 0)


def test_a_paired_estimate_by_hand():
    """3 seeds: mean 0.1, sd 0.6, se 0.6/sqrt(3); 90% half width t(0.95, 2) * se = 2.919986 * 0.34641."""
    e = paired_estimate([0.1, -0.5, 0.7])
    assert (e.mean, e.sd, e.df, e.n, e.pooled) == (pytest.approx(0.1), pytest.approx(0.6), 2, 3, False)
    low, high = e.bounds()
    assert (low, high) == (pytest.approx(0.1 - 1.011515, abs=1e-5), pytest.approx(0.1 + 1.011515, abs=1e-5))
    assert e.fmt() == "+0.10 [-0.91, +1.11]"


def test_one_seed_has_no_own_spread():
    assert paired_estimate([0.02]) is None and paired_estimate([]) is None


def test_a_zero_spread_earns_no_claim():
    """Two seeds both +0.05: the old interval was [0.05, 0.05], called 'better'. A spread below one
    test image is no evidence of precision: no own interval at all (the pooled one decides)."""
    assert paired_estimate([0.05, 0.05], quantum=0.01) is None
    assert paired_estimate([0.05, 0.05, 0.05, 0.05, 0.05]) is None
    assert paired_estimate([0.05, 0.07], quantum=0.01) is not None  # two images apart: a spread


def test_no_interval_is_narrower_than_one_test_image():
    """A pooled sd far below the quantum still gives an interval of at least ± one image, and its
    p-values agree with it (p(better) is exactly 5% where the lower end touches 0)."""
    e = pooled_estimate([0.01] * 10, [2.0] * 10, sigma=1e-6, df=30, quantum=0.01)
    assert e.high - e.mean == pytest.approx(0.01) and e.low == pytest.approx(0.0, abs=1e-12)
    assert e.p_above(0.0) == pytest.approx(0.05)


def test_one_sided_p_values_by_hand():
    e = stats.Estimate(mean=-0.17, se=0.1, df=10, n=5, sd=0.2236, pooled=True)
    assert e.p_above(-0.3) == pytest.approx(1 - sps.t.cdf(1.3, 10))  # not worse than -0.3
    assert e.p_below(-0.3) == pytest.approx(sps.t.cdf(1.3, 10))  # worse than -0.3
    assert e.p_above(-0.3) + e.p_below(-0.3) == pytest.approx(1.0)


def test_a_pooled_estimate_uses_the_contrast_norms():
    """Plain differences (norm 2) and a line read halfway between two arms (1 + 0.25 + 0.25 = 1.5)."""
    e = pooled_estimate([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], sigma=0.5, df=20)
    assert e.sd == pytest.approx(0.5 * math.sqrt(2)) and e.se == pytest.approx(0.5 * math.sqrt(2) / math.sqrt(3))
    assert e.df == 20 and e.pooled
    half = pooled_estimate([1.0, 2.0], [1.5, 1.5], sigma=0.5, df=20)
    assert half.se == pytest.approx(0.5 * math.sqrt(3.0) / 2)  # sqrt(sum of norms) * sigma / n


def _residual_by_hand(y):
    """Two-way additive model on a complete arms x seeds table: SS of y - row - col + grand."""
    y = np.asarray(y, dtype=float)
    r = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return math.sqrt((r**2).sum() / df), df


def test_the_block_model_residual_matches_the_two_way_anova_by_hand():
    y = [[91.1, 91.3, 90.9, 91.2], [90.8, 91.2, 90.7, 90.9], [91.4, 91.0, 91.3, 91.5]]
    cells = {(f"arm{a}", s): v for a, row in enumerate(y) for s, v in enumerate(row)}
    sigma, df = block_residual(cells)
    want, want_df = _residual_by_hand(y)
    assert df == want_df == 6 and sigma == pytest.approx(want)


def test_the_block_model_with_a_missing_cell_loses_one_df():
    y = [[91.1, 91.3, 90.9, 91.2], [90.8, 91.2, 90.7, 90.9], [91.4, 91.0, 91.3, 91.5]]
    cells = {(f"arm{a}", s): v for a, row in enumerate(y) for s, v in enumerate(row)}
    del cells[("arm2", 3)]
    assert block_residual(cells)[1] == 5


def test_no_df_left_means_no_pooled_sd():
    assert block_residual({("regular", 0): 91.0, ("fine", 0): 90.0}) is None


def _power_by_hand(effect, sd, alpha, n):
    """One-sided one-sample t: P(noncentral t > t crit), noncentrality effect / (sd / sqrt(n))."""
    crit = sps.t.ppf(1 - alpha, n - 1)
    return sps.nct.sf(crit, n - 1, effect / sd * math.sqrt(n))


def test_seeds_for_80_percent_against_the_noncentral_t():
    n = seeds_for(0.2, 0.3, 0.05)
    assert _power_by_hand(0.2, 0.3, 0.05, n) >= 0.8 > _power_by_hand(0.2, 0.3, 0.05, n - 1)
    assert n == 16
    assert seeds_for(-0.1, 0.3, 0.05) is None  # the wrong direction: never
    assert seeds_for(0.01, 0.3, 0.05) is None  # beyond MAX_SEEDS


def test_what_fifty_seeds_resolve():
    d = stats.resolvable(0.3, 0.05)
    assert _power_by_hand(d, 0.3, 0.05, stats.MAX_SEEDS) == pytest.approx(0.8, abs=1e-4)


def test_a_spread_of_exactly_one_test_image_has_its_own_interval():
    """The refusal is for spreads *below* one image: [0, 1, 2] spreads by exactly 1.0 (sd 1.0)."""
    assert stats.paired_estimate([0.0, 1.0, 2.0], quantum=1.0) is not None
    assert stats.paired_estimate([0.0, 0.5, 1.0], quantum=1.0) is None


def test_seeds_for_reaches_max_seeds_itself():
    """An effect that 50 seeds, and not 49, show with 80% power: 50, the last feasible number, not None."""
    from statsmodels.stats.power import TTestPower

    size = TTestPower().solve_power(
        effect_size=None, nobs=stats.MAX_SEEDS, alpha=0.05, power=stats.POWER, alternative="larger"
    )
    assert seeds_for(float(size) * 1.0001, 1.0, 0.05) == stats.MAX_SEEDS
    assert seeds_for(float(size) * 0.99, 1.0, 0.05) is None


def test_fifty_seeds_is_the_last_plan_and_what_it_resolves():
    """MAX_SEEDS is 50, pinned from the noncentral t: an effect of 0.36 sd reaches 80% power at 50
    seeds and not at 49 (0.7994 < 0.8 <= 0.8066); at 0.355 sd only 51 would (0.7969 at 50, 0.8039 at
    51), which is past the plan. 50 seeds resolve 0.3566 sd (power exactly 0.8 at n = 50; 49 seeds:
    0.3603)."""
    assert _power_by_hand(0.36, 1.0, 0.05, 49) < 0.8 <= _power_by_hand(0.36, 1.0, 0.05, 50)
    assert seeds_for(0.36, 1.0, 0.05) == 50
    assert _power_by_hand(0.355, 1.0, 0.05, 50) < 0.8 <= _power_by_hand(0.355, 1.0, 0.05, 51)
    assert seeds_for(0.355, 1.0, 0.05) is None
    assert stats.resolvable(1.0, 0.05) == pytest.approx(0.35660, abs=1e-4)


def test_a_pooled_estimate_of_one_seed_and_of_none():
    """One seed has no own spread, but the pool lends it one: mean 0.4, se sigma * sqrt(2) / 1 on the
    pool's df. No seed at all: no estimate (and no mean to take)."""
    e = pooled_estimate([0.4], [2.0], sigma=0.3, df=4)
    assert (e.mean, e.n, e.df) == (pytest.approx(0.4), 1, 4) and e.se == pytest.approx(0.3 * math.sqrt(2))
    assert pooled_estimate([], [], sigma=0.3, df=4) is None
    assert pooled_estimate([0.4], [2.0], sigma=0.3, df=0.5) is None  # below one df: no t quantile
    assert pooled_estimate([0.4], [2.0], sigma=0.3, df=1).df == 1  # one df is enough


def test_two_arms_by_two_seeds_leave_one_df():
    """y = [[1, 2], [1.5, 3.5]]: residuals of the additive fit are +-0.25 in every cell (y - row
    mean - column mean + grand mean), SS 0.25 on (2 - 1)(2 - 1) = 1 df: sigma 0.5. One df is a pool."""
    assert block_residual({("a", 0): 1.0, ("a", 1): 2.0, ("b", 0): 1.5, ("b", 1): 3.5}) == (pytest.approx(0.5), 1)


def test_no_spread_gives_no_plan_of_seeds():
    """A per-seed sd of 0 (a pool of exactly additive runs) plans nothing, whatever the effect."""
    assert seeds_for(0.2, 0.0, 0.05) is None


def test_a_claims_bounds_are_one_sided_at_a_and_at_half_a():
    """mean 0.5, se 0.2, 4 df, a = 0.02: the lower bound at 2% one-sided, the upper at 1%; a claim
    tested at those levels reads off them (the lower above 0 exactly when p(above 0) <= a)."""
    e = stats.Estimate(0.5, 0.2, 4, 5, 0.447, False)
    low, high = e.claim_bounds(0.02)
    assert low == pytest.approx(0.5 - sps.t.ppf(0.98, 4) * 0.2)
    assert high == pytest.approx(0.5 + sps.t.ppf(0.99, 4) * 0.2)
    assert (low > 0) == (e.p_above(0.0) <= 0.02) and (high < 1.5) == (e.p_below(1.5) <= 0.01)


def test_the_bisection_finds_the_first_count_that_reaches_the_target():
    """A rising chance: 0.1 per seed past 2. 80% first at 10; never below MAX_SEEDS when it stays at 0.5."""
    assert stats.seeds_for(lambda n: 0.1 * (n - 2)) == 10
    assert stats.seeds_for(lambda n: 0.5) is None
    assert stats.seeds_for(lambda n: 1.0) == 2


def test_a_rank_deficient_block_design_fits_without_the_librarys_warning():
    """An arm run at one seed only repeats that seed's column: statsmodels warned (21 times in a
    report, with its path); the fit is still least squares on the rank's degrees of freedom."""
    import warnings

    balanced = {
        (a, s): v for a, base in (("a", 50.0), ("c", 52.0)) for s, v in zip((0, 1, 3), (base, base + 1.3, base - 0.4))
    }
    balanced[("c", 3)] += 0.7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alone = block_residual(balanced)
        with_b = block_residual({**balanced, ("b", 2): 40.0})
    assert caught == [] and alone is not None
    assert with_b[1] == alone[1] == 2 and with_b[0] == pytest.approx(alone[0])

"""Paired intervals, their words and the seeds-needed estimate, on hand-computed cases."""

import itertools
import math
import statistics

import pytest

from fineprune_cli.analysis import stats
from fineprune_cli.analysis.stats import Interval, interval, seeds_needed, t975, word


@pytest.mark.parametrize("values, low, high", [
    # 2 seeds: mean 2, sd sqrt(2), half = 12.706 * sqrt(2) / sqrt(2)
    ([1.0, 3.0], 2 - 12.706, 2 + 12.706),
    # 3 seeds: mean 0.1, sd 0.6, half = 4.303 * 0.6 / sqrt(3) = 1.49060
    ([0.1, -0.5, 0.7], 0.1 - 1.49060, 0.1 + 1.49060),
    # 5 seeds: mean -0.2, sd sqrt(0.1 / 4) = 0.158114, half = 2.776 * 0.158114 / sqrt(5) = 0.196292
    ([-0.2, -0.4, 0.0, -0.1, -0.3], -0.2 - 0.196292, -0.2 + 0.196292),
])
def test_t_intervals_for_two_three_and_five_seeds(values, low, high):
    iv = interval(values)
    assert (iv.low, iv.high) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))
    assert iv.n == len(values) and iv.mean == pytest.approx(statistics.fmean(values))
    assert (iv.boot is None) == (len(values) < 5)   # the bootstrap from 5 seeds on


def test_the_issues_random_control_interval():
    """CIFAR-10 (JPEG) random control - regular, seeds 0-2: -0.31 [-1.22, +0.60] (issue 22)."""
    assert interval([-0.63, -0.39, 0.09]).fmt() == "-0.31 [-1.22, +0.60]"


def test_one_seed_has_no_interval():
    assert interval([0.02]) is None and interval([]) is None


def test_t_quantiles_between_tabled_degrees_of_freedom_are_conservative():
    assert t975(4) == 2.776 and t975(35) == 2.042 and t975(59) == 2.021 and t975(500) == 1.960
    with pytest.raises(ValueError):
        t975(0)


def _brute_force_bootstrap(values, q):
    """Every one of the n^n ordered resamples, equally likely; the smallest mean whose
    cumulative share reaches q."""
    means = sorted(statistics.fmean(pick) for pick in itertools.product(values, repeat=len(values)))
    return means[math.ceil(q * len(means)) - 1]


def test_the_bootstrap_of_five_seeds_matches_every_resample_enumerated():
    values = [-0.9, -0.1, 0.2, 0.25, 1.4]
    low, high = interval(values).boot
    assert low == pytest.approx(_brute_force_bootstrap(values, 0.025))
    assert high == pytest.approx(_brute_force_bootstrap(values, 0.975))
    assert low < statistics.fmean(values) < high


def test_the_bootstrap_beyond_exact_enumeration_is_repeatable():
    values = [0.1 * i for i in range(12)]
    assert stats.bootstrap(values) == stats.bootstrap(values)
    low, high = stats.bootstrap(values)
    assert 0.3 < low < 0.55 < high < 0.8


def _iv(low, high):
    return Interval(3, (low + high) / 2, 0.1, low, high)


@pytest.mark.parametrize("low, high, expected", [
    (0.01, 0.8, "better"), (0.0, 0.8, "unresolved"),          # 0 must be excluded, not touched
    (-0.8, -0.01, "worse"), (-0.8, 0.0, "unresolved"),
    (-0.3, 0.3, "equivalent"), (-0.3, 0.301, "unresolved"), (-0.301, 0.3, "unresolved"),
    (-0.29, 0.05, "equivalent"),
])
def test_each_word_comes_from_its_own_case_and_not_its_neighbours(low, high, expected):
    assert word(_iv(low, high), margin=0.3) == expected


def test_a_resolved_sign_inside_the_margin_is_still_within_it():
    iv = _iv(-0.2, -0.05)
    assert word(iv, 0.3) == "worse" and stats.within(iv, 0.3)


@pytest.mark.parametrize("mean, std, margin, n", [
    # equivalence: t(n-1) * 0.3 / sqrt(n) <= 0.3: n = 6 gives 0.3149, n = 7 gives 0.2775
    (0.0, 0.3, 0.3, 7),
    # a sign: t(n-1) / sqrt(n) < 0.5: n = 17 gives 0.5142, n = 18 gives 0.4973
    (0.5, 1.0, 0.3, 18),
    (0.1, 0.0, 0.3, 2),                 # no spread: two seeds already resolve it
    (0.15, 50.0, 0.3, None),            # beyond 200 seeds
])
def test_seeds_needed(mean, std, margin, n):
    assert seeds_needed(mean, std, margin) == n
    if n and std:   # at n the interval with this mean and spread resolves; one seed fewer it does not
        half = lambda k: t975(k - 1) * std / math.sqrt(k)
        at = lambda k: Interval(k, mean, std, mean - half(k), mean + half(k))
        assert word(at(n), margin) != "unresolved" and word(at(n - 1), margin) == "unresolved"

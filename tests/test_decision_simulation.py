"""The decision procedure as a whole, simulated (tests/simulation.py): per-seed accuracies from a
known model, made into runs and decided by `analysis.decide.decision.decide` itself, 2,000 reports a
case. The share of reports with any wrong "worth it" or "not worth it" stays within the promised
5% plus two Monte Carlo standard errors where the error could show: boundary truths, noise at
the committed levels, policies noisier than their baselines, C(p) read between two arms, planned
looks. Each case but the corner failed on the decision code of d26b633 (Holm over each policy's
smaller-p claim, a pooled variance behind an F pretest): 7.2-16.6% wrong reports (docs/decisions.md
has each rate). The corner (exactly m below regular and δ above C(p)) is where d26b633's strict
boundary made both claims false; with not worth it including its boundary it is true there, and
both rules hold it. The last tests show the harness failing a wrong procedure."""

from functools import partial

import pytest

import simulation as sim
from fineprune_cli.analysis.decide import procedures, stats
from fineprune_cli.analysis.decide.shape import SKEWED
from fineprune_cli.analysis.group.paired import Paired

REPS = 2000
BOUND = sim.bound(REPS)  # 5% + 2 Monte Carlo standard errors: 5.97%


@pytest.mark.slow  # 2,000 simulated reports a case: seconds each
@pytest.mark.parametrize(
    "design",
    [
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.15),
        sim.Design((sim.LEVEL_WITH_C,) * 2 + (sim.CLEARLY_NOT,) * 2, sigma=0.15),
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.1, noisier=(2.0,) * 4),
        sim.Design((sim.WORTH_EDGE,) * 4, sigma=0.2, noisier=(2.0,) * 4),
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.1, noisier=(3.0, 1.0, 1.0, 1.0)),
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.15, interpolated=True),
        sim.Design(((-sim.M, sim.GAIN),) * 4, sigma=0.15),
        sim.Design((sim.NOT_WORTH_EDGE,) * 4, sigma=0.15),
    ],
    ids=[
        "level with C(p), four policies (the audit's 12.6%)",
        "level with C(p) beside two decisive policies",
        "policies twice as noisy as their baselines",
        "at the margin, policies twice as noisy",
        "one policy three times as noisy",
        "C(p) read between two shorter arms",
        "at the corner: exactly m below regular and δ above C(p)",
        "just past the minimum gain over C(p)",
    ],
)
def test_the_family_wise_rate_of_wrong_decisions_holds(design):
    assert sim.error_rate(design, REPS) <= BOUND


LOOKS_CASES = {
    "level with C(p), looks 5, 8, 12": (sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.15), (5, 8, 12)),
    "policies twice as noisy, looks 3, 5, 8": (
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.1, noisier=(2.0,) * 4),
        (3, 5, 8),
    ),
    "at the margin, policies twice as noisy, looks 3, 5, 8": (
        sim.Design((sim.WORTH_EDGE,) * 4, sigma=0.2, noisier=(2.0,) * 4),
        (3, 5, 8),
    ),
    "policies three times as noisy, looks 3, 5, 8": (
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.1, noisier=(3.0,) * 4),
        (3, 5, 8),
    ),
    "one policy three times as noisy, looks 3, 5, 8": (
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.1, noisier=(3.0, 1.0, 1.0, 1.0)),
        (3, 5, 8),
    ),
    "C(p) read between two arms, looks 3, 5, 8": (
        sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.15, interpolated=True),
        (3, 5, 8),
    ),
}


@pytest.mark.slow  # up to three decisions a procedure, 2,000 procedures a case
@pytest.mark.parametrize("case", list(LOOKS_CASES), ids=list(LOOKS_CASES))
def test_planned_looks_hold_it_over_the_whole_procedure_with_alpha_spent_late(case):
    """The procedure as `compare --until-decided` runs it (`analysis.decide.sequence.replay`), each
    policy's alpha / 4 split over the looks in proportion to their seeds cubed (the default
    allocation): the audit's hard cases stay within 5% + 2 Monte Carlo s.e."""
    design, looks = LOOKS_CASES[case]
    assert sim.error_rate(design, REPS, looks=looks) <= BOUND


def test_decisions_are_reached_where_the_truth_is_clear():
    """Not a procedure that never decides: with 8 seeds at 0.1 pt of noise, policies clearly worth
    it and clearly not are decided nearly always, and rightly."""
    design = sim.Design((sim.CLEARLY_WORTH, sim.CLEARLY_NOT), seeds=8, sigma=0.1)
    assert sim.decided_rate(design, reps=200) >= 0.95
    assert sim.error_rate(design, reps=200) == 0.0


@pytest.mark.slow  # 1,000 procedures of up to three decisions
def test_looking_again_at_the_full_level_at_every_look_breaks_it():
    """The procedure a user runs by hand (look, add seeds, look again at 5% / k each time)."""
    design = sim.Design((sim.WORTH_EDGE,) * 4, sigma=0.15)
    rate = sim.error_rate(design, 1000, looks=(5, 8, 12), per_look=sim.ALPHA, rule=sim.NORMAL_TAILS)
    assert rate > sim.bound(1000, ses=3)


@pytest.mark.slow  # 1,000 simulated reports
def test_the_harness_fails_a_procedure_without_the_family_correction(monkeypatch):
    """Each policy judged at the full 5% on its own: about 1 - 0.95^4 on the first case."""
    free = procedures.Correction("none", "", "", "", lambda claims, k: [c.p for c in claims], lambda alpha, k, s: alpha)
    monkeypatch.setitem(procedures.FAMILIES, "bonferroni", free)
    assert sim.error_rate(sim.Design((sim.WORTH_EDGE,) * 4, sigma=0.15), 1000) > sim.bound(1000, ses=3)


@pytest.mark.slow  # 1,000 simulated reports
def test_the_harness_fails_a_variance_that_assumes_equal_noise(monkeypatch):
    """One pooled sd for every comparison, the baselines' own (what a pool of many quiet baseline
    arms estimates): policies three times as noisy get intervals too narrow, and wrong words follow."""

    def pooled(p: Paired, q: float = stats.DEFAULT_QUANTUM):
        return stats.pooled_estimate(p.values(), p.norm_values(), sigma=0.1, df=40)

    monkeypatch.setitem(procedures.VARIANCES, "paired", procedures.VarianceModel("paired", "pooled", "", pooled))
    design = sim.Design((sim.WORTH_EDGE,) * 4, sigma=0.1, noisier=(3.0,) * 4)
    assert sim.error_rate(design, 1000, rule=sim.NORMAL_TAILS) > sim.bound(1000, ses=3)


@pytest.mark.slow  # 1,000 simulated reports
def test_the_seeds_advised_reach_the_chance_they_promise():
    """One policy level with C(p) at σ 0.2 (k = 1): the advice's noncentral t, at the true effect
    (δ − 0 = 0.3) and per-seed spread (σ √2, seeds cancelling), with the skew-robust critical
    value the decision uses, asks for 12 seeds and promises an 83% chance there (Student's t
    would ask for 10); simulated, the decision comes as often (within 3 Monte Carlo errors). The
    earlier advice, on a pooled test it did not model, reached 87-99.5% where it promised 80%."""
    sd = 0.2 * 2**0.5
    n = stats.seeds_for(partial(stats.power, 0.3, sd, alpha=0.025, shape=SKEWED))
    promised = stats.power(0.3, sd, n, 0.025, SKEWED)
    assert n == 12 and promised >= 0.8
    assert stats.seeds_for(partial(stats.power, 0.3, sd, alpha=0.025)) == 10
    found = sim.decided_rate(sim.Design((sim.LEVEL_WITH_C,), seeds=n, sigma=0.2), reps=1000)
    assert abs(found - promised) <= 3 * (promised * (1 - promised) / 1000) ** 0.5


# issue 56: skewed differences and rare failures, in one arm role at a time. Today's rule holds the
# 5% where the rule at 2aeb5f6 (Student's t, failures averaged in) broke it (the skewed cases here
# are where it broke it most); results/decisions/simulation.md has every cell (roles x skewness
# ±0.35, ±0.71 x looks 3,5,8 / 5,8,12 / one look), both rules side by side.
SKEWED_CASES = {
    "C(p)'s differences skewed -0.71, one look of 8 seeds": (sim.skewed("cheap", -0.71), ()),
    "C(p)'s differences skewed -0.71, looks 3, 5, 8": (sim.skewed("cheap", -0.71), (3, 5, 8)),
    "regular's differences skewed -0.71, looks 5, 8, 12": (sim.skewed("regular", -0.71), (5, 8, 12)),
    "every policy skewed -0.71, one look of 8 seeds": (sim.skewed("policy", -0.71), ()),
    "every policy skewed +0.71, looks 5, 8, 12": (sim.skewed("policy", 0.71), (5, 8, 12)),
    "regular fails 3 pt one run in ten, on the half-line, looks 5, 8, 12": (
        sim.failing("regular", sim.WORTH_EDGE),
        (5, 8, 12),
    ),
    "C(p)'s arm fails 3 pt one run in ten, just past δ, one look": (sim.failing("cheap", sim.NOT_WORTH_EDGE), ()),
    "the policies fail 3 pt one run in ten, level with C(p), looks 5, 8, 12": (
        sim.failing("policy", sim.LEVEL_WITH_C),
        (5, 8, 12),
    ),
}


@pytest.mark.slow  # 2,000 procedures a case
@pytest.mark.parametrize("case", list(SKEWED_CASES), ids=list(SKEWED_CASES))
def test_the_5_percent_holds_where_differences_are_skewed_or_an_arm_fails_rarely(case):
    """The rule at its defaults, through `decide` and `replay` themselves; a failing arm's truth is
    its runs that did not fail, which is what the decisions claim."""
    design, looks = SKEWED_CASES[case]
    assert sim.error_rate(design, REPS, looks=looks) <= BOUND


@pytest.mark.slow  # 2,000 reports a case, twice
def test_the_rule_at_2aeb5f6_breaks_the_5_percent_where_todays_holds_it():
    """The same draws through Student's t with failures averaged in: the skewed case above it."""
    design = sim.skewed("cheap", -0.71)
    assert sim.error_rate(design, REPS, rule=sim.BEFORE) > sim.bound(REPS, ses=3)
    assert sim.error_rate(design, REPS) <= BOUND


@pytest.mark.slow  # 1,000 procedures, twice
def test_no_rule_holds_a_claim_about_means_an_arm_drags_down_by_failures_it_may_not_show():
    """C(p)'s arm 3 pt low one run in ten, its mean just δ below the policies': a claim about
    means. The rule at 2aeb5f6 made that claim and was wrong in most reports; today's is wrong
    about it as often (in most 8-seed samples no failure shows), which is why today's claims are
    about the runs that did not fail (the cases above hold those)."""
    design = sim.failing("cheap", sim.NOT_WORTH_EDGE, truth_of="mean")
    assert sim.error_rate(design, 1000, looks=(5, 8, 12), rule=sim.BEFORE) > 0.3
    assert sim.error_rate(design, 1000, looks=(5, 8, 12)) > 0.3

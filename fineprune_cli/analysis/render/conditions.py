"""What a report's decisions rest on, said beside them: the shape of the differences their tests
hold for (and the shape these runs show), the failure rule and the runs it set aside, and what a
plan recorded before either existed is judged by (issue 56). Read by the verdict, computed in the
study: nothing here decides.
"""

from __future__ import annotations

from ...arms import REGULAR
from ..decide import stats
from ..decide.decision import Decision
from ..decide.judging import Judging
from ..decide.plan import unrecorded_text
from ..decide.procedures import EARLIER_SHAPE
from ..decide.shape import skew
from ..read.runs import policy_label
from ..study import Study


def tests(j: Judging) -> str:
    if j.shape == EARLIER_SHAPE:
        return "each test reads Student's t on n − 1 df, which holds for normal differences only"
    return (
        f"each test reads the {j.shape_model.label}, whose critical values hold when the differences are "
        "skewed toward its tail by up to 0.71 (never below Student's t)"
    )


def failures(j: Judging) -> str:
    if not j.failure:
        return "No failure rule: every run stays in its comparisons, and the claims are about the arms' means."
    return (
        f"A run that ended more than {j.failure:g} pt below its arm's median and is an outlier of its arm "
        "failed: it is set aside from the comparisons it enters and named, so the claims are about the runs "
        "that did not fail, and a policy that failed more runs than regular or C(p) is not called worth it."
    )


def given(j: Judging) -> str:
    """What the 5% rests on besides the plan, as shown by simulation (docs/decisions.md)."""
    return f"the seeds independent (each run its own random stream) and {j.shape_model.condition}"


def later(found: Study) -> str:
    """What a plan recorded before the tests' shape and the failure rule existed is judged by."""
    plan = found.plans[0] if found.plans else None
    if plan is None or not plan.unrecorded or len({p.rules for p in found.plans}) > 1:
        return ""
    j = found.judging
    parts = [f" The {unrecorded_text(plan)}."]
    if found.post_hoc:  # no bound of the plan's to keep: say what judged it, nothing more
        return parts[0]
    if "shape" in plan.unrecorded and j.shape != EARLIER_SHAPE:
        parts.append(
            f" Its {j.shape_model.label} tests each claim at least as strictly as the Student's t the plan was "
            "made under, so the plan's bound on wrong decisions still holds."
        )
    if "failure" in plan.unrecorded and j.failure:
        aside = {(f.arm, f.seed) for d in found.decisions for f in d.failures}
        parts.append(
            " No run failed by its failure rule, so the runs judged are the plan's."
            if not aside
            else f" Its failure rule set {len(aside)} run{'s' * (len(aside) > 1)} aside."
        )
    return "".join(parts)


EXCLUDED = 0.95  # the bounds on the policies' failure rates hold together, over the family


def failures_text(d: Decision, found: Study) -> str:
    """Every arm of the decision with its failed runs (set aside from the comparisons they enter,
    each named there too), and the failure rate the policy's runs exclude: a mean over a few
    seeds cannot show a rare failure, so the report says what its seeds rule out, at 95% for the
    family's k policies together."""
    j = found.judging
    if not j.failure:
        return "Failed runs: no failure rule (`--failure 0`): every run stays in its comparisons"
    by = found.groups.get(d.context, {})
    seeds = found.looks[d.look - 1] if d.look and found.looks else None
    arms = dict.fromkeys([REGULAR, d.policy, *(d.cheap.arms if d.cheap else ())])
    parts = []
    for arm in arms:
        n = sum(1 for s in by.get(arm, {}) if seeds is None or s < seeds)
        mine = sorted((f for f in d.failures if f.arm == arm), key=lambda f: f.seed)
        named = ", ".join(f"seed {f.seed}, {f.below:.2f} pt below" for f in mine)
        parts.append(f"{arm} {len(mine) or 'none'} of {n}" + (f" ({named})" if mine else ""))
    rule = f"more than {j.failure:g} pt below their arm's median and outliers of it"
    text = f"Failed runs ({rule}; set aside from the comparisons they enter): " + "; ".join(parts)
    n = sum(1 for s in by.get(d.policy, {}) if seeds is None or s < seeds)
    fell = sum(f.arm == d.policy for f in d.failures)
    level = 1 - (1 - EXCLUDED) / max(d.family, 1)
    bound = stats.rate_excluded(fell, n, level) if n else 1.0
    if bound >= 1.0:
        return f"{text}; no failure rate of {policy_label(d.policy)} is excluded"
    together = f" with the family's {d.family} policies together" if d.family > 1 else ""
    return (
        f"{text}; a failure in more than {bound:.0%} of {policy_label(d.policy)}'s runs is excluded at "
        f"{EXCLUDED:.0%}{together} (rarer failures are not: the seeds cannot show them)"
    )


def _listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def shape_lines(found: Study) -> list[str]:
    """What the tests assume of the differences' shape, beside what these runs show of it."""
    m = found.shape
    if m is None:
        return []
    limit = skew()
    near = [f"{g:+g}" if g else "0" for g in (-limit, 0.0, limit) if abs(g - m.skewness) <= 2 * m.se]
    far = [f"{g:+g}" if g else "0" for g in (-limit, 0.0, limit) if abs(g - m.skewness) > 2 * m.se]
    verdict = (
        f"{_listed(near)} {'lie' if len(near) > 1 else 'lies'} within two standard errors of it"
        + (f", {_listed(far)} {'do' if len(far) > 1 else 'does'} not" if far else "")
        if near
        else f"none of {_listed(far)} lies within two standard errors of it"
    )
    outlying = "; ".join(f"{name} seed {seed} ({value:+.2f} pt)" for name, seed, value in m.outlying)
    return [
        f"- **The shape of the per-seed differences**: pooled over the decisions' {m.comparisons} comparison"
        f"{'s' * (m.comparisons != 1)} of 3 seeds or more ({m.differences} differences), the skewness is "
        f"{m.skewness:+.2f} (± {m.se:.2f}, one standard error were they normal and the comparisons independent; "
        f"comparisons sharing runs make it wider): {verdict}. "
        + (
            f"The tests hold their level up to skewness {limit:g} toward a test's tail."
            if found.judging.shape != EARLIER_SHAPE
            else "Student's t holds its level for normal differences only."
        )
        + (
            f" Outlying differences (Rosner's test at 1%): {outlying}."
            if outlying
            else " No difference is an outlier of its comparison (Rosner's test at 1%)."
        )
    ]

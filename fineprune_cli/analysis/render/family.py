"""The verdict's first paragraphs: how the report's family of decisions holds its error (the
procedure's sentence, each look's level and share, what the promise rests on) and the plan the
decisions keep to, or why they are post hoc."""

from __future__ import annotations

from ..decide.judging import shares
from ..decide.plan import describe
from ..study import Study
from . import conditions


def family_text(found: Study) -> str:
    j, ds = found.judging, found.decisions
    k = ds[0].family
    policies = f"{k} polic{'y' if k == 1 else 'ies'}"
    rule = j.correction.rule.format(policies=policies, looks_text=_looks_text(found), level=_levels(found))
    here = "" if len(ds) == k else f" ({len(ds)} of them judged here, each at the planned level)"
    return (
        f"One decision per policy, {k} in the family{here}; the chance of any wrong *worth it* or "
        f"*not worth it* among them {_held(found)} ({rule}), since no more than one of a policy's "
        f"two claims can be false. Worth it: not worse than regular by {j.margin:g} pt or more *and* better than "
        f"its cheap alternative C(p) (each test at a); not worth it: worse than regular by {j.margin:g} pt or "
        f"more, or not better than C(p) by more than {j.gain:g} pt (either route, each at a / 2). Each "
        "comparison uses its own paired spread (the t statistic of its per-seed differences), so an arm "
        f"noisier than the others widens only its own comparisons; {conditions.tests(j)}. {conditions.failures(j)} The bracket "
        "after a difference holds the bounds its claims test (the lower at a, the upper at a / 2): a claim "
        f"reads off them. p is the claim's p-value, {j.correction.label}-adjusted in brackets: a claim stands "
        f"when that is {j.alpha:g} or less."
    )


def _held(found: Study) -> str:
    """The promise, with what it rests on: never a bare "at most 5%"."""
    said = conditions.given(found.judging)
    if found.post_hoc:
        return f"would be held to {found.judging.alpha:.0%} for a plan fixed before the data, given {said}"
    return f"is held to {found.judging.alpha:.0%}, given {said}, and the plan kept"


def _looks_text(found: Study) -> str:
    if not found.looks:
        return ""
    parts = shares(found.judging, found.looks)
    split = " / ".join(f"{100 * w:.0f}%" for w in parts)
    return (
        f", each policy's share split over {len(found.looks)} planned looks ({found.judging.allocation}: "
        f"{split} at {', '.join(map(str, found.looks))} seeds)"
    )


def _levels(found: Study) -> str:
    if not found.looks:
        return f"a = {found.decisions[0].level:.4g}"
    j, k = found.judging, found.decisions[0].family
    return "a = " + " / ".join(f"{j.correction.level(j.alpha, k, w):.4g}" for w in shares(j, found.looks))


def plan_text(found: Study) -> str:
    later = conditions.later(found)
    if not found.post_hoc:
        plan = found.plans[0]
        note = f" ({plan.note})" if plan.note else ""
        return (
            f"Plan: {describe(plan)}, recorded before the first run ({plan.recorded}){note}; these decisions "
            "keep to it." + later
        )
    return (
        "**Post hoc.** These decisions do not keep to a plan fixed before the data, so that error rate "
        "does not apply to them: " + "; ".join(found.post_hoc) + ". Read them as a description." + later
    )

"""The report's verdict: the plan and whether the decisions keep to it, the decisions table, then
each decision's chain (its two comparisons with the bounds they test, C(p), the p-values, the
seeds used and left out, how the word moves with δ and with equal noise), the planned looks
replayed, and what a reader needs about each context. Every claim in it is a decision of the
study (`analysis.study`); the rest describes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...arms import REGULAR
from ...engine.records.files import to_markdown
from ..decide import stats
from ..decide.advice import advised, pooled_fit
from ..decide.decision import CANT_TELL, Decision
from ..decide.plan import seeds_text
from ..decide.sequence import decidable
from ..group import paired
from ..group.compression import beside
from ..group.groups import is_frontier, is_shorter, pruned_policies
from ..group.rownumbers import Stat
from ..read import randomequal
from ..read.runs import Run, policy_label
from ..study import Study
from . import conditions, family, leftout
from .tables import context_title

ROUTES = {"worse": "worse than regular", "worth": "worth it", "short": "short of C(p)"}
HEADER = ["policy", "budget", "− regular [bounds]", "C(p)", "− C(p) [bounds]", "p (adjusted)", "decision"]


def pval(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def peq(p: float) -> str:
    """'= 0.028' or '< 0.001', after a p(...)."""
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def short_against(against: str) -> str:
    return {
        paired.SHORTER_LINE: "fewer epochs",
        paired.RANDOM_LINE: "random every epoch",
        paired.THE_CONTROL: "random control",
        REGULAR: REGULAR,
    }.get(against, against)


def _est(d: Decision, e: stats.Estimate | None) -> str:
    return f"{e.fmt(bounds=d.bounds(e))} (n {e.n})" if e else "—"


def _word(d: Decision) -> str:
    if d.left_out:  # which runs of its row were not judged, and why: never a seed missing without a word
        return f"{d.word} ({d.left_out})"
    if d.word != CANT_TELL:
        return d.word + (f" (look {d.look})" if d.look else "")
    if d.incomplete:
        return f"{CANT_TELL} (look {d.look} incomplete)" if d.look else f"{CANT_TELL} (seeds incomplete)"
    seeds = advised(d.advice) if d.advice else ""
    return f"{CANT_TELL} ({seeds})" if seeds else CANT_TELL


def table(decisions: list[Decision]) -> tuple[list[str], list[list[str]]]:
    contexts = {d.context for d in decisions}
    rows = []
    for d in decisions:
        name = policy_label(d.policy) + (f" ({context_title(d.context)})" if len(contexts) > 1 else "")
        rows.append(
            [
                name,
                f"{d.budget:.1f}%",
                _est(d, d.vs_regular),
                short_against(d.cheap.against) if d.cheap else "—",
                _est(d, d.vs_cheap),
                f"{pval(d.p_claim)} ({pval(d.p_adjusted)})" if d.route else "—",
                _word(d),
            ]
        )
    return HEADER, rows


def chain(d: Decision, found: Study) -> list[str]:
    """The steps that led to a decision, in the fixed order."""
    m, gain = found.judging.margin, found.judging.gain
    head = f"- **{policy_label(d.policy)}** ({d.budget:.1f}% of sample-epochs skipped): **{d.word}**"
    lines = [head + _because(d, found) + "."]
    lines.append(
        f"  - Against regular: {_comparison(d, d.regular, d.vs_regular)}"
        + (
            f"; p(not worse by {m:g}) {peq(d.p['not_worse'])}, p(worse by {m:g} or more) {peq(d.p['worse'])}"
            if "worse" in d.p
            else ""
        )
        + "."
    )
    if d.cheap is not None:
        lines.append(
            f"  - Against C(p), {d.cheap.against} (arms {', '.join(d.cheap.arms)}): "
            f"{_comparison(d, d.cheap, d.vs_cheap)}"
            + (
                f"; p(better) {peq(d.p['better'])}, p(not better by more than {gain:g}) {peq(d.p['short'])}"
                if "better" in d.p
                else ""
            )
            + "."
        )
        lines += beside(d.context, d.cheap.arms, found.compression)
    if d.why_cheap:
        lines.append(f"  - {d.why_cheap[0].upper()}{d.why_cheap[1:]}.")
    if d.regular.diffs or d.failures:
        lines.append(f"  - {conditions.failures_text(d, found)}.")
    lines += randomequal.chain_lines(found.groups.get(d.context, {}).get(d.policy, {}))
    if d.sensitivity:
        at = " / ".join(f"{g:g}" for g, _ in d.sensitivity)
        words = " / ".join(w for _, w in d.sensitivity)
        pooled = f"; with one pooled sd for every arm (equal noise assumed): {d.pooled_word}" if d.pooled_word else ""
        lines.append(f"  - Sensitivity: at δ = {at} pt: {words}{pooled}.")
    return lines


def _because(d: Decision, found: Study) -> str:
    m, gain = found.judging.margin, found.judging.gain
    name = found.judging.correction.label
    at = f" at look {d.look}" if d.look else ""
    if d.left_out and d.word == CANT_TELL and "diverge" in d.left_out:
        return f": {d.left_out}"
    if d.word != CANT_TELL:
        against = short_against(d.cheap.against) if d.cheap else "C(p)"
        what = {
            "worse": f"worse than regular by {m:g} pt or more",
            "worth": f"not worse than regular by {m:g} pt and better than {against}",
            "short": f"not better than {against} by more than {gain:g} pt",
        }[d.route]
        return f": {what} ({name}-adjusted p {pval(d.p_adjusted)}{at})"
    if d.incomplete:
        return f": {d.incomplete}, so it decides nothing until they are there" + _advice_text(d, m)
    if d.withheld and d.route == "worth" and d.p_adjusted <= found.judging.alpha:
        return f": its tests of worth it pass ({name}-adjusted p {pval(d.p_adjusted)}{at}), but {d.withheld}"
    if d.vs_regular is None:
        if d.regular.diffs:
            return (
                ": its seeds against regular leave no spread to judge by (no interval); run more seeds "
                "(`fineprune compare --seeds 0,1,2`)"
            )
        return ": no seed has both it and regular"
    why = f" (nearest claim: {ROUTES[d.route]}, {name}-adjusted p {pval(d.p_adjusted)}{at})" if d.route else ""
    return why + _advice_text(d, m)


CALIBRATED_FROM = 8  # seeds from which the simulated next-look chances stopped running high throughout


def _caveat(d: Decision) -> str:
    """Which way a next-look chance stated from these seeds ran off in simulation: high from few
    seeds; from 8, high where the difference was unclear and low where it was clear."""
    seeds = min((e.n for e in (d.vs_regular, d.vs_cheap) if e is not None), default=0)
    if seeds < CALIBRATED_FROM:
        return "from fewer than 8 seeds such chances ran high in simulation"
    return (
        "from 8 seeds such chances ran high in simulation where the difference was unclear, and low where it was clear"
    )


def _advice_text(d: Decision, m: float) -> str:
    a = d.advice
    if a is None:
        return ""
    nxt = (
        f"; averaged over what these seeds leave uncertain, the next look ({a.next_seeds} seeds) decides it "
        f"with a chance of about {a.next_chance:.0%} ({_caveat(d)}: docs/decisions.md)"
        if a.next_seeds and a.next_chance is not None
        else ""
    )
    if a.seeds is not None:
        return (
            f"; if the observed differences and spreads were the truth, {advised(a)} would decide it with 80% "
            f"probability at a = {a.level:.4g} (the range: each difference at either end of its 80% interval; "
            "a what-if, not a prediction: the truth is seldom the observed difference)" + nxt
        )
    if a.resolvable is not None:
        return (
            f"; no feasible number of seeds decides it at this noise: {stats.MAX_SEEDS} seeds would resolve "
            f"a margin of about ±{a.resolvable:.2f} pt, not ±{m:g}" + nxt
        )
    return nxt


def _comparison(d: Decision, p: paired.Paired, e: stats.Estimate | None) -> str:
    if e is None:
        text = (
            f"{p.mean:+.2f} pt in seed{'s' if len(p.seeds) > 1 else ''} {seeds_text(p.seeds)}, no spread to judge by"
            if p.diffs
            else "no seed has both runs"
        )
    else:
        text = (
            f"{e.fmt(bounds=d.bounds(e))} pt over {e.n} seed{'s' if e.n != 1 else ''} "
            f"({seeds_text(p.seeds)}; {d.variance or 'own paired t'}, {e.df:g} df)"
        )
    if p.left_out:
        text += "; left out: " + "; ".join(f"seed {s} ({why})" for s, why in sorted(p.left_out.items()))
    return text


def context_lines(runs_by: dict[str, dict[int, Run]], title: str, reg: Stat, quantum: float) -> list[str]:
    """What a reader needs about a context: regular's final accuracy (`reg`) and the test set's
    `quantum`, as the study made them, the pooled sd of the sensitivity lines, the lines not measured."""
    n, fit = len(runs_by.get(REGULAR, {})), pooled_fit(runs_by)
    pooled = (
        f"the block model's pooled residual sd, used only in the sensitivity lines, is {fit[0]:.2f} pt per run "
        f"on {fit[1]} df ({sum(len(v) for v in runs_by.values())} runs)"
        if fit
        else "no pooled sd (no df left)"
    )
    lines = [
        f"- **{title}**: regular {reg.fmt(2, '%')} over {n} seed{'s' if n != 1 else ''} "
        f"({seeds_text(sorted(runs_by.get(REGULAR, {})))}); {pooled}; one test image = "
        f"{quantum:g} pt."
    ]
    missing = [
        what
        for what, test in (
            ("random pruning in every epoch (`compare --frontier 0.1,0.3`)", is_frontier),
            ("training fewer epochs (`compare --shorter 0.1,0.3`)", is_shorter),
        )
        if not any(test(p) for p in runs_by)
    ]
    if missing and any(not paired.is_baseline(p) for p in pruned_policies(runs_by)):
        lines.append(f"  - Not measured here, so not a C(p): {' or '.join(missing)}.")
    return lines


def looks_lines(found: Study) -> list[str]:
    """The planned looks as replayed from the runs present, and where a looks.json says otherwise."""
    differ = (
        ["Where a looks.json among these runs says otherwise (this report replays the runs present):", ""]
        + [f"- {line}" for line in found.recorded]
        + [""]
        if found.recorded
        else []
    )
    if not found.looks:
        return differ
    lines = [
        f"Planned looks after {', '.join(map(str, found.looks))} seeds, replayed from the runs present: "
        "a decision reached at a look stands.",
        "",
        "| look | seeds | level a | decided at this look | still can't tell |",
        "| --- | --- | --- | --- | --- |",
    ]
    for look in found.replayed:
        still = [name + (" (incomplete)" if name in look.incomplete else "") for name in look.open]
        lines.append(
            f"| {look.number} | 0–{look.seeds - 1} | {look.level:.4g} | {', '.join(look.decided) or '—'} | "
            f"{', '.join(still) or '—'} |"
        )
    if found.beyond:
        lines += ["", f"Seeds {seeds_text(found.beyond)} lie beyond the last planned look and decide nothing."]
    return lines + [""] + differ


@dataclass(frozen=True)
class Verdict:
    """What the verdict says, before it is rendered: the family sentence and the plan, the
    decisions table, then the lines of each decision's chain, the looks and each context."""

    intro: str
    header: list[str]
    rows: list[list[str]]
    details: list[str]

    def markdown(self) -> list[str]:
        lines = [self.intro, ""] + ([to_markdown(self.header, self.rows).rstrip("\n"), ""] if self.rows else [])
        return lines + self.details


def build(found: Study) -> Verdict | None:
    groups = decidable(found.groups)
    lost = leftout.orphan_rows(found)
    if not groups and not lost:
        return None
    details: list[str] = []
    for d in found.decisions:
        details += chain(d, found)
    details.append("")
    details += looks_lines(found)
    for context, by in groups.items():
        details += context_lines(
            by, context_title(context), found.numbers[context, REGULAR].final_acc, found.quanta[context]
        )
    details += conditions.shape_lines(found)
    if not found.decisions:
        if lost:
            return Verdict("No policy could be judged: every run of these was left out.", HEADER, lost, details)
        return Verdict("No policy to decide: these runs hold regular and its baselines only.", HEADER, [], details)
    header, rows = table(found.decisions)
    return Verdict(family.family_text(found) + "\n\n" + family.plan_text(found), header, rows + lost, details)

"""The report's verdict: the decisions table first, then each decision's chain (its two
intervals, C(p), the p-values, the seeds each comparison used and left out), then what a
reader needs about each context (regular's accuracy, the noise, what was not measured).
Every claim in it is a decision of `analysis.decision`; the rest describes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.files import to_markdown
from . import paired, stats
from .decision import CANT_TELL, Decision, Judging, decide, noise
from ..arms import REGULAR
from .groups import group, is_frontier, is_shorter, pruned_policies
from .numbers import row_numbers
from .runs import Run, policy_label
from .tables import context_title

ROUTES = {"worse": "worse than regular", "worth": "worth it", "short": "short of C(p)"}
HEADER = ["policy", "budget", "− regular [90%]", "C(p)", "− C(p) [90%]", "p (Holm)", "decision"]


def seeds_text(seeds: list[int]) -> str:
    """'0–4', '0, 1, 3': a run of consecutive seeds as a range."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


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


def _est(e: stats.Estimate | None) -> str:
    return f"{e.fmt()} (n {e.n})" if e else "—"


def _word(d: Decision) -> str:
    if d.word != CANT_TELL:
        return d.word
    if d.seeds_80:
        return f"{CANT_TELL} (≈{d.seeds_80} seeds)"
    return CANT_TELL


def table(decisions: list[Decision]) -> tuple[list[str], list[list[str]]]:
    contexts = {d.context for d in decisions}
    rows = []
    for d in decisions:
        name = policy_label(d.policy) + (f" ({context_title(d.context)})" if len(contexts) > 1 else "")
        rows.append(
            [
                name,
                f"{d.budget:.1f}%",
                _est(d.vs_regular),
                short_against(d.cheap.against) if d.cheap else "—",
                _est(d.vs_cheap),
                f"{pval(d.p_claim)} ({pval(d.p_holm)})" if d.route else "—",
                _word(d),
            ]
        )
    return HEADER, rows


def family_text(decisions: list[Decision], judging: Judging) -> str:
    k = len(decisions)
    return (
        f"One decision per policy, {k} in this report's family; the chance of any wrong *worth it* or "
        f"*not worth it* among them is held at {judging.alpha:.0%} (Holm over the family). Worth it: not worse "
        f"than regular by more than m = {judging.margin:g} pt *and* better than its cheap alternative C(p); "
        f"not worth it: worse than regular by more than m, or shown not to beat C(p) by "
        f"{judging.gain:g} pt (either route, each at half the level). Intervals are 90% (two one-sided 5% "
        "tests); p is the claim's p-value, Holm-adjusted in brackets."
    )


def chain(d: Decision, judging: Judging) -> list[str]:
    """The steps that led to a decision, in the fixed order."""
    m, gain = judging.margin, judging.gain
    head = f"- **{policy_label(d.policy)}** ({d.budget:.1f}% of sample-epochs skipped): **{d.word}**"
    lines = [head + _because(d, judging) + "."]
    lines.append(
        f"  - Against regular: {_comparison(d.regular, d.vs_regular)}"
        + (
            f"; p(not worse by {m:g}) {peq(d.p['not_worse'])}, p(worse by more than {m:g}) {peq(d.p['worse'])}"
            if "worse" in d.p
            else ""
        )
        + "."
    )
    if d.cheap is not None:
        lines.append(
            f"  - Against C(p), {d.cheap.against} (arms {', '.join(d.cheap.arms)}): "
            f"{_comparison(d.cheap, d.vs_cheap)}"
            + (
                f"; p(better) {peq(d.p['better'])}, p(short of +{gain:g}) {peq(d.p['short'])}"
                if "better" in d.p
                else ""
            )
            + "."
        )
    if d.why_cheap:
        lines.append(f"  - {d.why_cheap[0].upper()}{d.why_cheap[1:]}.")
    return lines


def _because(d: Decision, judging: Judging) -> str:
    m, gain = judging.margin, judging.gain
    if d.word != CANT_TELL:
        what = {
            "worse": f"worse than regular by more than {m:g} pt",
            "worth": f"not worse than regular by {m:g} pt and better than {short_against(d.cheap.against)}"
            if d.cheap
            else "",
            "short": f"shown not to beat {short_against(d.cheap.against) if d.cheap else 'C(p)'} by {gain:g} pt",
        }[d.route]
        return f": {what} (Holm-adjusted p {pval(d.p_holm)})"
    if d.vs_regular is None:
        if d.regular.diffs:
            return (
                ": its seeds against regular leave no spread to judge by (no interval); run more seeds "
                "(`fineprune compare --seeds 0,1,2`)"
            )
        return ": no seed has both it and regular"
    why = f" (nearest claim: {ROUTES[d.route]}, Holm-adjusted p {pval(d.p_holm)})" if d.route else ""
    if d.seeds_80:
        return f"{why}; about {d.seeds_80} seeds would decide it with 80% probability at this noise"
    if d.resolvable is not None:
        return (
            f"{why}; no feasible number of seeds decides it at this noise: {stats.MAX_SEEDS} seeds would "
            f"resolve a margin of about ±{d.resolvable:.2f} pt, not ±{m:g}"
        )
    return why


def _comparison(p: paired.Paired, e: stats.Estimate | None) -> str:
    if e is None:
        return (
            f"{p.mean:+.2f} pt in seed {seeds_text(p.seeds)}, no spread to judge by"
            if p.diffs
            else "no seed has both runs"
        )
    text = f"{e.fmt()} pt over {e.n} seed{'s' if e.n != 1 else ''} ({seeds_text(p.seeds)}; {e.method})"
    if p.left_out:
        text += "; left out: " + "; ".join(f"seed {s} ({why})" for s, why in sorted(p.left_out.items()))
    return text


def context_lines(runs_by: dict[str, dict[int, Run]], title: str) -> list[str]:
    reg = row_numbers(runs_by, REGULAR).final_acc
    n, fit = len(runs_by.get(REGULAR, {})), noise(runs_by)
    pooled = (
        (
            f"residual sd {fit.sigma:.2f} pt per run on {fit.df} df (block model over "
            f"{sum(len(v) for v in runs_by.values())} runs)"
        )
        if fit.sigma is not None
        else "no pooled sd (no df left)"
    )
    lines = [
        f"- **{title}**: regular {reg.fmt(2, '%')} over {n} seed{'s' if n != 1 else ''} "
        f"({seeds_text(sorted(runs_by.get(REGULAR, {})))}); {pooled}; one test image = {fit.quantum:g} pt."
        + (
            f" Out of line with the pool, so judged on their own paired spread: "
            f"{', '.join(policy_label(a) for a in sorted(fit.loud))}."
            if fit.loud
            else ""
        )
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


@dataclass(frozen=True)
class Verdict:
    """What the verdict says, before it is rendered: the family sentence, the decisions table,
    then the lines of each decision's chain and of each context."""

    intro: str
    header: list[str]
    rows: list[list[str]]
    details: list[str]

    def markdown(self) -> list[str]:
        lines = [self.intro, ""] + ([to_markdown(self.header, self.rows).rstrip("\n"), ""] if self.rows else [])
        return lines + self.details


def build(runs: list[Run], judging: Judging = Judging()) -> Verdict | None:
    groups = {c: by for c, by in group(runs).items() if by.get(REGULAR)}
    if not groups:
        return None
    decisions = decide(groups, judging)
    details: list[str] = []
    for d in decisions:
        details += chain(d, judging)
    details.append("")
    for context, by in groups.items():
        details += context_lines(by, context_title(context))
    if not decisions:
        return Verdict("No policy to decide: these runs hold regular and its baselines only.", HEADER, [], details)
    header, rows = table(decisions)
    return Verdict(family_text(decisions, judging), header, rows, details)


def verdict(runs: list[Run], judging: Judging = Judging()) -> list[str]:
    """Markdown lines: the decisions table, each chain, then the contexts."""
    found = build(runs, judging)
    return found.markdown() if found else []

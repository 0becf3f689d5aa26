"""The report's verdict: sentences whose every claim an interval supports.

Per (model, dataset; and regular variant, where several): which arms are equivalent to
regular within the margin and which of those saves the most time (between runs of one
machine, else by the machine-independent cost); then each arm against regular, against
random pruning and against training fewer epochs at its own budget (the two frontiers, where
the runs hold them), with the word its 95% paired interval earns (`analysis.stats.word`) and the noise floor beside it.
"""

from __future__ import annotations

from . import paired, stats, timing
from .runs import Run, policy_label
from .groups import is_frontier, is_shorter
from .tables import Judging, context_title, group, policy_stats, pruned_policies


def verdict(runs: list[Run], judging: Judging = Judging()) -> list[str]:
    lines = []
    for context, by in group(runs).items():
        reg = policy_stats(by, "regular")
        if not reg["final_acc"].values:
            continue
        n = len(by["regular"])
        floor = f"regular's seed-to-seed std {reg['final_acc'].std:.2f} pt" if n > 1 else "unknown with one seed"
        lines.append(f"- **{context_title(context)}** ({n} seed{'s' if n != 1 else ''}; regular final "
                     f"accuracy {reg['final_acc'].fmt(2, '%')}; margin ±{judging.margin:g} pt; noise floor: {floor}).")
        if n < 2:
            lines.append("  - One seed: there is no interval, so nothing is claimed about accuracy; "
                         "run more seeds (`fineprune compare --seeds 0,1,2`).")
        else:
            lines.append(_best(by, judging.margin))
        for p in pruned_policies(by):
            lines += _judged(by, p, judging.margin)
        lines += _unmeasured(by)
    return lines


def _unmeasured(by: dict[str, dict[int, Run]]) -> list[str]:
    """Which of the two frontiers these runs lack, so silence is not read as a win."""
    policies = [p for p in pruned_policies(by) if not (is_frontier(p) or is_shorter(p))]
    missing = [what for what, test in (("random pruning in every epoch (`compare --frontier 0.1,0.3`)", is_frontier),
                                       ("training fewer epochs (`compare --shorter 0.1,0.3`)", is_shorter))
               if not any(test(p) for p in by)]
    if not policies or not missing:
        return []
    return [f"  - Not measured here, so not claimed: how the policies compare with {' or with '.join(missing)} "
            "at their budgets."]


def _best(by: dict[str, dict[int, Run]], margin: float) -> str:
    """The cost ranking, over the arms equivalent to regular within the margin only."""
    ok = [p for p in pruned_policies(by) if (iv := paired.vs_regular(by, p).interval) and stats.within(iv, margin)]
    if not ok:
        return f"  - No arm is shown equivalent to regular within ±{margin:g} pt, so none is ranked by time saved."
    cheapest = max(ok, key=lambda p: policy_stats(by, p)["skipped_pct"].mean)
    st = policy_stats(by, cheapest)
    return (f"  - Equivalent to regular within ±{margin:g} pt: {', '.join(policy_label(p) for p in ok)}. "
            f"By the machine-independent cost, {policy_label(cheapest)} trains the fewest sample-epochs "
            f"({st['sample_epochs'].fmt(2)}, {st['skipped_pct'].fmt(1, '%')} skipped). {_time_ranking(by, ok)}")


def _time_ranking(by: dict[str, dict[int, Run]], ok: list[str]) -> str:
    """'Saves the most time' only when its interval of time saved (between runs of one machine)
    lies above every other candidate's."""
    saved = {p: stats.interval(list(timing.savings(by, p)[0].values())) for p in ok}
    if any(iv is None for iv in saved.values()):
        return "Fewer than two seeds of each were timed on one machine, so none is said to save the most time."
    best = max(ok, key=lambda p: saved[p].mean)
    iv = saved[best]
    if all(iv.low > saved[p].high for p in ok if p != best):
        return (f"{policy_label(best)} saves the most time: {iv.fmt(signed=False)}% against regular between runs of "
                f"one machine ({iv.n} seeds).")
    return (f"Between runs of one machine none is resolved ahead in time saved (the highest mean: "
            f"{policy_label(best)}, {iv.fmt(signed=False)}% over {iv.n} seeds).")


def _judged(by: dict[str, dict[int, Run]], policy: str, margin: float) -> list[str]:
    skipped = policy_stats(by, policy)["skipped_pct"].fmt(1, "%")
    lines = [f"  - {policy_label(policy)} ({skipped} of sample-epochs skipped): "
             f"{_claim(paired.vs_regular(by, policy), 'regular', margin)}."]
    for control in paired.vs_controls(by, policy):
        baseline = "training fewer epochs" if control.against == paired.SHORTER_LINE else "random"
        lines.append(f"    Against {control.against}: {_claim(control, baseline, margin)}.")
    return lines


def _claim(p: paired.Paired, baseline: str, margin: float) -> str:
    iv = p.interval
    if iv is None:
        return (f"{p.mean:+.2f} pt in one seed; no interval, no verdict" if p.diffs
                else "no seed has both runs; no verdict")
    numbers = f"{iv.fmt()} pt" + (f" (bootstrap [{iv.boot[0]:+.2f}, {iv.boot[1]:+.2f}])" if iv.boot else "")
    word, floor = stats.word(iv, margin), f"paired std {iv.std:.2f} pt"
    if word in (stats.BETTER, stats.WORSE):
        inside = f", by less than the ±{margin:g} pt margin" if stats.within(iv, margin) else ""
        return f"{numbers}, {word} than {baseline}{inside} ({floor})"
    if word == stats.EQUIVALENT:
        return f"{numbers}, equivalent to {baseline} within ±{margin:g} pt ({floor})"
    need = stats.seeds_needed(iv.mean, iv.std, margin)
    more = (f"about {need} seeds would resolve it at this spread" if need
            else f"more than {stats.MAX_SEEDS_ESTIMATE} seeds would be needed at this spread")
    return f"{numbers}, unresolved against {baseline} ({floor}; {more})"

"""The report's verdict: sentences whose every claim an interval supports.

Per (model, dataset): which arms are equivalent to regular within the margin and which of
those saves the most time (between runs of one machine, else by the machine-independent
cost); then each arm against regular and against random pruning at its own budget, with the
word its 95% paired interval earns (`analysis.stats.word`) and the noise floor beside it.
"""

from __future__ import annotations

from . import paired, stats, timing
from .runs import Run, policy_label
from .tables import Judging, display_name, group, policy_stats, pruned_policies


def verdict(runs: list[Run], judging: Judging = Judging()) -> list[str]:
    lines = []
    for (model, label), by in group(runs).items():
        reg = policy_stats(by, "regular")
        if not reg["final_acc"].values:
            continue
        n = len(by["regular"])
        floor = f"regular's seed-to-seed std {reg['final_acc'].std:.2f} pt" if n > 1 else "unknown with one seed"
        lines.append(f"- **{display_name(model)} on {label}** ({n} seed{'s' if n != 1 else ''}; regular final "
                     f"accuracy {reg['final_acc'].fmt(2, '%')}; margin ±{judging.margin:g} pt; noise floor: {floor}).")
        if n < 2:
            lines.append("  - One seed: there is no interval, so nothing is claimed about accuracy; "
                         "run more seeds (`fineprune compare --seeds 0,1,2`).")
        else:
            lines.append(_best(by, judging.margin))
        for p in pruned_policies(by):
            lines += _judged(by, p, judging.margin)
    return lines


def _best(by: dict[str, dict[int, Run]], margin: float) -> str:
    """The time ranking, over the arms equivalent to regular within the margin only."""
    ok = [p for p in pruned_policies(by) if (iv := paired.vs_regular(by, p).interval) and stats.within(iv, margin)]
    if not ok:
        return f"  - No arm is shown equivalent to regular within ±{margin:g} pt, so none is ranked by time saved."
    names = ", ".join(policy_label(p) for p in ok)
    stats_of = {p: policy_stats(by, p) for p in ok}
    timed = {p: st["saved_pct"] for p, st in stats_of.items() if st["saved_pct"].values}
    head = f"  - Equivalent to regular within ±{margin:g} pt: {names}."
    if len(timed) == len(ok):
        best = max(ok, key=lambda p: timed[p].mean)
        n = len(timed[best].values)
        return (f"{head} Of these, {policy_label(best)} saves the most time: {timed[best].fmt(2, '%')} "
                f"against regular between runs of one machine ({n} seed{'s' if n != 1 else ''}), skipping "
                f"{stats_of[best]['skipped_pct'].fmt(1, '%')} of sample-epochs.")
    best = max(ok, key=lambda p: stats_of[p]["skipped_pct"].mean)
    return (f"{head} Their wall times were not all measured on one machine, so they are ranked by "
            f"the machine-independent cost: {policy_label(best)} trains the fewest sample-epochs "
            f"({stats_of[best]['sample_epochs'].fmt(2)}, {stats_of[best]['skipped_pct'].fmt(1, '%')} skipped).")


def _judged(by: dict[str, dict[int, Run]], policy: str, margin: float) -> list[str]:
    skipped = policy_stats(by, policy)["skipped_pct"].fmt(1, "%")
    lines = [f"  - {policy_label(policy)} ({skipped} of sample-epochs skipped): "
             f"{_claim(paired.vs_regular(by, policy), 'regular', margin)}."]
    for control in paired.vs_random(by, policy):
        lines.append(f"    Against {control.against}: {_claim(control, 'random', margin)}.")
    return lines


def _claim(p: paired.Paired, baseline: str, margin: float) -> str:
    iv = p.interval
    if iv is None:
        return (f"{p.mean:+.2f} pt in one seed; no interval, no verdict" if p.diffs
                else f"no seed has both runs; no verdict")
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

"""The report's pictures (matplotlib, Agg): each readable without the text around it."""

from __future__ import annotations

import hashlib
import re
import statistics
from pathlib import Path

import torch

from ...errors import ConfigError
from ..decide import decision
from ..group import timing
from ..group.groups import Context, is_frontier, is_shorter, pruned_policies
from ..read.runs import Run, arm_of, policy_color, policy_label
from ..study import Study
from .colors import row_colors
from .tables import context_title, display_name

MARKERS = "os^vD<>p*h"


def _seeds_text(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'fineprune[plot]' or pass --no-plots") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


SLUG_PART = 60  # characters of each name in a file name: a few in a row stay under 255 bytes


def slug(*parts: str) -> str:
    """A file-name-safe stem; a long name is cut and tagged with a hash of it, so two long
    names that share a beginning still get two files."""

    def one(part: str) -> str:
        text = re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-")
        if len(text) <= SLUG_PART:
            return text
        return text[: SLUG_PART - 9].rstrip("-") + "-" + hashlib.sha256(part.encode()).hexdigest()[:8]

    return "-".join(one(p) for p in parts)


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    _plt().close(fig)  # pyplot keeps every figure until closed: a long report (or test run) piled them up
    return path


def _mean_curve(runs: list[Run], column: str) -> tuple[list[int], list[float]]:
    epochs = [row.epoch for row in runs[0].metrics]
    values = [sum(getattr(r.metrics[i], column) for r in runs) / len(runs) for i in range(len(epochs))]
    return epochs, values


def curves(by_policy: dict[str, dict[int, Run]], title: str, path: Path) -> Path:
    """Test loss and accuracy per epoch, one line per policy (mean over seeds), as Figure 1."""
    plt = _plt()
    fig, (ax_loss, ax_acc) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    colors = row_colors(list(by_policy))
    for policy, seeds in by_policy.items():
        runs = list(seeds.values())
        for ax, column in ((ax_loss, "test_loss"), (ax_acc, "test_accuracy")):
            x, y = _mean_curve(runs, column)
            ax.plot(x, y, color=colors[policy], lw=1.2, label=f"{policy_label(policy)} ({_seeds_text(len(runs))})")
    first_pruned = [p for p in pruned_policies(by_policy) if not is_shorter(p)][:1]
    for policy in first_pruned:
        for row in next(iter(by_policy[policy].values())).metrics:
            if row.pruned:
                ax_acc.axvspan(row.epoch - 0.5, row.epoch + 0.5, color=colors[policy], alpha=0.08, lw=0)
    ax_loss.set_ylabel("test loss")
    ax_acc.set_ylabel("test accuracy (%)")
    shaded = f" (shaded: {policy_label(first_pruned[0])}'s pruning epochs)" if first_pruned else ""
    ax_acc.set_xlabel("epoch" + shaded)
    many = any(len(seeds) > 1 for seeds in by_policy.values())
    ax_loss.set_title(title + (" (mean over seeds)" if many else ""))
    ax_loss.legend(fontsize=8)
    ax_loss.grid(alpha=0.3)
    ax_acc.grid(alpha=0.3)
    return _save(fig, path)


def accuracy_by_cost(by_policy: dict[str, dict[int, Run]], title: str, target: float | None, path: Path) -> Path:
    """Test accuracy against cumulative sample-epochs trained (the machine-independent cost), one
    line per policy (mean over seeds), its seeds' range shaded; the random frontier left out."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    low, high, entries = [], [], []
    shown = [p for p in by_policy if not is_frontier(p)]
    colors = row_colors(shown)
    for policy in shown:
        runs = list(by_policy[policy].values())
        n = min(len(r.metrics) for r in runs)
        x = [sum(timing.sample_epochs(r, i + 1) for r in runs) / len(runs) for i in range(n)]
        accs = [[r.metrics[i].test_accuracy for r in runs] for i in range(n)]
        ax.plot(
            x,
            [sum(a) / len(a) for a in accs],
            color=colors[policy],
            lw=1.3,
            label=f"{policy_label(policy)} ({_seeds_text(len(runs))})",
        )
        if len(runs) > 1:
            ax.fill_between(x, [min(a) for a in accs], [max(a) for a in accs], color=colors[policy], alpha=0.15, lw=0)
        low.append(accs[-1][0])
        high.append(max(max(a) for a in accs))
        entries.append((x, [max(a) for a in accs]))
    if target is not None:
        ax.axhline(target, color="black", lw=0.8, ls="--", label=f"target {target:.2f}%")
    if low:  # the early epochs would squeeze the part where policies differ into a few pixels
        bottom = min(min(low), target if target is not None else min(low)) - 3
        ax.set_ylim(bottom, max(high) + 0.5)
        # and the x axis starts where the first line enters the view, not at the cost hidden below it
        ax.set_xlim(left=min(_entry(x, lo, bottom) for x, lo in entries))
    ax.set_xlabel("sample-epochs trained (1 = one full pass over the training set)")
    ax.set_ylabel("test accuracy (%)")
    many = any(len(by_policy[p]) > 1 for p in shown)
    ax.set_title(f"{title}: accuracy against cost" + (" (mean over seeds; shaded: their range)" if many else ""))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _entry(x: list[float], top: list[float], bottom: float) -> float:
    """The cost at the point before a line (its seeds' highest) first reaches `bottom`: the line
    enters the view from the left edge."""
    first = next((i for i, v in enumerate(top) if v >= bottom), len(top) - 1)
    return x[max(first - 1, 0)]


def timeline(run: Run, title: str, path: Path) -> Path:
    """Samples trained per epoch, pruning epochs in red and window resets marked, as Figure 3."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 2.6))
    epochs = [r.epoch for r in run.metrics]
    samples = [r.samples for r in run.metrics]
    colors = [policy_color(run.policy) if r.pruned else "#bbbbbb" for r in run.metrics]
    ax.bar(epochs, samples, width=1.0, color=colors, lw=0)
    window = run.summary.schedule.get("window") if arm_of(run.policy) in ("fine", "random") else None
    if isinstance(window, int) and not isinstance(window, bool) and 1 <= window <= len(epochs):
        for start in range(window, len(epochs) + 1, window):  # counts reset as epoch k*w starts
            ax.axvline(start - 0.5, color="black", lw=0.8, ls="--")
    n_pruned = sum(1 for r in run.metrics if r.pruned)
    reset = "; dashed = DroppingCount reset" if window else ""
    ax.set_title(f"{title}, {policy_label(run.policy)}: {n_pruned} of {len(epochs)} epochs pruned (coloured){reset}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("samples trained")
    ax.set_xlim(0.5, len(epochs) + 0.5)
    return _save(fig, path)


def counts_histogram(run: Run, title: str, path: Path) -> Path | None:
    """DroppingCount over the training set at the end of each window."""
    if not run.counts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    top = int(max(int(c.max()) for c in run.counts.values()))
    for window, counts in sorted(run.counts.items()):
        hist = torch.bincount(counts.flatten().long().clamp(min=0), minlength=top + 1)
        ax.step(range(top + 1), hist.tolist(), where="mid", label=f"window {window}")
    ax.set_yscale("log")
    ax.set_xlabel("DroppingCount (epochs with loss above the batch mean)")
    ax.set_ylabel("training samples")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, path)


RANDOM_LINES = ("#7f7f7f", "#17becf", "#bcbd22")  # one per (model, dataset) on one plot
SHORTER_LINES = ("#000000", "#e377c2", "#ff7f0e")


def _point(found: Study, context: Context, policy: str, q: float) -> tuple[float, float, list[float]] | None:
    """(budget, mean change, [below, above]): the descriptive 90% interval on the comparison's
    own paired spread, or no bar where there is none (one seed, or no spread)."""
    p = found.compared[context, policy].regular
    if not p.diffs:
        return None
    e = decision.estimate(p, q)
    at = found.numbers[context, policy].budget_pct.mean  # `paired.mean_budget` to the bit: fmean sums exactly
    if e is None:
        return at, statistics.fmean(p.diffs.values()), [0.0, 0.0]
    return at, e.mean, [e.mean - e.low, e.high - e.mean]


def _frontier_points(found: Study, context: Context, on_line) -> list[tuple[float, float, list[float]]]:
    q = found.quanta[context]
    return sorted(pt for p in found.groups[context] if on_line(p) and (pt := _point(found, context, p, q)) is not None)


DODGE = 0.012  # of the budgets' span: points at one budget set apart by about a marker's width


def dodged(xs: list[float], axis: list[float]) -> list[float]:
    """`xs` with points that would sit on one another (the random control at its policy's very
    budget) spread side by side around where they were, so that no interval hides another;
    `axis`: every budget the plot shows, whose span sets the step."""
    if not xs:
        return []
    step = max(DODGE * (max(axis) - min(0.0, *axis)), 0.15)
    out = list(xs)
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and xs[order[end]] - xs[order[start]] < step:
            end += 1
        for j, i in enumerate(order[start:end]):
            out[i] = xs[i] + (j - (end - start - 1) / 2) * step
        start = end
    return out


def tradeoff(found: Study, path: Path) -> Path:
    return _save(tradeoff_figure(found), path)


def tradeoff_figure(found: Study):
    """Accuracy change against the share of sample-epochs skipped (the budget), one point per
    policy and model, with the two frontiers as lines: random pruning in every epoch at several
    budgets, and regular training for fewer epochs; each policy is judged against both at its
    own budget. Mean over seeds; bars: descriptive 90% intervals on each arm's own paired spread."""
    plt = _plt()
    groups = found.groups
    fig, ax = plt.subplots(figsize=(7, 5))
    colors = row_colors(
        [p for by in groups.values() for p in pruned_policies(by) if not (is_frontier(p) or is_shorter(p))]
    )
    budgets: list[float] = []
    for i, context in enumerate(groups):
        name = context_title(context) if len(groups) > 1 else ""
        for on_line, style, palette, what in (
            (is_frontier, "-.", RANDOM_LINES, "random pruning every epoch"),
            (is_shorter, "--", SHORTER_LINES, "fewer epochs (shorter schedule)"),
        ):
            points = _frontier_points(found, context, on_line)
            if points:
                xs, ys, bars = zip(*points)
                budgets += xs
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[[b[0] for b in bars], [b[1] for b in bars]],
                    fmt=style + ("s" if on_line is is_shorter else "o"),
                    markersize=4,
                    color=palette[i % len(palette)],
                    capsize=2,
                    label=what + (f" ({name})" if name else ""),
                )
    shown: list[str] = []
    marks = []
    for context, by_policy in groups.items():
        q = found.quanta[context]
        for policy in pruned_policies(by_policy):
            pt = _point(found, context, policy, q)
            if is_frontier(policy) or is_shorter(policy) or pt is None:
                continue
            shown += [policy] if policy not in shown else []
            marks.append((context, policy, *pt))
    at = [m[2] for m in marks]
    for (context, policy, _, y, bar), x in zip(marks, dodged(at, budgets + at)):
        ax.errorbar(
            x,
            y,
            yerr=[[bar[0]], [bar[1]]],
            capsize=3,
            color=colors[policy],
            fmt=MARKERS[shown.index(policy) % len(MARKERS)],
        )
        if len(groups) > 1:
            ax.annotate(display_name(context.model), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    for i, policy in enumerate(shown):
        ax.plot([], [], MARKERS[i % len(MARKERS)], color=colors[policy], label=policy_label(policy))
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xlabel("sample-epochs skipped against regular (%): the budget")
    ax.set_ylabel("final test accuracy − regular (points)")
    many = any(len(seeds) > 1 for by in groups.values() for seeds in by.values())
    ax.set_title("Accuracy change against budget (paired by seed" + (", 90% intervals)" if many else ", one seed)"))
    if ax.get_legend_handles_labels()[0]:  # a report of damaged records may have nothing to show
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig

"""From runs to numbers: per-policy statistics and the paper's Tables 1 and 2.

Savings and accuracy changes are paired: each pruned run is compared with the regular
run of the same model, dataset and seed, then averaged over seeds (mean ± sample std).
Every policy present gets its rows, named by the policy registry's label.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..drivers.compare import frontier_fraction
from .runs import Run, policy_label, policy_order

PAPER_FILE = Path(__file__).with_name("paper_results.yaml")
NA = "—"


@dataclass
class Stat:
    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else float("nan")

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    def fmt(self, digits: int = 2, unit: str = "") -> str:
        if not self.values:
            return NA
        text = f"{self.mean:.{digits}f}"
        if len(self.values) > 1:
            text += f" ± {self.std:.{digits}f}"
        return text + unit


@lru_cache(maxsize=1)
def paper_results() -> dict[str, Any]:
    return yaml.safe_load(PAPER_FILE.read_text())


def display_name(model: str) -> str:
    return paper_results()["models"].get(model, {}).get("name", model)


def group(runs: list[Run]) -> dict[tuple[str, str], dict[str, dict[int, Run]]]:
    """(model, dataset label) -> policy -> seed -> run, policies in the registry's order."""
    out: dict[tuple[str, str], dict[str, dict[int, Run]]] = {}
    for run in sorted(runs, key=lambda r: (r.key, policy_order(r.policy), r.seed)):
        out.setdefault(run.key, {}).setdefault(run.policy, {})[run.seed] = run
    return out


def pruned_policies(by_policy: dict[str, dict[int, Run]]) -> list[str]:
    return [p for p in by_policy if p != "regular"]


def _paired(by_policy: dict[str, dict[int, Run]], policy: str, fn) -> Stat:
    regular = by_policy.get("regular", {})
    mine = by_policy.get(policy, {})
    return Stat([fn(mine[s], regular[s]) for s in sorted(mine) if s in regular])


def _saving(run: Run, base: Run) -> float:
    return 100.0 * (1.0 - run.summary.train_seconds / base.summary.train_seconds)


def _median_epoch(run: Run, pruned: bool) -> float:
    times = [r.train_seconds for r in run.metrics if bool(r.pruned) == pruned and r.epoch > 1]
    median = statistics.median(times) if times else 0.0
    return median if median > 0 else float("nan")  # no such epochs, or too short to time


def pace_saving(run: Run) -> float:
    """Time saved against the run's own full-epoch pace: 1 - (sum of epoch times) / (n x median
    unpruned epoch; epoch 1 left out, it pays for warm-up). Separate runs on a shared machine
    drift apart by more than a 10% saving; this compares times measured in the same run."""
    total = sum(r.train_seconds for r in run.metrics)
    return 100.0 * (1.0 - total / (len(run.metrics) * _median_epoch(run, pruned=False)))


def epoch_ratio(run: Run) -> float:
    """Median pruned epoch over median full epoch of the same run (ideal: 1 - prune fraction)."""
    return _median_epoch(run, pruned=True) / _median_epoch(run, pruned=False)


def _finite(values: list[float]) -> Stat:
    return Stat([v for v in values if math.isfinite(v)])


def policy_stats(by_policy: dict[str, dict[int, Run]], policy: str) -> dict[str, Stat]:
    runs = [by_policy[policy][s] for s in sorted(by_policy.get(policy, {}))]
    s = [r.summary for r in runs]
    return {
        "train_s": Stat([x.train_seconds for x in s]),
        "pruned_s": Stat([x.train_seconds - x.overhead_seconds for x in s]),
        "overhead_s": Stat([x.overhead_seconds for x in s]),
        "skipped_pct": Stat([100.0 * x.samples_skipped / (x.epochs * x.num_train) for x in s]),
        "final_acc": Stat([x.final_accuracy for x in s]),
        "best3_acc": Stat([x.best3_accuracy for x in s]),
        "saved_pct": _paired(by_policy, policy, _saving),
        "pace_saved_pct": _finite([pace_saving(r) for r in runs]),
        "epoch_ratio": _finite([epoch_ratio(r) for r in runs]),
        "d_final": _paired(by_policy, policy, lambda r, b: r.summary.final_accuracy - b.summary.final_accuracy),
        "d_best3": _paired(by_policy, policy, lambda r, b: r.summary.best3_accuracy - b.summary.best3_accuracy),
    }


def summary_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per (model, dataset, policy), numeric, for summary.csv and the console."""
    rows = []
    for (model, label), by_policy in group(runs).items():
        for policy in by_policy:
            stats = policy_stats(by_policy, policy)
            row: dict[str, Any] = {"model": model, "dataset": label, "policy": policy,
                                   "seeds": len(by_policy[policy])}
            for name, stat in stats.items():
                row[f"{name}_mean"] = round(stat.mean, 4) if stat.values else ""
                row[f"{name}_std"] = round(stat.std, 4) if stat.values else ""
            rows.append(row)
    return rows


def _columns(groups) -> list[tuple[tuple[str, str], str]]:
    labels = {label for _, label in groups}
    return [((m, d), display_name(m) if len(labels) == 1 else f"{display_name(m)} ({d})")
            for m, d in groups]


def _paper(model: str, key: str, fmt: str) -> str:
    entry = paper_results()["models"].get(model)
    return fmt.format(entry[key]) if entry else NA


def _table(runs: list[Run], cells) -> tuple[list[str], list[list[str]]]:
    """Rows by name, one column per (model, dataset); `cells(model, by_policy)` gives a
    column as (row name, text) pairs. A row a column lacks reads '—'."""
    groups = group(runs)
    cols = _columns(groups)
    body: dict[str, list[str]] = {}
    for i, ((model, label), _) in enumerate(cols):
        for name, text in cells(model, label, groups[(model, label)]):
            body.setdefault(name, [NA] * len(cols))[i] = text
    return [""] + [c for _, c in cols], [[name] + vals for name, vals in body.items()]


def _seeds(by_policy: dict[str, dict[int, Run]]) -> str:
    return str(max(len(v) for v in by_policy.values()))


def _time_cells(model: str, label: str, by: dict[str, dict[int, Run]]) -> list[tuple[str, str]]:
    cells = [("Dataset", label), ("Seeds", _seeds(by)),
             ("Regular", policy_stats(by, "regular")["train_s"].fmt(1, " s"))]
    for p in pruned_policies(by):
        st, name = policy_stats(by, p), policy_label(p)
        cells += [(name, st["pruned_s"].fmt(1, " s")), (f"{name}: overhead", st["overhead_s"].fmt(2, " s")),
                  (f"{name}: saved", st["saved_pct"].fmt(2, "%")),
                  (f"{name}: saved at own pace", st["pace_saved_pct"].fmt(2, "%")),
                  (f"{name}: samples skipped", st["skipped_pct"].fmt(2, "%")),
                  (f"{name}: pruned epoch / full epoch", st["epoch_ratio"].fmt(3, "×"))]
    return cells + [("Paper regular (CIFAR-10)", _paper(model, "regular_s", "{:g} s")),
                    ("Paper pruned (CIFAR-10)", _paper(model, "pruned_s", "{:g} s")),
                    ("Paper overhead (CIFAR-10)", _paper(model, "overhead_s", "{:.2f} s")),
                    ("Paper saved (CIFAR-10)", _paper(model, "speedup_pct", "{:.2f}%"))]


def _accuracy_cells(model: str, label: str, by: dict[str, dict[int, Run]]) -> list[tuple[str, str]]:
    reg = policy_stats(by, "regular")
    cells = [("Dataset", label), ("Seeds", _seeds(by)), ("Regular (best-3)", reg["best3_acc"].fmt(2, "%")),
             ("Regular (final)", reg["final_acc"].fmt(2, "%"))]
    for p in pruned_policies(by):
        st, name = policy_stats(by, p), policy_label(p)
        cells += [(f"{name} (best-3)", st["best3_acc"].fmt(2, "%")),
                  (f"{name} − regular (best-3)", st["d_best3"].fmt(2, " pt")),
                  (f"{name} (final)", st["final_acc"].fmt(2, "%")),
                  (f"{name} − regular (final)", st["d_final"].fmt(2, " pt"))]
    entry = paper_results()["models"].get(model)
    return cells + [("Paper regular (CIFAR-10)", _paper(model, "regular_acc", "{:.2f}%")),
                    ("Paper pruned (CIFAR-10)", _paper(model, "pruned_acc", "{:.2f}%")),
                    ("Paper pruned − regular (CIFAR-10)",
                     f"{entry['pruned_acc'] - entry['regular_acc']:.2f} pt" if entry else NA)]


def table1(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """Time: the paper's rows (regular, pruned, overhead, saved) for every policy present."""
    return _table(runs, _time_cells)


def table2(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """Accuracy: best-3 mean as in the paper, and final accuracy with its spread over seeds."""
    return _table(runs, _accuracy_cells)


def _frontier_at(by_policy: dict[str, dict[int, Run]], skipped: float) -> float | None:
    """The random frontier's accuracy change at a budget (linear between its arms)."""
    arms = [policy_stats(by_policy, p) for p in by_policy if frontier_fraction(p) is not None]
    points = sorted((st["skipped_pct"].mean, st["d_final"].mean) for st in arms if st["d_final"].values)
    for x, y in points:   # a lone frontier arm at the policy's own budget judges it too
        if abs(x - skipped) < 0.05:
            return y
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= skipped <= x1:
            return y0 + (y1 - y0) * (skipped - x0) / (x1 - x0) if x1 > x0 else y0
    return None


def verdict(runs: list[Run]) -> list[str]:
    """Plain sentences per (model, dataset): the policy that saves the most time at an accuracy
    change within one standard deviation of regular, and each policy against random at its
    own budget (the frontier where there is one, else the equal-budget `random` control)."""
    lines = []
    for (model, label), by in group(runs).items():
        reg = policy_stats(by, "regular")
        if not reg["final_acc"].values:
            continue
        spread = reg["final_acc"].std
        n = _seeds(by)
        head = f"**{display_name(model)} on {label}** ({n} seed{'s' if n != '1' else ''}; regular final accuracy {reg['final_acc'].fmt(2, '%')})"
        stats = {p: policy_stats(by, p) for p in pruned_policies(by)}
        ok = [(st["saved_pct"].mean, p) for p, st in stats.items()
              if st["d_final"].values and st["d_final"].mean >= -spread]
        if ok:
            saved, best = max(ok)
            st = stats[best]
            lines.append(f"- {head}: within one std of regular ({spread:.2f} pt), {policy_label(best)} saves the "
                         f"most time: {st['saved_pct'].fmt(2, '%')} (skipping {st['skipped_pct'].fmt(1, '%')} of "
                         f"sample-epochs) at {st['d_final'].fmt(2, ' pt')}.")
        else:
            lines.append(f"- {head}: no policy stays within one std of regular ({spread:.2f} pt).")
        for p, st in stats.items():
            if not st["d_final"].values or p == "random" or frontier_fraction(p) is not None:
                continue
            at = _frontier_at(by, st["skipped_pct"].mean)
            control = policy_stats(by, "random")
            if at is None and control["d_final"].values and p == "fine":
                at, what = control["d_final"].mean, "the random control at the same budget"
            else:
                what = "random pruning in every epoch at the same budget"
            said = f"  - {policy_label(p)}: {st['d_final'].fmt(2, ' pt')} at {st['skipped_pct'].fmt(1, '%')} skipped"
            if at is not None:
                word = "better than" if st["d_final"].mean > at else "no better than"
                lines.append(f"{said}, {word} {what} ({at:+.2f} pt).")
            else:
                lines.append(f"{said}; no random run at that budget to judge it against (compare --frontier).")
    return lines

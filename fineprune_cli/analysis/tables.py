"""From runs to numbers: per-policy statistics and the paper's Tables 1 and 2.

Savings and accuracy changes are paired: each pruned run is compared with the regular
run of the same model, dataset and seed, then averaged over seeds (mean ± sample std).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from .runs import Run

PAPER_FILE = Path(__file__).with_name("paper_results.yaml")
POLICY_ORDER = ("regular", "fine", "random")
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
    """(model, dataset label) -> policy -> seed -> run, in a stable order."""
    out: dict[tuple[str, str], dict[str, dict[int, Run]]] = {}
    for run in sorted(runs, key=lambda r: (r.key, str(r.summary["policy"]), int(r.summary["seed"]))):
        out.setdefault(run.key, {}).setdefault(str(run.summary["policy"]), {})[int(run.summary["seed"])] = run
    return out


def _paired(by_policy: dict[str, dict[int, Run]], policy: str, fn) -> Stat:
    regular = by_policy.get("regular", {})
    mine = by_policy.get(policy, {})
    return Stat([fn(mine[s], regular[s]) for s in sorted(mine) if s in regular])


def _saving(run: Run, base: Run) -> float:
    return 100.0 * (1.0 - run.summary["train_seconds"] / base.summary["train_seconds"])


def _median_epoch(run: Run, pruned: bool) -> float:
    times = [r["train_seconds"] for r in run.metrics if bool(r["pruned"]) == pruned and r["epoch"] > 1]
    median = statistics.median(times) if times else 0.0
    return median if median > 0 else float("nan")  # no such epochs, or too short to time


def pace_saving(run: Run) -> float:
    """Time saved against the run's own full-epoch pace: 1 - (sum of epoch times) / (n x median
    unpruned epoch; epoch 1 left out, it pays for warm-up). Separate runs on a shared machine
    drift apart by more than a 10% saving; this compares times measured in the same run."""
    total = sum(r["train_seconds"] for r in run.metrics)
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
        "train_s": Stat([x["train_seconds"] for x in s]),
        "pruned_s": Stat([x["train_seconds"] - x.get("overhead_seconds", 0.0) for x in s]),
        "overhead_s": Stat([x.get("overhead_seconds", 0.0) for x in s]),
        "skipped_pct": Stat([100.0 * x["samples_skipped"] / (x["epochs"] * x["num_train"]) for x in s]),
        "final_acc": Stat([x["final_accuracy"] for x in s]),
        "best3_acc": Stat([x["best3_accuracy"] for x in s]),
        "saved_pct": _paired(by_policy, policy, _saving),
        "pace_saved_pct": _finite([pace_saving(r) for r in runs]),
        "epoch_ratio": _finite([epoch_ratio(r) for r in runs]),
        "d_final": _paired(by_policy, policy, lambda r, b: r.summary["final_accuracy"] - b.summary["final_accuracy"]),
        "d_best3": _paired(by_policy, policy, lambda r, b: r.summary["best3_accuracy"] - b.summary["best3_accuracy"]),
    }


def summary_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per (model, dataset, policy), numeric, for summary.csv and the console."""
    rows = []
    for (model, label), by_policy in group(runs).items():
        for policy in [p for p in POLICY_ORDER if p in by_policy]:
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


def table1(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """Time: the paper's rows (Regular, Pruned, Overhead, Speedup) plus the random control."""
    groups = group(runs)
    cols = _columns(groups)
    body: dict[str, list[str]] = {name: [] for name in (
        "Dataset", "Seeds", "Regular", "Pruned", "Overhead", "Speedup", "Random", "Random speedup",
        "Samples skipped", "Speedup at own pace", "Random speedup at own pace",
        "Pruned epoch / full epoch", "Paper regular (CIFAR-10)", "Paper pruned (CIFAR-10)",
        "Paper overhead (CIFAR-10)", "Paper speedup (CIFAR-10)")}
    for (model, label), _ in cols:
        by = groups[(model, label)]
        fine, rand, reg = (policy_stats(by, p) for p in ("fine", "random", "regular"))
        body["Dataset"].append(label)
        body["Seeds"].append(str(max(len(v) for v in by.values())))
        body["Regular"].append(reg["train_s"].fmt(1, " s"))
        body["Pruned"].append(fine["pruned_s"].fmt(1, " s"))
        body["Overhead"].append(fine["overhead_s"].fmt(2, " s"))
        body["Speedup"].append(fine["saved_pct"].fmt(2, "%"))
        body["Random"].append(rand["train_s"].fmt(1, " s"))
        body["Random speedup"].append(rand["saved_pct"].fmt(2, "%"))
        body["Samples skipped"].append(fine["skipped_pct"].fmt(2, "%"))
        body["Speedup at own pace"].append(fine["pace_saved_pct"].fmt(2, "%"))
        body["Random speedup at own pace"].append(rand["pace_saved_pct"].fmt(2, "%"))
        body["Pruned epoch / full epoch"].append(fine["epoch_ratio"].fmt(3, "×"))
        body["Paper regular (CIFAR-10)"].append(_paper(model, "regular_s", "{:g} s"))
        body["Paper pruned (CIFAR-10)"].append(_paper(model, "pruned_s", "{:g} s"))
        body["Paper overhead (CIFAR-10)"].append(_paper(model, "overhead_s", "{:.2f} s"))
        body["Paper speedup (CIFAR-10)"].append(_paper(model, "speedup_pct", "{:.2f}%"))
    return [""] + [c for _, c in cols], [[name] + vals for name, vals in body.items()]


def table2(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """Accuracy: best-3 mean as in the paper, and final accuracy with its spread over seeds."""
    groups = group(runs)
    cols = _columns(groups)
    rows: dict[str, list[str]] = {name: [] for name in (
        "Dataset", "Seeds", "Regular (best-3)", "Pruned (best-3)", "Random (best-3)",
        "Pruned − regular (best-3)", "Random − regular (best-3)", "Regular (final)",
        "Pruned (final)", "Random (final)", "Pruned − regular (final)", "Random − regular (final)",
        "Paper regular (CIFAR-10)", "Paper pruned (CIFAR-10)",
        "Paper pruned − regular (CIFAR-10)")}
    for (model, label), _ in cols:
        by = groups[(model, label)]
        st = {p: policy_stats(by, p) for p in POLICY_ORDER}
        entry = paper_results()["models"].get(model)
        vals = [label, str(max(len(v) for v in by.values())),
                st["regular"]["best3_acc"].fmt(2, "%"), st["fine"]["best3_acc"].fmt(2, "%"),
                st["random"]["best3_acc"].fmt(2, "%"), st["fine"]["d_best3"].fmt(2, " pt"),
                st["random"]["d_best3"].fmt(2, " pt"), st["regular"]["final_acc"].fmt(2, "%"),
                st["fine"]["final_acc"].fmt(2, "%"), st["random"]["final_acc"].fmt(2, "%"),
                st["fine"]["d_final"].fmt(2, " pt"), st["random"]["d_final"].fmt(2, " pt"),
                _paper(model, "regular_acc", "{:.2f}%"), _paper(model, "pruned_acc", "{:.2f}%"),
                f"{entry['pruned_acc'] - entry['regular_acc']:.2f} pt" if entry else NA]
        for name, value in zip(rows, vals):
            rows[name].append(value)
    return [""] + [c for _, c in cols], [[name] + vals for name, vals in rows.items()]

"""summary.csv's rows (`summary_rows`, unrounded until the file rounds once): each row's numbers,
comparisons and time to accuracy as the study made them once (`analysis.group.rownumbers`,
`analysis.group.reach`), with its decision.

Savings and accuracy changes are paired: each pruned run is compared with the regular run of the
same model, dataset and seed. Final-accuracy changes carry a descriptive 90% interval on their own
paired spread, and each scored policy its decision with the bounds that decision tests
(`analysis.decide.decision`, computed once by `analysis.study`); time saved is averaged only over pairs
whose wall times compare (`analysis.group.timing`).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ..decide import decision
from ..decide.advice import DELTAS
from ..group import paired, timing
from ..group.groups import row_name
from ..group.reach import Reach
from ..group.rownumbers import Compared
from ..study import Study


def summary_rows(found: Study) -> list[dict[str, Any]]:
    """One row per row of the report (model, dataset and every setting the runs differ in; the
    policy column names the differences), numeric, for summary.csv and the console: means and
    stds, descriptive 90% intervals (with n and the seeds), each scored policy's decision with
    its p-values, the bounds it tests and its seeds advice, and time-to-accuracy."""
    decided = found.decision_of
    rows = []
    for context, by_policy in found.groups.items():
        target, q = found.targets[context], found.quanta[context]
        shares = [s for seeds in by_policy.values() for r in seeds.values() if (s := timing.cpu_share(r)) is not None]
        for policy in by_policy:
            numbers, vs = found.numbers[context, policy], found.compared[context, policy]
            row: dict[str, Any] = {
                "model": context.model,
                "dataset": context.label,
                "variant": context.variant,
                "policy": row_name(context, policy),
                "seeds": len(by_policy[policy]),
                "seed_list": " ".join(map(str, sorted(by_policy[policy]))),
            }
            for name, stat in numbers.columns().items():
                row[f"{name}_mean"] = _number(stat.mean) if stat.values else ""
                row[f"{name}_std"] = _number(stat.std) if stat.values else ""
            row["saved_pairs"] = len(numbers.saved_pct.values)
            # the context's least CPU time per clock second and thread: under timing.LOADED, trust CPU time
            row["cpu_share_low"] = _number(min(shares)) if shares else ""
            row.update(_comparison_columns(vs, q))
            row.update(_decision_columns(decided.get((context, policy)), bool(found.post_hoc)))
            row.update(_reach_columns(found.reach[context, policy], target))
            rows.append(row)
    return rows


def _number(x: float | None) -> Any:
    # unrounded: the console table rounding a 4-decimal copy printed -0.70 where the verdict,
    # from the same interval, printed -0.71 (-0.70503 rounded twice); summary.csv rounds once
    return "" if x is None or not math.isfinite(x) else x


def csv_cells(row: dict[str, Any]) -> list[Any]:
    """A summary row as summary.csv writes it: numbers to 4 decimals."""
    return [round(v, 4) if isinstance(v, float) else v for v in row.values()]


def _comparison_columns(vs: Compared, q: float) -> dict[str, Any]:
    pairs = {"d_final": vs.regular, "d_control": vs.control, "d_frontier": vs.frontier, "d_shorter": vs.shorter}
    out: dict[str, Any] = {}
    for name, p in pairs.items():  # no such comparison, or a line that does not reach: empty columns
        out.update(_interval_columns(name, p if isinstance(p, paired.Paired) else paired.Paired("", {}), q))
    return out


def _interval_columns(name: str, p: paired.Paired, q: float) -> dict[str, Any]:
    e = decision.estimate(p, q)
    low, high = e.bounds() if e else (None, None)
    return {
        f"{name}_ci90_low": _number(low),
        f"{name}_ci90_high": _number(high),
        f"{name}_n": e.n if e else "",
        f"{name}_seeds": " ".join(map(str, p.seeds)) if e else "",
    }


DECISION_COLUMNS = (
    "decision",
    "post_hoc",
    "look",
    "cheap_alternative",
    "p_not_worse",
    "p_worse",
    "p_better",
    "p_short",
    "claim",
    "p_claim",
    "p_adjusted",
    "level",
    "family_size",
    "looks_planned",
    "bound_regular_low",
    "bound_regular_high",
    "bound_cheap_low",
    "bound_cheap_high",
    "decision_pooled_variance",
    *(f"decision_min_gain_{g:g}" for g in DELTAS),
    "seeds_for_80pct",
    "seeds_for_80pct_low",
    "seeds_for_80pct_high",
    "failed_runs",
    "worth_withheld",
)


def _decision_columns(d: decision.Decision | None, post_hoc: bool) -> dict[str, Any]:
    if d is None:
        return dict.fromkeys(DECISION_COLUMNS, "")
    reg = d.bounds(d.vs_regular) if d.vs_regular else (None, None)
    alt = d.bounds(d.vs_cheap) if d.vs_cheap else (None, None)
    advice = d.advice
    return {
        "decision": d.word,
        "post_hoc": "yes" if post_hoc else "no",
        "look": d.look or "",
        "cheap_alternative": d.cheap.against if d.cheap else "",
        **{f"p_{k}": _number(d.p.get(k)) for k in ("not_worse", "worse", "better", "short")},
        "claim": d.route,
        "p_claim": _number(d.p_claim) if d.route else "",
        "p_adjusted": _number(d.p_adjusted) if d.route else "",
        "level": _number(d.level),
        "family_size": d.family,
        "looks_planned": d.looks,
        "bound_regular_low": _number(reg[0]),
        "bound_regular_high": _number(reg[1]),
        "bound_cheap_low": _number(alt[0]),
        "bound_cheap_high": _number(alt[1]),
        "decision_pooled_variance": d.pooled_word,
        **{f"decision_min_gain_{g:g}": w for g, w in d.sensitivity},
        "seeds_for_80pct": (advice.seeds or "") if advice else "",
        "seeds_for_80pct_low": (advice.low or "") if advice else "",
        "seeds_for_80pct_high": (advice.high or "") if advice else "",
        # the runs the failure rule set aside from this decision's comparisons: "arm:seed" each
        "failed_runs": " ".join(f"{f.arm}:{f.seed}" for f in d.failures),
        "worth_withheld": d.withheld,
    }


def _reach_columns(reach: Reach, target: float | None) -> dict[str, Any]:
    reached = list(reach.reached().values())
    mean = lambda xs: _number(statistics.fmean(xs)) if xs else ""
    return {
        "tta_target": _number(target),
        "tta_reached": len(reached),
        "tta_censored": len(reach.by_seed) - len(reached),
        "tta_epoch_mean": mean([r.epoch for r in reached]),
        "tta_sample_epochs_mean": mean([r.sample_epochs for r in reached]),
    }

"""`compare --until-decided --looks 3,5,8`: seeds added in planned looks until every policy is
decided.

At look k the first `looks[k]` seeds (0, 1, ...) of the arms still needed are trained (finished
runs are reused), and every policy is decided over those seeds at the level ALPHA / (number of
looks): Bonferroni over looks, so the chance of any wrong decision over the whole procedure
stays at ALPHA. A decision, once reached, stands; the next look trains only regular, the
policies still undecided and the arms of their cheap alternatives, plus the shorter-schedule
arms that bracket an undecided policy's budget where the line did not reach it. Everything is
recomputed from the run folders, so a stopped procedure started again replays the same looks
and continues where it stopped. `looks.json` and `looks.md` in `--out` record each look.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import console
from ..arms import REGULAR, frontier_arm, frontier_fraction, shorter_arm, shorter_budget
from ..analysis.decision import CANT_TELL, Decision, Judging, bracketing_shares, decide
from ..analysis.groups import group
from ..analysis.runs import load_runs
from ..analysis.stats import ALPHA
from ..engine.config import Config
from ..engine.files import atomic_write_text
from ..drivers.compare import CompareConfig
from ..drivers import matrix

RULE = "Bonferroni over looks"


@dataclass
class Reached:
    """A policy's decision and the look that reached it (its 1-based number, seeds, level)."""

    word: str
    look: int
    seeds: int
    level: float
    p_holm: float


@dataclass
class Look:
    seeds: int
    level: float
    arms: list[str]  # the arms this look asked for
    decided: dict[str, Reached] = field(default_factory=dict)  # reached at this look
    open: list[str] = field(default_factory=list)  # still can't tell after it


def levels(looks: list[int], alpha: float = ALPHA) -> list[float]:
    """The level spent at each look: alpha split evenly (Bonferroni over looks)."""
    return [alpha / len(looks)] * len(looks)


def record(
    decisions: list[Decision], reached: dict[str, Reached], k: int, seeds: int, level: float
) -> tuple[dict[str, Reached], list[str]]:
    """The decisions first reached at look k (1-based), and the policies still open after it.
    A decision reached earlier stands whatever later seeds say."""
    new, still = {}, []
    for d in decisions:
        key = _key(d)
        if key in reached:
            continue
        if d.word != CANT_TELL:
            new[key] = Reached(d.word, k, seeds, level, d.p_holm)
        else:
            still.append(key)
    return new, still


def _key(d: Decision) -> str:
    return f"{d.policy} ({d.context.model} on {d.context.label})"


def until_decided(
    cfg: Config, c: CompareConfig, show_progress: bool = True, command: str | None = None
) -> tuple[list[Path], list[Look]]:
    """Run the planned looks; returns the run folders and what each look decided."""
    reached: dict[str, Reached] = {}
    done: list[Look] = []
    arms = replace(c)
    for k, (n, level) in enumerate(zip(c.looks, levels(c.looks)), start=1):
        sub = replace(arms, seeds=list(range(n)))
        console.info(f"look {k} of {len(c.looks)}: seeds 0–{n - 1}, level {level:.4g} ({RULE})")
        matrix.run_matrix(cfg, sub, show_progress=show_progress, command=command)
        runs = [r for r in load_runs([Path(c.out)])[0] if r.seed < n] if Path(c.out).is_dir() else []
        if not runs:  # nothing finished (every run failed, or a dry check): nothing to decide
            break
        groups = group(runs)
        decisions = decide(groups, Judging(alpha=level))
        new, still = record(decisions, reached, k, n, level)
        reached.update(new)
        done.append(Look(n, level, _arm_names(sub), new, still))
        _write(Path(c.out), c.looks, done, reached)
        if not still:
            break
        arms = _next_arms(c, groups, [d for d in decisions if _key(d) in still])
    return [Path(c.out)], done


def _arm_names(c: CompareConfig) -> list[str]:
    return list(c.policies) + [frontier_arm(f) for f in c.frontier] + [shorter_arm(b) for b in c.shorter]


def _next_arms(c: CompareConfig, groups: dict, open_: list[Decision]) -> CompareConfig:
    """Regular, the undecided policies, their C(p) arms, and shorter arms where the line misses."""
    policies, frontier, shorter = [REGULAR], [], []
    for d in open_:
        names = [d.policy] + (list(d.cheap.arms) if d.cheap else [])
        for name in names:
            if (f := frontier_fraction(name)) is not None:
                frontier.append(f)
            elif (b := shorter_budget(name)) is not None:
                shorter.append(b)
            elif name in c.policies:  # a row of other settings (an ablation folder) is not ours to train
                policies.append(name)
        shorter += bracketing_shares(groups[d.context], d.policy)
    unique = lambda xs: sorted(set(xs), key=xs.index)  # noqa: E731
    return replace(c, policies=unique(policies), frontier=unique(frontier), shorter=unique(shorter))


def _write(out: Path, looks: list[int], done: list[Look], reached: dict[str, Reached]) -> None:
    data: dict[str, Any] = {
        "rule": RULE,
        "alpha": ALPHA,
        "looks": looks,
        "done": [asdict(look) for look in done],
        "decisions": {k: asdict(v) for k, v in reached.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "looks.json", json.dumps(data, indent=2) + "\n")
    atomic_write_text(out / "looks.md", looks_markdown(data))


def looks_markdown(data: dict[str, Any]) -> str:
    """The procedure as a reader needs it: the plan, then each look and what it decided."""
    plan = ", ".join(map(str, data["looks"]))
    lines = [
        f"Planned looks after {plan} seeds; {data['alpha']:.0%} family-wise error over the whole "
        f"procedure, spent by {data['rule']} ({data['alpha'] / len(data['looks']):.4g} at each look, "
        "Holm over the policies within a look). A decision reached at a look stands.",
        "",
        "| look | seeds | level | arms (trained or reused) | decided at this look | still can't tell |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, look in enumerate(data["done"], start=1):
        decided = "; ".join(f"{p}: {r['word']} (Holm p {r['p_holm']:.3g})" for p, r in look["decided"].items())
        lines.append(
            f"| {k} | 0–{look['seeds'] - 1} | {look['level']:.4g} | {', '.join(look['arms'])} | "
            f"{decided or '—'} | {', '.join(look['open']) or '—'} |"
        )
    return "\n".join(lines) + "\n"

"""Does the advice of an undecided policy mean what it says? (issue 48; docs/decisions.md)

For each case, simulated procedures of planned looks (tests/simulation.py's model, four such
policies, k = 4, the late allocation): at a look every policy undecided so far gets its advice;
then the same procedure goes on and we count what happened. The advice is checked at look 1 of
looks 3, 5, 8 (from 3 seeds), and at looks 1 and 2 of 5, 8, 12 (from 5 and from 8 seeds), since
how far a chance stated from few seeds is off depends on how few. Two statements are checked:

- "the chance of a decision at the next look is about X%": X as the report gives it now (the
  predictive chance, over what the first seeds leave uncertain) and as it was at 7b85df8 (the
  power at the observed difference and spread), against the share decided at the next look.
- "≈N seeds would decide it with 80% probability, if the observed differences were the truth": the
  share of those policies decided when judged over N seeds at the same level (N up to MAX_N).

    python experiments/decisions/calibration.py            # results/decisions/calibration.md
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from simulate import write_page  # noqa: E402

import simulation as sim  # noqa: E402
from fineprune_cli.analysis.decide import advice  # noqa: E402
from fineprune_cli.analysis.decide.decision import CANT_TELL, decide  # noqa: E402
from fineprune_cli.analysis.decide.judging import Judging, shares  # noqa: E402
from fineprune_cli.engine.records.files import to_markdown  # noqa: E402

PLANS = (((3, 5, 8), 0), ((5, 8, 12), 0), ((5, 8, 12), 1))  # (looks, the look whose advice is checked)
MAX_N = 20  # ≈N seeds checked up to here (a procedure draws this many seeds of every arm)
CASES = {
    "CIFAR-like: 1 pt below regular, level with C(p), σ 0.5": sim.Design(((-1.0, 0.0),) * 4, sigma=0.5),
    "level with C(p), σ 0.3": sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.3),
    "worth it: +1 pt over C(p), σ 0.3": sim.Design((sim.CLEARLY_WORTH,) * 4, sigma=0.3),
    "level with C(p), σ 0.5": sim.Design((sim.LEVEL_WITH_C,) * 4, sigma=0.5),
    "0.5 pt below regular, +0.5 over C(p), σ 0.2": sim.Design(((-0.5, 0.5),) * 4, sigma=0.2),
    "1 pt below regular, level with C(p), σ 0.3": sim.Design(((-1.0, 0.0),) * 4, sigma=0.3),
}


def _plugin_chance(d, judging, seeds, level) -> float:
    """The next-look chance as 7b85df8 gave it: the power at the observed difference and spread."""
    return max(advice.chance(t, seeds) for t in advice.routes(d, judging, level).values())


def one(
    rng, design: sim.Design, judging: Judging, looks: tuple[int, ...], at: int
) -> list[tuple[float, float, bool, int | None, bool | None]]:
    """One procedure: for each policy undecided through look `at` (0-based), (stated now, stated
    before, decided at the next look, ≈N, decided over N seeds at that look's level)."""
    by = sim.draw(rng, design, MAX_N)
    part = shares(judging, looks)
    decided: set[str] = set()
    for j in range(at):
        found = decide(sim.decidable_at(by, looks[j]), judging, part[j], family=4, looks=len(looks))
        decided |= {d.policy for d in found if d.word != CANT_TELL}
    here = decide(sim.decidable_at(by, looks[at]), judging, part[at], family=4, looks=len(looks))
    after = decide(sim.decidable_at(by, looks[at + 1]), judging, part[at + 1], family=4)
    second = {d.policy: d.word for d in after}
    out = []
    for d in here:
        if d.word != CANT_TELL or d.policy in decided:
            continue
        level = judging.correction.level(judging.alpha, 4, part[at + 1])
        a = advice.advise(d, judging, looks[at + 1], level)
        if a is None:
            continue
        at_n = None
        if a.seeds is not None and looks[at] < a.seeds <= MAX_N:
            found = decide(sim.decidable_at(by, a.seeds), judging, part[at + 1], family=4)
            at_n = next(x.word for x in found if x.policy == d.policy) != CANT_TELL
        chance = _plugin_chance(d, judging, looks[at + 1], level)
        out.append((a.next_chance, chance, second[d.policy] != CANT_TELL, a.seeds, at_n))
    return out


def case_rows(name: str, design: sim.Design, reps: int, looks: tuple[int, ...], at: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    judging = Judging()
    rows = [r for _ in range(reps) for r in one(rng, design, judging, looks, at)]
    name = f"{name}; looks {','.join(map(str, looks))}, from {looks[at]} seeds"
    if not rows:
        return [[name, "0", "—", "—", "—", "—", "—"]]
    now, before, hit = (np.array([r[i] for r in rows], dtype=float) for i in range(3))
    high = now >= 0.9
    advised = [r for r in rows if r[4] is not None]
    met = np.mean([r[4] for r in advised]) if advised else float("nan")
    beyond = sum(r[3] is None or r[3] > MAX_N for r in rows)
    se = math.sqrt(max(hit.mean() * (1 - hit.mean()), 1e-12) / len(rows))
    return [[
        name,
        str(len(rows)),
        f"{100 * now.mean():.0f}",
        f"{100 * before.mean():.0f}",
        f"{100 * hit.mean():.0f} ± {100 * se:.0f}",
        f"{100 * hit[high].mean():.0f} of {int(high.sum())}" if high.any() else "—",
        f"{100 * met:.0f} of {len(advised)} ({beyond} beyond {MAX_N} or none)" if advised else "—",
    ]]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400, help="procedures per case (default 400)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "decisions" / "calibration.md")
    args = parser.parse_args()
    start = time.time()
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT).stdout
    header = [
        "case (four such policies)",
        "undecided so far",
        "next-look chance stated now (mean %)",
        "as 7b85df8 stated it (mean %)",
        "decided at the next look (%)",
        "decided where now ≥ 90%",
        "≈N seeds: decided over N (%)",
    ]
    body = []
    for looks, at in PLANS:
        for name, design in CASES.items():
            body += case_rows(name, design, args.reps, looks, at)
            print(f"  {name}, looks {looks} at {at}", file=sys.stderr, flush=True)
    parts = [
        "# The advice of an undecided policy, measured",
        "",
        f"Made by `python experiments/decisions/calibration.py` at commit {commit.strip() or 'unknown'}: "
        f"{args.reps} procedures a case, alpha 5% over k = 4, the late allocation, today's rule (the "
        "skew-robust t, the failure rule); every policy undecided through the look its advice is read at is "
        "one row's case. The model: tests/simulation.py.",
        "",
        *to_markdown(header, body).splitlines(),
        "",
    ]
    write_page(args.out, parts, start)


if __name__ == "__main__":
    main()

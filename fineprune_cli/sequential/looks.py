"""`compare --until-decided --looks 3,5,8`: seeds added in planned looks until every policy is
decided.

The plan (the judging settings and the looks) is recorded in `--out` before the first run. At look
j the first `looks[j]` seeds (0, 1, ...) of the arms still needed are trained (finished runs are
reused), and every policy not yet decided is decided over those seeds, each policy's claims at the
level the plan's family correction (`Judging.correction`) gives k policies over L looks, so the
chance of any wrong decision over the whole procedure stays at alpha. A decision, once reached,
stands; the next look trains only regular, the policies still undecided and the arms of their
cheap alternatives, plus the shorter-schedule arms that bracket an undecided policy's budget where
the line did not reach it. The looks are replayed from the run folders
(`analysis.decide.sequence.replay`, the same computation `report` makes), so a stopped procedure started
again continues where it stopped. `looks.json` in `--out` records each look for scripts.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

from .. import console
from ..analysis.decide.decision import CANT_TELL, Decision, bracketing_shares
from ..analysis.decide.judging import Judging
from ..analysis.decide.sequence import Look, decidable, key, record, replay
from ..analysis.group.groups import duplicates, group
from ..analysis.read import leftout
from ..analysis.read.runs import Run, arm_of, load_runs
from ..analysis.render.report import repeats
from ..analysis.study import Study, study, with_left_out
from ..arms import REGULAR, frontier_fraction, shorter_arm, shorter_budget
from ..drivers import matrix
from ..drivers.compare import CompareConfig, Job, shorter_runs
from ..drivers.compare import plan as jobs_of
from ..engine.records.files import atomic_write_text
from ..engine.setup.config import Config
from ..errors import ConfigError


def until_decided(
    cfg: Config, c: CompareConfig, judging: Judging, show_progress: bool = True, command: str | None = None
) -> Study:
    """Run the planned looks; returns the study of the runs the looks used."""
    first = matrix.refusals(cfg, replace(c, seeds=list(range(c.looks[0]))))  # before the plan is written
    plan = matrix.record_plan(c, judging, first, c.looks)
    arms = replace(c)
    runs: list = []
    problems: list = []  # the runs read but left out, named in the decisions (`analysis.study.with_left_out`)
    for number, seeds in enumerate(c.looks, start=1):
        sub = replace(arms, seeds=list(range(seeds)))
        console.info(f"look {number} of {len(c.looks)}: seeds 0–{seeds - 1}")
        later = _later(cfg, c, sub, number)
        matrix.run_matrix(cfg, sub, show_progress=show_progress, command=command, later=later)
        runs, problems = load_runs([Path(c.out)]) if Path(c.out).is_dir() else ([], [])
        runs = [r for r in one_per_seed(runs) if r.seed < seeds]
        problems = [p for p in problems if p.seed is None or p.seed < seeds]
        if not runs:  # nothing finished (every run failed, or a dry check): nothing to decide
            break
        decisions, looks, still, grouped = _at_look(c, judging, runs, number)
        still = _not_diverged(still, problems)
        _write(Path(c.out), c.looks, looks, decisions, judging)
        _say(looks[-1], decisions, still, number < len(c.looks))
        if not still or len(looks) < number or number == len(c.looks):
            break
        arms = _next_arms(cfg, c, decidable(grouped), still)  # says here which arms it leaves out
    return with_left_out(study(runs, judging, [plan]), problems)


def _later(cfg: Config, c: CompareConfig, now: CompareConfig, number: int) -> tuple[list[Job], str]:
    """The runs the looks after `number` would train should they decide nothing: every arm of
    this look, on the seeds they add (a look that adds shorter arms adds more; one that decides a
    policy, fewer)."""
    if number == len(c.looks):
        return [], ""
    have = set(jobs_of(cfg, now))
    jobs = [j for j in jobs_of(cfg, replace(now, seeds=list(range(c.looks[-1])))) if j not in have]
    names = f"look {number + 1}" if number + 1 == len(c.looks) else f"looks {number + 1}–{len(c.looks)}"
    return jobs, names


def next_runs(cfg: Config, c: CompareConfig, judging: Judging, runs: list[Run]) -> list[Job]:
    """The runs the planned looks would train next, given the complete `runs` made so far (on
    any machine): the missing runs of the first look not yet whole, with the arms that look asks
    for (every arm at look 1; later, what the policies still undecided need), in the matrix's
    order; [] when every policy is decided or every look is trained. The same steps as
    `until_decided`, for a procedure whose looks are trained a few runs at a time."""
    runs = one_per_seed(runs)  # the runs of many calls, on many machines
    have = {(r.summary.model, r.policy, r.seed) for r in runs}
    arms = replace(c)
    for number, seeds in enumerate(c.looks, start=1):
        jobs = jobs_of(cfg, replace(arms, seeds=list(range(seeds))))
        missing = [j for j in jobs if (j.model, j.arm, j.seed) not in have]
        if missing:
            return missing
        _, _, still, grouped = _at_look(c, judging, [r for r in runs if r.seed < seeds], number)
        if not still:
            return []
        arms = _next_arms(cfg, c, decidable(grouped), still)
    return []


def one_per_seed(runs: list[Run]) -> list[Run]:
    """The runs with a second record of one run (its settings and seed) left out when its results
    are the same, and refused in one line when they differ, as `report` does (issue 57: the looks
    kept whichever record was read first, deciding by a folder's name)."""
    repeated = duplicates(runs)
    for dup, kept in repeated:
        repeats(dup, kept)  # raises where the results differ
    return [r for r in runs if all(r is not dup for dup, _ in repeated)]


def _at_look(c: CompareConfig, judging: Judging, runs: list[Run], number: int):
    """Look `number` replayed over `runs` (its seeds' complete runs): the decisions, the looks
    so far, the policies still undecided and the grouped runs."""
    grouped = group(runs)
    decisions, looks = replay(grouped, judging, tuple(c.looks), upto=number)
    return decisions, looks, [d for d in decisions if d.word == CANT_TELL], grouped


def _not_diverged(still: list[Decision], problems: list) -> list[Decision]:
    """The undecided policies more seeds could decide: one with a diverged run never will
    (`analysis.decide.leftout`), so the next look trains no more of it, saying so."""
    rows, keep = leftout.by_row(problems), []
    for d in still:
        arm = arm_of(d.policy)
        lost = leftout.diverged(rows.get((d.context.model, d.context.label, arm), []), arm)
        if lost:
            seeds = ", ".join(str(p.seed) for p in lost)
            console.info(
                f"{d.policy}: its runs of seeds {seeds} diverged; more seeds cannot decide it, so no more train"
            )
        else:
            keep.append(d)
    return keep


def _say(look: Look, decisions: list[Decision], still: list[Decision], more: bool) -> None:
    """Between looks, what the last one decided and why more seeds train."""
    words = {key(d): d.word for d in decisions}
    decided = "; ".join(f"{name}: {words[name]}" for name in look.decided) or "nothing"
    console.info(f"look {look.number} (a = {look.level:.4g} per policy) decided {decided}")
    if still and more:
        console.info(f"still can't tell {', '.join(key(d) for d in still)}: the next look adds seeds for them")


def _next_arms(cfg: Config, c: CompareConfig, groups: dict, open_: list[Decision]) -> CompareConfig:
    """Regular, the undecided policies, their C(p) arms, and shorter arms where the line misses
    (one that this recipe cannot shorten is left out with its reason: it could never be trained;
    one whose schedule an arm planned or trained already has is that arm: `_trainable`)."""
    policies, frontier, shorter = [REGULAR], [], []
    # the shorter arms earlier looks trained: a share wanted now that rounds to one of their
    # schedules is that arm, trained again on the new seeds, not a second arm of the same runs
    trained = [b for by in groups.values() for name in by if (b := shorter_budget(name)) is not None]
    for d in open_:
        names = [d.policy] + (list(d.cheap.arms) if d.cheap else [])
        for name in names:
            if (f := frontier_fraction(name)) is not None:
                frontier.append(f)
            elif (b := shorter_budget(name)) is not None:
                shorter.append(b)
            elif name in c.policies:  # a row of other settings (an ablation folder) is not ours to train
                policies.append(name)
        shorter += _trainable(cfg, c.shorter + trained + shorter, bracketing_shares(groups[d.context], d.policy))
    unique = lambda xs: sorted(set(xs), key=xs.index)  # noqa: E731
    return replace(c, policies=unique(policies), frontier=unique(frontier), shorter=unique(shorter))


def _trainable(cfg: Config, planned: list[float], wanted: list[float]) -> list[float]:
    """The shorter arms that give the `wanted` shares, one per distinct schedule (issue 57: 90% and
    95% fewer of 6 epochs both train 1, and were trained as two arms of identical runs): a share
    whose schedule a `planned` (or trained) arm has is that arm, said once; one this recipe
    cannot shorten is left out with its reason."""
    schedules: dict = {}
    for share in planned:
        with contextlib.suppress(ConfigError):
            schedules.setdefault(shorter_runs(cfg, share), share)
    keep = []
    for share in wanted:
        try:
            schedule = shorter_runs(cfg, share)
        except ConfigError as exc:
            console.info(f"{shorter_arm(share)} is left out of the next look: {exc}")
            continue
        same = schedules.setdefault(schedule, share)
        if same != share:
            epochs, milestones = schedule
            console.info(
                f"{shorter_arm(share)} trains the same schedule as {shorter_arm(same)} ({epochs} epoch{'s' * (epochs != 1)}"
                + (f", milestones {','.join(map(str, milestones))}" if milestones else "")
                + f"): one arm, {shorter_arm(same)}, trained once per seed for both"
            )
        keep.append(same)
    return keep


def _write(out: Path, planned: list[int], looks: list[Look], decisions: list[Decision], judging: Judging) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = record(tuple(planned), looks, decisions, judging)
    atomic_write_text(out / "looks.json", json.dumps(data, indent=2) + "\n")

"""Planned looks (`compare --until-decided`): the error spent over looks, the bookkeeping that
keeps a decision once reached, the arms the next look trains, and a tiny real procedure that
replays the same looks when started again."""

import json
from pathlib import Path

import numpy as np
import pytest

from fineprune_cli.analysis import paired
from fineprune_cli.analysis.decision import (
    CANT_TELL,
    NOT_WORTH,
    WORTH,
    Decision,
    Judging,
    bracketing_shares,
    claims,
    settle,
)
from fineprune_cli.analysis.groups import Context
from fineprune_cli.analysis.stats import pooled_estimate
from fineprune_cli.drivers.compare import load_compare
from fineprune_cli.errors import ConfigError
from fineprune_cli.sequential.looks import levels, record, until_decided
from factories import WORTH_EDGE, context, pruned, residual_sd, shorter, tiny_compare, wrong

LOOKS = [5, 8, 12]
REPS = 1500
BOUND = 0.05 + 3 * (0.05 * 0.95 / REPS) ** 0.5


def sequential(rng, truths, alphas, sigma=0.05):
    """One procedure: all seeds drawn up front, each look decides over the first n seeds at its
    level (Holm over the policies), a decision reached stays. Returns the final words."""
    seeds = LOOKS[-1]
    means = [0.0]
    for d_reg, d_c in truths:
        means += [d_reg - d_c, d_reg]
    y_all = np.array(means)[:, None] + rng.normal(0, 0.2, seeds)[None, :] + rng.normal(0, sigma, (len(means), seeds))
    words = [CANT_TELL] * len(truths)
    for n, alpha in zip(LOOKS, alphas):
        y = y_all[:, :n]
        sd, df = residual_sd(y)
        found = []
        for i in range(len(truths)):
            alt_row, row = y[1 + 2 * i], y[2 + 2 * i]
            reg = pooled_estimate(list(row - y[0]), [2.0] * n, sd, df)
            alt = pooled_estimate(list(row - alt_row), [2.0] * n, sd, df)
            found.append(claims(reg, alt, Judging())[1:])
        now, _ = settle(found, alpha)
        words = [w if w != CANT_TELL else x for w, x in zip(words, now)]
        if CANT_TELL not in words:
            break
    return words


def rate(truths, alphas, seed=0):
    rng = np.random.default_rng(seed)
    bad = sum(any(wrong(w, t) for w, t in zip(sequential(rng, truths, alphas), truths)) for _ in range(REPS))
    return bad / REPS


def test_bonferroni_over_looks_holds_the_promised_error_over_the_whole_procedure():
    assert levels(LOOKS) == pytest.approx([0.05 / 3] * 3)
    assert rate([WORTH_EDGE] * 4, levels(LOOKS)) <= BOUND


def test_re_testing_at_the_full_level_at_every_look_breaks_it():
    """The procedure a user runs by hand (look, add seeds, look again at 5%): wrong decisions pile up."""
    assert rate([WORTH_EDGE] * 4, [0.05] * len(LOOKS)) > BOUND + 0.02


def _decision(policy, word, p_holm=0.01):
    return Decision(
        Context("lenet", "toy"),
        policy,
        30.0,
        paired.Paired("regular", {}),
        None,
        None,
        None,
        "",
        {},
        "worth" if word == WORTH else "",
        0.01,
        p_holm,
        word,
    )


def test_a_decision_once_reached_stands_and_only_new_ones_are_recorded():
    reached, _ = record([_decision("ucb", WORTH), _decision("egreedy", CANT_TELL)], {}, 1, 5, 0.0167)
    assert list(reached) == ["ucb (lenet on toy)"] and reached["ucb (lenet on toy)"].look == 1
    later, still = record([_decision("ucb", NOT_WORTH), _decision("egreedy", NOT_WORTH)], reached, 2, 8, 0.0167)
    assert list(later) == ["egreedy (lenet on toy)"] and later["egreedy (lenet on toy)"].seeds == 8 and still == []


def test_the_arms_that_bracket_an_undecided_policys_budget():
    """Fine-pruning at 11%: with shorter-10 only, 15% is what is missing; with none, 10% and 15%."""
    name, kw = shorter(0.1)
    with_line = context({"regular": (0.0, {}), name: (0.0, kw), "fine": (0.0, pruned("fine", 0.11))})
    assert bracketing_shares(with_line, "fine") == [0.15]
    without = context({"regular": (0.0, {}), "fine": (0.0, pruned("fine", 0.11))})
    assert bracketing_shares(without, "fine") == [0.1, 0.15]
    at = context({"regular": (0.0, {}), shorter(0.3)[0]: (0.0, shorter(0.3)[1]), "ucb": (0.0, pruned("ucb", 0.3))})
    assert bracketing_shares(at, "ucb") == []


def test_looks_go_with_until_decided_and_increase():
    for flags, words in (
        ({"compare.looks": [3, 5]}, "--until-decided and --looks go together"),
        ({"compare.until_decided": True}, "--until-decided and --looks go together"),
        ({"compare.until_decided": True, "compare.looks": [5, 3]}, "increasing list"),
        (
            {
                "compare.until_decided": True,
                "compare.looks": [3, 5],
                "compare.executor": "slurm",
                "compare.detach": True,
            },
            "cannot --detach",
        ),
    ):
        with pytest.raises(ConfigError, match=words):
            load_compare(None, flags)


@pytest.mark.slow
def test_a_tiny_procedure_trains_look_by_look_and_replays_when_started_again(tmp_path):
    cfg, c = tiny_compare(tmp_path, policies=["regular", "ucb"], shorter=[0.5], until_decided=True, looks=[2, 3])
    cfg.train.epochs = 2
    _, done = until_decided(cfg, c, show_progress=False)
    out = Path(c.out)
    first = json.loads((out / "looks.json").read_text())
    assert first["rule"] == "Bonferroni over looks" and first["looks"] == [2, 3]
    assert done[0].seeds == 2 and done[0].arms == ["regular", "ucb", "shorter-50"]
    folders = sorted(p.name for p in (out / "lenet-synthetic").iterdir())
    assert {"regular-seed0", "regular-seed1", "ucb-seed0", "ucb-seed1", "shorter-50-seed0"} <= set(folders)
    if len(done) == 2:  # ucb was open after look 1: look 2 trains what it needs only, and the
        # shorter arm at its 30% budget that the line (50% only) lacked, from seed 0 on
        assert set(done[1].arms) == {"regular", "ucb", "shorter-30"} and "ucb-seed2" in folders
        assert {"shorter-30-seed0", "shorter-30-seed2"} <= set(folders) and "shorter-50-seed2" not in folders
    else:
        assert not any(f.endswith("seed2") for f in folders)
    stamps = {p: p.stat().st_mtime_ns for p in (out / "lenet-synthetic").glob("*/metrics.csv")}
    until_decided(cfg, c, show_progress=False)  # started again: nothing trains, the same looks
    assert json.loads((out / "looks.json").read_text()) == first
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert "| 1 | 0–1 |" in (out / "looks.md").read_text()


def _recipe_runs():
    """In-memory runs of a 10-epoch recipe (shorter-30: 7 epochs, its warm-up scaled) whose configs
    let `group` pair them: regular at 90.0, 90.4, 89.8, 90.2 by seed; each other arm that far off
    regular per seed. ucb (30%) is clearly worse in seeds 0-1 but +5 in seed 2, so it is decided
    at look 1 (seeds 0-1) and would not be over seeds 0-2; egreedy (35%) is beyond the shorter line
    (no C(p)); kakurenbo (30%) stays undecided against shorter-30."""
    from factories import make

    base = [90.0, 90.4, 89.8, 90.2]

    def arm(policy, deltas, epochs=10, skipped=0, name=""):
        out = []
        for s, d in enumerate(deltas):
            run = make(policy, s, round(base[s] + d, 2), epochs=epochs, skipped=skipped, arm=name)
            run.config = {"train": {"epochs": epochs, "milestones": [], "warmup_epochs": epochs / 10}}
            out.append(run)
        return out

    return (
        arm("regular", [0.0] * 4)
        + arm("regular", [-1.5, -1.4, -1.6, -1.5], epochs=7, name="shorter-30")
        + arm("ucb", [-3.0, -3.1, 5.0, -2.9], skipped=300)
        + arm("egreedy", [-3.0, -1.0, -3.0, -3.0], skipped=350)
        + arm("kakurenbo", [-1.5, -1.0, -1.6, -1.4], skipped=300)
    )


def _procedure(tmp_path, monkeypatch, policies, looks):
    """until_decided over the in-memory runs: what each look asked `compare` to train, and the looks."""
    from fineprune_cli.sequential import looks as procedure

    runs = [r for r in _recipe_runs() if r.policy in policies + ["shorter-30"]]
    asked = []
    monkeypatch.setattr(procedure.matrix, "run_matrix", lambda cfg, sub, **kw: asked.append(sub))
    monkeypatch.setattr(procedure, "load_runs", lambda dirs: (runs, []))
    cfg, c = tiny_compare(tmp_path, policies=policies, shorter=[0.3], until_decided=True, looks=looks)
    Path(c.out).mkdir(parents=True)
    _, done = until_decided(cfg, c, show_progress=False)
    return asked, done, Path(c.out)


def test_each_look_trains_seeds_0_to_n_minus_1_and_then_only_what_is_still_open(tmp_path, monkeypatch):
    """Looks after 2, 3 and 4 seeds, each at 5%/3. Look 1 (seeds 0, 1) decides ucb; look 2 trains
    regular, the two open policies, kakurenbo's C(p) arm (shorter-30) and the shorter arm egreedy's
    35% lacks (shorter-35); kakurenbo is still open at look 3."""
    asked, done, out = _procedure(tmp_path, monkeypatch, ["regular", "ucb", "egreedy", "kakurenbo"], [2, 3, 4])
    assert levels([2, 3, 4]) == pytest.approx([0.05 / 3] * 3)
    assert [sub.seeds for sub in asked] == [[0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert [d.seeds for d in done] == [2, 3, 4] and [d.level for d in done] == pytest.approx([0.05 / 3] * 3)
    assert done[0].arms == ["regular", "ucb", "egreedy", "kakurenbo", "shorter-30"]
    assert list(done[0].decided) == ["ucb (lenet on toy)"]
    reached = done[0].decided["ucb (lenet on toy)"]
    assert (reached.word, reached.look, reached.seeds) == (NOT_WORTH, 1, 2)
    assert done[0].open == ["egreedy (lenet on toy)", "kakurenbo (lenet on toy)"]
    assert asked[1].policies == ["regular", "egreedy", "kakurenbo"] and asked[1].shorter == [0.35, 0.3]
    assert "kakurenbo (lenet on toy)" in done[2].open and "ucb (lenet on toy)" not in done[1].open + done[2].open
    assert (out / "looks.json").read_text().startswith('{\n  "rule": "Bonferroni over looks",\n')
    saved = json.loads((out / "looks.json").read_text())
    assert saved["decisions"]["ucb (lenet on toy)"]["look"] == 1 and len(saved["done"]) == 3
    table = (out / "looks.md").read_text()
    assert (
        "| 1 | 0–1 | 0.01667 | regular, ucb, egreedy, kakurenbo, shorter-30 | ucb (lenet on toy): not worth it" in table
    )
    assert "| 3 | 0–3 |" in table and "(0.01667 at each look" in table


def test_the_looks_stop_once_nothing_is_open(tmp_path, monkeypatch):
    """ucb alone (no runs of the others) is decided at look 1 of 2: no second look is trained."""
    asked, done, _ = _procedure(tmp_path, monkeypatch, ["regular", "ucb"], [2, 3])
    assert len(asked) == len(done) == 1 and done[0].open == []

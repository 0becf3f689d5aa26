"""Planned looks (`compare --until-decided`): the plan recorded before the first run, the level each
look spends, a decision kept once reached, the arms the next look trains, and a tiny real
procedure that replays the same looks when started again (the error over the whole procedure is
simulated in test_decision_simulation)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from factories import context, pruned, shorter, tiny_compare
from fineprune_cli.analysis.decide.decision import NOT_WORTH, bracketing_shares
from fineprune_cli.analysis.decide.judging import Judging
from fineprune_cli.analysis.decide.sequence import replay
from fineprune_cli.analysis.group.groups import group
from fineprune_cli.drivers.compare import load_compare
from fineprune_cli.errors import ConfigError
from fineprune_cli.sequential.looks import until_decided


def test_the_arms_that_bracket_an_undecided_policys_budget():
    """Fine-pruning at 11%: with shorter-10 only, 15% is what is missing; with none, 10% and 15%."""
    name, kw = shorter(0.1)
    with_line = context({"regular": (0.0, {}), name: (0.0, kw), "fine": (0.0, pruned("fine", 0.11))})
    assert bracketing_shares(with_line, "fine") == [0.15]
    without = context({"regular": (0.0, {}), "fine": (0.0, pruned("fine", 0.11))})
    assert bracketing_shares(without, "fine") == [0.1, 0.15]
    at = context({"regular": (0.0, {}), shorter(0.3)[0]: (0.0, shorter(0.3)[1]), "ucb": (0.0, pruned("ucb", 0.3))})
    assert bracketing_shares(at, "ucb") == []


def test_until_decided_without_looks_plans_the_default_looks():
    """5, 8, 12: what the power table chose (docs/decisions.md). Catches: the old refusal, or a
    default that reaches a plain compare."""
    assert load_compare(None, {"compare.until_decided": True}).looks == [5, 8, 12]
    assert load_compare(None, {}).looks == []


def test_looks_go_with_until_decided_and_increase():
    for flags, words in (
        ({"compare.looks": [3, 5]}, "--looks plans the looks of --until-decided"),
        ({"compare.until_decided": True, "compare.looks": [5, 3]}, "increasing list"),
        (
            {
                "compare.until_decided": True,
                "compare.looks": [3, 5],
                "compare.executor": "slurm",
                "compare.slurm.detach": True,
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
    found = until_decided(cfg, c, Judging(allocation="equal"), show_progress=False)
    out = Path(c.out)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["looks"] == [2, 3] and plan["runs_before"] == 0 and plan["judging"]["family"] == "bonferroni"
    first = json.loads((out / "looks.json").read_text())
    assert first["rule"] == "Bonferroni" and first["looks"] == [2, 3]
    assert found.replayed[0].seeds == 2 and not found.post_hoc
    folders = sorted(p.name for p in (out / "lenet-synthetic").iterdir())
    assert {"regular-seed0", "regular-seed1", "ucb-seed0", "ucb-seed1", "shorter-50-seed0"} <= set(folders)
    if len(found.replayed) == 2:  # ucb was open after look 1: look 2 trains what it needs only; the
        # shorter arm at its 30% budget that the line lacks trains 1 of 2 epochs, as shorter-50
        # does, so it is left out (d26b633 trained that schedule twice under two names)
        assert "ucb-seed2" in folders and not any(f.startswith("shorter-30") for f in folders)
    else:
        assert not any(f.endswith("seed2") for f in folders)
    stamps = {p: p.stat().st_mtime_ns for p in (out / "lenet-synthetic").glob("*/metrics.csv")}
    until_decided(cfg, c, Judging(allocation="equal"), show_progress=False)  # started again: nothing trains
    assert json.loads((out / "looks.json").read_text()) == first
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    with pytest.raises(ConfigError, match="a different plan .* would be chosen after seeing them"):
        until_decided(cfg, c, Judging(margin=0.5), show_progress=False)


def _recipe_runs():
    """In-memory runs of a 10-epoch recipe (shorter-30: 7 epochs, its warm-up scaled) whose configs
    let `group` pair them: regular at 90.0, 90.4, 89.8, 90.2 by seed; each other arm that far off
    regular per seed. ucb (30%) is clearly worse in seeds 0-1 but +5 in seed 2, so it is decided
    at look 1 (seeds 0-1) and would not be over seeds 0-2; egreedy (35%) is beyond the shorter line
    (no C(p)); kakurenbo (30%) is 1.4 pt below regular, clear only over four seeds."""
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
        + arm("ucb", [-3.0, -3.02, 5.0, -2.9], skipped=300)
        + arm("egreedy", [-3.0, -1.0, -3.0, -3.0], skipped=350)
        + arm("kakurenbo", [-1.5, -1.0, -1.6, -1.4], skipped=300)
    )


def _procedure(tmp_path, monkeypatch, policies, looks):
    """until_decided over the in-memory runs: what each look asked `compare` to train, and the study."""
    from fineprune_cli.sequential import looks as procedure

    runs = [r for r in _recipe_runs() if r.policy in policies + ["shorter-30"]]
    asked = []
    monkeypatch.setattr(procedure.matrix, "run_matrix", lambda cfg, sub, **kw: asked.append(sub))
    monkeypatch.setattr(procedure, "load_runs", lambda dirs: (runs, []))
    monkeypatch.setattr(procedure.matrix, "load_runs", lambda dirs: ([], []))  # the plan: no runs before
    cfg, c = tiny_compare(tmp_path, policies=policies, shorter=[0.3], until_decided=True, looks=looks)
    cfg.train.epochs, cfg.train.milestones = 10, []  # the in-memory runs' recipe
    Path(c.out).mkdir(parents=True)
    # Student's t, whose 2-4 seed decisions these runs were made for (the procedure, not the shape, is tested)
    found = until_decided(cfg, c, Judging(allocation="equal", shape="normal"), show_progress=False)
    return asked, found, Path(c.out)


def test_each_look_trains_seeds_0_to_n_minus_1_and_then_only_what_is_still_open(tmp_path, monkeypatch, capsys):
    """Looks after 2, 3 and 4 seeds, three policies: each policy's claims at 5% / (3 x 3). Look 1
    (seeds 0, 1) decides ucb; look 2 trains regular, the two open policies and kakurenbo's C(p) arm
    (shorter-30); the shorter arm egreedy's 35% lacks would train 7 of 10 epochs, as shorter-30
    does, so it is left out; look 3 decides kakurenbo (worse than regular over seeds 0-3) and
    leaves egreedy open."""
    asked, found, out = _procedure(tmp_path, monkeypatch, ["regular", "ucb", "egreedy", "kakurenbo"], [2, 3, 4])
    done = found.replayed
    assert [sub.seeds for sub in asked] == [[0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert [d.seeds for d in done] == [2, 3, 4] and [d.level for d in done] == pytest.approx([0.05 / 9] * 3)
    assert asked[0].policies == ["regular", "ucb", "egreedy", "kakurenbo"] and asked[0].shorter == [0.3]
    assert done[0].decided == ("ucb (lenet on toy)",)
    ucb = next(d for d in found.decisions if d.policy == "ucb")
    assert (ucb.word, ucb.look, ucb.vs_regular.n) == (NOT_WORTH, 1, 2)  # seed 2's +5 never reaches it
    assert done[0].open == ("egreedy (lenet on toy)", "kakurenbo (lenet on toy)")
    assert asked[1].policies == ["regular", "egreedy", "kakurenbo"] and asked[1].shorter == [0.3]
    assert done[2].decided == ("kakurenbo (lenet on toy)",) and done[2].open == ("egreedy (lenet on toy)",)
    saved = json.loads((out / "looks.json").read_text())
    assert saved["rule"] == "Bonferroni" and saved["decisions"]["ucb (lenet on toy)"]["look"] == 1
    assert len(saved["done"]) == 3
    said = capsys.readouterr().err
    assert "look 1 (a = 0.005556 per policy) decided ucb (lenet on toy): not worth it\n" in said
    assert "still can't tell egreedy (lenet on toy), kakurenbo (lenet on toy): the next look adds seeds" in said
    # an arm of a schedule already planned is said to be that arm once a next look is planned,
    # after the look that asked for it
    same = "shorter-35 trains the same schedule as shorter-30 (7 epochs): one arm, shorter-30, trained once"
    assert said.count(same) == 2, said
    assert said.index(same) > said.index("look 1 (a = ")


def test_a_changed_plan_of_looks_is_refused_once_runs_exist(tmp_path):
    """A plan of looks changed after runs exist dropped the old plan's decisions; the error
    spending holds only for looks fixed before the first look."""
    from fineprune_cli.analysis.decide import plan as plans

    plans.record(tmp_path, Judging(), [2, 3], runs=0)
    assert plans.record(tmp_path, Judging(), [2, 3], runs=4).looks == (2, 3)
    assert plans.record(tmp_path, Judging(), None, runs=4).looks == (2, 3)  # a report: whatever was planned
    with pytest.raises(ConfigError, match="a different plan .* after 4 runs would be chosen after seeing them"):
        plans.record(tmp_path, Judging(), [2, 4], runs=4)
    assert plans.record(tmp_path / "new", Judging(), [2, 4], runs=0).looks == (2, 4)


def test_the_looks_stop_once_nothing_is_open(tmp_path, monkeypatch):
    """ucb alone (no runs of the others) is decided at look 1 of 2: no second look is trained."""
    asked, found, _ = _procedure(tmp_path, monkeypatch, ["regular", "ucb"], [2, 3])
    assert len(asked) == len(found.replayed) == 1 and found.replayed[0].open == ()


def test_the_report_replays_the_same_looks_from_the_runs():
    """The report's replay over all runs gives the procedure's decisions: ucb from look 1 (seeds
    0-1), never re-decided over seeds 0-3, where seed 2's +5 would leave it undecided."""
    runs = [r for r in _recipe_runs() if r.policy in ("regular", "ucb", "shorter-30")]
    decisions, looks = replay(group(runs), Judging(), (2, 3, 4))
    [ucb] = decisions
    assert ucb.word == NOT_WORTH and ucb.look == 1 and len(looks) == 1
    late, _ = replay(group([r for r in runs if r.seed != 0 or r.policy != "ucb"]), Judging(), (2, 3, 4))
    assert late[0].look != 1  # seed 0 of ucb gone: look 1 cannot decide it


def test_the_next_runs_are_the_missing_ones_of_the_first_look_not_yet_whole(tmp_path):
    """What `make gpu` trains next, call after call, from the runs made on any machine: look 1's
    missing runs first; once it is whole, look 2's runs of what is still open (ucb decided at
    look 1 is not trained again; egreedy's 35% budget asks for shorter-35); nothing once done."""
    from fineprune_cli.sequential.looks import next_runs

    cfg, c = tiny_compare(
        tmp_path,
        policies=["regular", "ucb", "egreedy", "kakurenbo"],
        shorter=[0.3],
        until_decided=True,
        looks=[2, 3, 4],
    )
    cfg.train.epochs, cfg.train.milestones = 20, []  # shorter-30 and shorter-35: 14 and 13 epochs
    recipe = _recipe_runs()
    look1 = [r for r in recipe if r.seed < 2]
    equal = Judging(allocation="equal")  # the looks' levels these expectations were worked out at
    missing = next_runs(cfg, c, equal, [r for r in look1 if (r.policy, r.seed) != ("kakurenbo", 1)])
    assert [(j.arm, j.seed) for j in missing] == [("kakurenbo", 1)]
    look2 = next_runs(cfg, c, equal, look1)
    assert sorted({j.arm for j in look2}) == ["egreedy", "kakurenbo", "regular", "shorter-30", "shorter-35"]
    assert {(j.arm, j.seed) for j in look2} >= {("shorter-35", 0), ("shorter-35", 2), ("regular", 2)}
    assert not any(j.seed == 3 or (j.arm != "shorter-35" and j.seed < 2) for j in look2)
    decided = [r for r in recipe if r.policy in ("regular", "ucb", "shorter-30")]
    c_ucb = load_compare(None, {"compare.policies": ["regular", "ucb"], "compare.shorter": [0.3]} | _looks(2, 3, 4))
    assert next_runs(cfg, replace(c_ucb, out=c.out), Judging(), [r for r in decided if r.seed < 2]) == []


def test_the_next_runs_refuse_two_results_of_one_seed_and_keep_an_identical_copy_once(tmp_path):
    """Issue 57: `make gpu`'s calls, from several machines, can hold one seed's run twice. The looks
    kept whichever was read first (a folder's name decided), as `report` refuses to."""
    from factories import make_run
    from fineprune_cli.analysis.read.runs import load_runs
    from fineprune_cli.sequential.looks import next_runs

    cfg, c = tiny_compare(tmp_path, policies=["regular"], until_decided=True, looks=[2, 3])
    for call in ("a", "b"):
        make_run(tmp_path / call, "lenet", "regular", 0, 9.0, [50.0, 60.0])
    same = load_runs([tmp_path / "a", tmp_path / "b"])[0]
    assert [(j.arm, j.seed) for j in next_runs(cfg, c, Judging(), same)] == [("regular", 1)]  # seed 0 once
    make_run(tmp_path / "c", "lenet", "regular", 0, 9.0, [50.0, 61.0])
    other = load_runs([tmp_path / "a", tmp_path / "c"])[0]
    with pytest.raises(ConfigError, match=r"regular seed 0 is recorded twice with different results, in .*a.* and"):
        next_runs(cfg, c, Judging(), other)


def _looks(*seeds):
    return {"compare.until_decided": True, "compare.looks": list(seeds)}


@pytest.mark.parametrize(
    "flags, words",
    [
        ({"compare.looks": [99999999999999999999]}, "at most 20 seed counts, each from 2 to 1,000"),
        ({"compare.looks": [2, 100000000]}, "each from 2 to 1,000"),
        ({"compare.looks": list(range(2, 24))}, "at most 20 seed counts"),
    ],
)
def test_looks_are_bounded_before_anything_is_planned(flags, words):
    """At d26b633 --looks 99999999999999999999 was an OverflowError traceback and --looks
    2,100000000 trained look 1, then built 10^8 seeds' jobs until memory ran out."""
    with pytest.raises(ConfigError, match=words):
        load_compare(None, {"compare.until_decided": True, **flags})
    with pytest.raises(ConfigError, match="between 1 and 1,000 seeds"):
        load_compare(None, {"compare.seeds": list(range(1001))})


def test_a_bracketing_arm_that_cannot_be_trained_is_left_out_with_its_reason(tmp_path, capsys):
    """Milestones 3 and 4 of 10 epochs halve to 2 and 2: shorter-50 cannot be built. Of 6 epochs,
    45% and 50% fewer both train 3. A bracketing arm like either is left out of the next look with
    its reason (d26b633 added it, and every look tripped on it)."""
    from fineprune_cli.sequential.looks import _trainable

    cfg, _ = tiny_compare(tmp_path)
    cfg.train.epochs, cfg.train.milestones = 10, [3, 4]
    assert _trainable(cfg, [0.1], [0.5, 0.2]) == [0.2]
    assert (
        "shorter-50 is left out of the next look: shorter-50: milestones 3,4 scaled by 0.5" in capsys.readouterr().err
    )
    cfg.train.milestones = []
    assert _trainable(cfg, [0.45], [0.5, 0.3]) == [0.5, 0.3]  # of 10 epochs: 6 and 5, two schedules
    cfg.train.epochs = 6
    assert _trainable(cfg, [0.45], [0.5]) == [0.45]  # of 6 epochs both train 3: one arm, shorter-45
    assert "shorter-50 trains the same schedule as shorter-45 (3 epochs)" in capsys.readouterr().err
    assert _trainable(cfg, [], [0.05, 0.3]) == [0.3]  # 5% fewer of 6 epochs: 6, regular's own
    assert "shorter-5 is left out of the next look: shorter-5 of 6 epochs trains 6" in capsys.readouterr().err


def test_one_run_per_distinct_schedule_a_share_of_a_trained_arms_schedule_is_that_arm(tmp_path, capsys):
    """Issue 57: `--epochs 6 --policies regular,fine,ucb --prune-fraction 0.9 --looks 3,6,9`. A look
    trained shorter-90 (1 epoch of 6) beside ucb at 91%; the next look's bracket wants 95% fewer,
    also 1 epoch. It was added as a second arm, shorter-95, and the same runs trained again under
    its name for every seed; now the next look trains shorter-90 on the new seeds, saying so."""
    from types import SimpleNamespace

    from fineprune_cli.sequential.looks import _next_arms

    cfg, c = tiny_compare(tmp_path, policies=["regular", "ucb"])
    cfg.train.epochs, cfg.train.milestones = 6, []
    name, kw = shorter(0.9)
    by = context({"regular": (0.0, {}), name: (0.0, kw), "ucb": (0.0, pruned("ucb", 0.91))}, seeds=range(3))
    assert bracketing_shares(by, "ucb") == [0.95]  # the line lies below 91%: the side above is missing
    ucb = SimpleNamespace(policy="ucb", cheap=None, context="ctx")
    nxt = _next_arms(cfg, c, {"ctx": by}, [ucb])
    assert nxt.shorter == [0.9] and nxt.policies == ["regular", "ucb"]
    said = capsys.readouterr().err
    assert "shorter-95 trains the same schedule as shorter-90 (1 epoch): one arm, shorter-90, trained once" in said
    # with no arm of that schedule trained yet, the first share wanted names it
    fresh = context({"regular": (0.0, {}), "ucb": (0.0, pruned("ucb", 0.91))}, seeds=range(3))
    assert _next_arms(cfg, c, {"ctx": fresh}, [ucb]).shorter == [0.9]


def test_the_dry_run_says_which_shares_a_look_may_add_are_one_schedule(tmp_path):
    from fineprune_cli.drivers.compare import shared_schedules
    from fineprune_cli.drivers.dryrun import Probe, dry_compare

    def timer(*_):  # the step's probe: not what is tested here
        return Probe([0.1] * 5, [0.1] * 5, 1, 128, load=0.5, cores=2)

    cfg, c = tiny_compare(tmp_path, policies=["regular", "ucb"], until_decided=True, looks=[2, 3])
    cfg.train.epochs, cfg.train.milestones = 6, []
    said = shared_schedules(cfg)
    assert said.startswith("shorter arms a later look adds are one arm per distinct schedule of 6 epochs")
    assert "45–55% fewer all train 3 epochs" in said and said.endswith("80–95% fewer all train 1 epoch")
    assert dry_compare(cfg, c, timer).shared_schedules == said
    cfg.train.epochs = 200  # 10 epochs a step: every share its own schedule
    assert shared_schedules(cfg) == ""


def test_a_report_names_where_looks_json_says_otherwise_than_the_runs(tmp_path):
    """A looks.json edited, or left stale after runs were deleted, was pasted as the decisions that
    hold; the report replays the runs present and names each place the file disagrees."""
    from fineprune_cli.analysis.decide.sequence import disagreements, record
    from fineprune_cli.analysis.render.verdict import looks_lines
    from fineprune_cli.analysis.study import Study

    runs = [r for r in _recipe_runs() if r.policy in ("regular", "ucb", "shorter-30")]
    decisions, looks = replay(group(runs), Judging(), (2, 3, 4))
    saved = record((2, 3, 4), looks, decisions, Judging())
    folder = tmp_path / "deep" / "cmp"
    folder.mkdir(parents=True)
    (folder / "looks.json").write_text(json.dumps(saved))
    assert disagreements([tmp_path], decisions) == []  # as the procedure wrote it: nothing to say
    saved["decisions"]["ucb (lenet on toy)"]["word"] = "worth it"
    saved["decisions"]["egreedy (lenet on toy)"] = {"word": "not worth it", "look": 1, "p_adjusted": 0.01}
    (folder / "looks.json").write_text(json.dumps(saved))
    lines = disagreements([tmp_path], decisions)
    assert lines == [
        f"{folder / 'looks.json'} records egreedy (lenet on toy): not worth it; replayed from the runs present: "
        "not judged (its runs are not here)",
        f"{folder / 'looks.json'} records ucb (lenet on toy): worth it; replayed from the runs present: not worth it",
    ]
    found = Study(runs, group(runs), Judging(), decisions, looks=(2, 3, 4), replayed=looks, recorded=lines)
    assert any(line.startswith("Where a looks.json") for line in looks_lines(found))
    (folder / "looks.json").write_text("{not json")
    assert disagreements([tmp_path], decisions) == [
        f"{folder / 'looks.json'} is unreadable; the looks are replayed from the runs present"
    ]


def test_an_open_policy_is_advised_for_the_first_look_whose_seeds_it_lacks():
    """egreedy's runs hold seeds 0-1 only while kakurenbo's go on to later looks: it is judged
    again at those looks on its two seeds, and its next decision comes at the first planned look
    it has not trained (3 seeds), not the look after the last one replayed."""
    runs = [r for r in _recipe_runs() if r.policy != "ucb" and (r.policy != "egreedy" or r.seed < 2)]
    decisions, looks = replay(group(runs), Judging(), (2, 3, 4))
    egreedy = next(d for d in decisions if d.policy == "egreedy")
    assert len(looks) >= 2 and egreedy.look == len(looks) and egreedy.vs_regular.n == 2
    assert egreedy.advice is not None and egreedy.advice.next_seeds == 3

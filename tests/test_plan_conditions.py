"""The plan keeps its own conditions (issue 48): its family (the policies and contexts alpha is
shared over) and its seeds (a single look's, or each planned look's) are recorded, and a report
over part of the family keeps the planned level, one over other policies or seeds says *post
hoc*, and a look whose seeds are not all there decides nothing. Fixtures: the committed
Fashion-MNIST runs (results/policies/fashion-mnist/runs) with a plan written as `compare` would
have recorded it before them."""

import json
import shutil
from pathlib import Path

import pytest

from fineprune_cli.analysis.decide import plan
from fineprune_cli.analysis.decide.decision import CANT_TELL, NOT_WORTH
from fineprune_cli.analysis.decide.judging import Judging
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.analysis.study import for_folders

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "policies" / "fashion-mnist" / "runs"
CONTEXT = "lenet-fashion-mnist"
POLICIES = ("fine", "infobatch", "ucb", "egreedy", "kakurenbo")
FAMILY = plan.Family(POLICIES, ("lenet",), ("fashion-mnist",))


def folder(root: Path, keep, **recorded) -> Path:
    """The committed runs whose (arm, seed) `keep` accepts, with a plan recorded before them."""
    out = root / "runs"
    for run in sorted((COMMITTED / CONTEXT).iterdir()):
        arm, _, seed = run.name.rpartition("-seed")
        if keep(arm, int(seed)):
            shutil.copytree(run, out / CONTEXT / run.name)
    plan.record(out, Judging(**recorded.pop("judging", {})), recorded.pop("looks", None), 0, **recorded)
    return out


def decided(out: Path):
    runs = load_runs([out])[0]
    return for_folders(runs, [out])


def shorter_or(*arms):
    return lambda arm, seed: arm == "regular" or arm.startswith("shorter-") or arm in arms


def test_a_report_over_part_of_the_family_tests_at_the_planned_level(tmp_path):
    """The audit's case: regular, ucb and the shorter arms of a folder planned for five policies.
    Judged as a family of one, UCB reads *not worth it* (adjusted p 0.016, at a = 0.05); the plan
    shares alpha over five, so it is tested at 0.01 and can't be told yet. Catches: k taken from
    the policies found instead of the plan."""
    out = folder(tmp_path, shorter_or("ucb"), family=FAMILY, seeds=range(5))
    found = decided(out)
    [ucb] = found.decisions
    assert not found.post_hoc and ucb.family == 5 and ucb.level == pytest.approx(0.01)
    assert ucb.word == CANT_TELL and ucb.p_adjusted == pytest.approx(5 * ucb.p_claim)
    alone = for_folders(load_runs([out])[0], [])  # the same runs with no plan: a family of one
    assert (
        alone.decisions[0].word == NOT_WORTH and alone.decisions[0].p_adjusted < 0.05 < 5 * alone.decisions[0].p_claim
    )
    write_report([out], tmp_path / "rep", with_plots=False)
    text = (tmp_path / "rep" / "index.md").read_text()
    assert "5 in the family (1 of them judged here, each at the planned level)" in text
    assert "these decisions keep to it" in text


def test_a_policy_outside_the_planned_family_makes_the_report_post_hoc(tmp_path):
    """Planned for fine-pruning alone; the folder also holds UCB. Catches: a family read off the runs."""
    out = folder(tmp_path, shorter_or("fine", "random", "ucb"), family=plan.Family(("fine",), ("lenet",), ("f",)))
    found = decided(out)
    assert any("it judges ucb, outside the plan's family (fine on lenet × f: k = 1)" in r for r in found.post_hoc)


def test_seeds_beyond_a_single_looks_plan_make_it_post_hoc(tmp_path):
    """Seeds 0–2 planned, seeds 0–4 there: a second look at the full level. Catches: seeds not recorded."""
    out = folder(tmp_path, shorter_or("infobatch"), family=FAMILY, seeds=range(3))
    reasons = decided(out).post_hoc
    assert any(r.startswith("seeds 3, 4 are not among the plan's (0–2): adding seeds") for r in reasons)
    assert json.loads((out / "plan.json").read_text())["seeds"] == [0, 1, 2]


def test_a_single_look_lacking_a_planned_seed_decides_nothing(tmp_path):
    """Seeds 0–4 planned; InfoBatch's seed 4 is not there yet. Over seeds 0–3 it would read *not
    worth it*; the look is incomplete, so it reads can't tell, with the reason."""
    keep = shorter_or("infobatch")
    out = folder(tmp_path, lambda arm, seed: keep(arm, seed) and (arm, seed) != ("infobatch", 4), family=FAMILY,
                 seeds=range(5))  # fmt: skip
    [d] = decided(out).decisions
    assert d.word == CANT_TELL and "infobatch lacks seed 4" in d.incomplete
    write_report([out], tmp_path / "rep", with_plots=False)
    assert "can't tell yet (seeds incomplete)" in (tmp_path / "rep" / "index.md").read_text()


def test_a_look_read_before_its_seeds_exist_decides_nothing(tmp_path):
    """The audit's case: looks 3, 5, 8 planned, seeds 0–3 trained. At 7b85df8 the report read
    "InfoBatch: not worth it (look 2)" over 4 seeds and said the decisions kept to the plan."""
    out = folder(tmp_path, lambda arm, seed: seed < 4, family=FAMILY, looks=[3, 5, 8])
    found = decided(out)
    assert not found.post_hoc and len(found.replayed) == 2
    info = next(d for d in found.decisions if d.policy == "infobatch")
    assert info.word == CANT_TELL or info.look == 1  # never decided at look 2 over seeds 0-3
    look2 = [d for d in found.decisions if d.look == 2]
    assert look2 and all(d.word == CANT_TELL and "(seeds 0–4) is incomplete" in d.incomplete for d in look2)
    assert found.replayed[1].incomplete == tuple(f"{d.policy} (lenet on Fashion-MNIST)" for d in look2)
    write_report([out], tmp_path / "rep", with_plots=False)
    assert "(look 2 incomplete)" in (tmp_path / "rep" / "index.md").read_text()


def test_compare_records_the_family_and_seeds_and_says_where_it_goes_beyond(tmp_path, capsys):
    """`compare` writes its policies, models, datasets and seeds into plan.json; a later compare
    into the folder with another policy and more seeds trains them and says the decisions will
    be post hoc. Catches: a plan without its family, or a silent second look."""
    from conftest import invoke

    out = tmp_path / "cmp"
    flags = ["compare", "-m", "lenet", "-d", "synthetic", "--subset", "64", "--test-subset", "64", "--epochs", "2",
             "--device", "cpu", "--out", out, "--shorter", "0.5"]  # fmt: skip
    result = invoke([*flags, "--seeds", "0,1", "--policies", "regular,fine"])
    assert result.exit_code == 0, result.output
    recorded = json.loads((out / "plan.json").read_text())
    assert recorded["family"] == {"policies": ["fine"], "models": ["lenet"], "datasets": ["synthetic"]}
    assert recorded["seeds"] == [0, 1] and recorded["judging"]["allocation"] == "late"
    result = invoke([*flags, "--seeds", "0,1,2", "--policies", "regular,fine,ucb"])
    assert result.exit_code == 0, result.output
    assert "ucb not in the plan's family" in result.output and "seeds 2 not among the plan's (0, 1)" in result.output
    assert json.loads((out / "plan.json").read_text()) == recorded


def test_compare_into_a_planned_folder_judges_by_its_recorded_plan(tmp_path):
    """A folder planned with m 0.5: compare into it again with no judging flags keeps m 0.5
    (the default 0.3 would be a new plan after its runs, and refused)."""
    out = tmp_path / "p"
    plan.record(out, Judging(margin=0.5), None, 0, FAMILY, range(3))
    assert plan.recorded_judging(out).margin == 0.5
    old = json.loads((out / "plan.json").read_text())
    del old["judging"]["allocation"], old["family"], old["seeds"]  # a plan of 7b85df8
    (out / "plan.json").write_text(json.dumps(old))
    earlier = plan.read(out / "plan.json")
    assert earlier.judging.allocation == "equal" and earlier.family is None
    assert any("does not record its family" in r for r in plan.post_hoc([earlier], earlier.judging))

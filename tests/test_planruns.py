"""Which plan applies to which runs, and whether they were made under it (issue 49): plan.json is
read strictly, each run records the digest of the plan in force when it was made, a plan applies
to the runs below its folder (the nearest one to each), and a report says *post hoc* where a
plan.json changed after its runs, was written over runs made without it, or is another
comparison's. Fixtures: the committed Fashion-MNIST runs (recorded before runs held a digest)."""

import json
import shutil
from pathlib import Path

import pytest

from fineprune_cli.analysis.decide import plan
from fineprune_cli.analysis.decide.judging import Judging
from fineprune_cli.analysis.read.planruns import applying, made_under, nearest
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.study import for_folders
from fineprune_cli.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "policies" / "fashion-mnist" / "runs" / "lenet-fashion-mnist"
FAMILY = plan.Family(("fine",), ("lenet",), ("fashion-mnist",))


def compared(out: Path, digest: str | None = "plan", seeds=range(3)) -> Path:
    """regular and fine of `seeds`, with a plan recorded before them; each run records `digest`
    ('plan': that plan's, None: none, as a run of an earlier version)."""
    for seed in seeds:
        for arm in ("regular", "fine"):
            shutil.copytree(COMMITTED / f"{arm}-seed{seed}", out / "lenet-fashion-mnist" / f"{arm}-seed{seed}")
    recorded = plan.record(out, Judging(), None, 0, FAMILY, list(seeds))
    stamp(out, recorded.digest if digest == "plan" else digest)
    return out


def stamp(folder: Path, digest: str | None) -> None:
    for summary in folder.rglob("summary.json"):
        data = json.loads(summary.read_text())
        data.pop("plan", None)
        summary.write_text(json.dumps(data if digest is None else {**data, "plan": digest}))


def edit_plan(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        section, _, name = key.partition("__")
        (data[section] if name else data).update({name: value} if name else {section: value})
    path.write_text(json.dumps(data))


def post_hoc(*folders: Path) -> list[str]:
    return for_folders(load_runs(list(folders))[0], list(folders)).post_hoc


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"looks": [0, -5]}, "looks must rise, each at least 2 seeds"),
        ({"looks": [5, 3]}, "looks must rise"),
        ({"looks": [2.5, 4]}, "looks must be a list of whole numbers"),
        ({"seeds": [0, 0, 1]}, "seeds must be distinct and not negative"),
        ({"seeds": [-1]}, "seeds must be distinct"),
        ({"seeds": [True]}, "seeds must be a list of whole numbers"),
        ({"judging__margin": -1}, "judging.margin must be a number of accuracy points in (0, 100], got -1"),
        ({"judging__margin": "wide"}, "judging.margin must be a finite number"),
        ({"judging__alpha": 2}, "judging.alpha must be in [0.0001, 0.5]"),
        ({"judging__min_gain": 200}, "judging.min_gain must be a number of accuracy points in [0, 100]"),
        ({"judging__family": "holm"}, "judging.family must be one of: bonferroni"),
        ({"judging__power": 0.8}, "unknown key 'power' in judging"),
        ({"margin": 0.3}, "unknown key 'margin' in the plan"),
        (
            {"family": {"policies": ["fine"], "models": [""], "datasets": ["d"]}},
            "family.models must be a list of names",
        ),
        ({"family": {"policies": [], "models": [], "datasets": ["d"]}}, "family.models names none"),
        ({"family": "fine"}, "family must be a JSON object"),
        ({"runs_before": -3}, "runs_before must be a whole number of runs"),
        ({"note": ["x"]}, "note must be a string"),
    ],
)
def test_a_plan_that_is_not_one_is_refused_naming_its_file(tmp_path, changes, said):
    plan.record(tmp_path, Judging(), None, 0, FAMILY, [0, 1])
    edit_plan(tmp_path / "plan.json", **changes)
    with pytest.raises(ConfigError) as refused:
        plan.read(tmp_path / "plan.json")
    assert str(refused.value).startswith(f"{tmp_path / 'plan.json'}: not a judging plan: ") and said in str(
        refused.value
    )


def test_plans_of_earlier_versions_still_read_and_a_compare_of_baselines_plans_no_policy(tmp_path):
    """The committed plans (no family, no seeds, no allocation), and a family with no policies."""
    found = [plan.read(p) for p in sorted((ROOT / "results").rglob("plan.json"))]
    assert len(found) >= 4 and any(p.family is None for p in found)
    recorded = plan.record(tmp_path, Judging(), None, 0, plan.Family((), ("lenet",), ("d",)), [0])
    assert plan.read(tmp_path / "plan.json").family == recorded.family


def test_the_digest_is_the_plans_content_not_its_layout(tmp_path):
    recorded = plan.record(tmp_path, Judging(margin=0.5), [3, 5], 0, FAMILY)
    path = tmp_path / "plan.json"
    assert plan.read(path).digest == recorded.digest
    data = json.loads(path.read_text())
    path.write_text(json.dumps(dict(reversed(list(data.items())))))  # another layout, the same plan
    assert plan.read(path).digest == recorded.digest
    edit_plan(path, runs_before=0, recorded="2020-01-01T00:00:00Z")
    assert plan.read(path).digest != recorded.digest


def test_each_run_keeps_to_the_nearest_plan_whatever_the_folders_are_named(tmp_path):
    """A plan applies to the runs below its folder, the nearest to each; a plan above a folder with
    its own, or beside it, applies to none of its runs. Catches: plans taken in name order."""
    for first, second in (("aaa", "zzz"), ("zzz", "aaa")):
        root = tmp_path / first
        inner, beside = root / "p" / second, root / first
        for folder in (root / "p", inner, beside):
            plan.record(folder, Judging(), None, 0, FAMILY, [0])
        run = inner / "m-d" / "regular-seed0"
        run.mkdir(parents=True)
        (run / "summary.json").write_text("{}")
        plans = plan.find([root])
        assert [p.path.parent for p in plans] == [inner] and nearest(plans, run) is plans[0]
        everyone = [plan.read(f / "plan.json") for f in (root / "p", beside, inner)]
        assert applying(everyone, [run]) == [everyone[2]] and nearest(everyone, root / "elsewhere") is None


def test_a_plan_changed_after_its_runs_or_over_runs_it_did_not_make_is_post_hoc(tmp_path):
    out = compared(tmp_path / "cmp")
    assert post_hoc(out) == []
    edit_plan(out / "plan.json", judging__margin=15)
    assert any("6 of the runs under" in r and "the plan.json changed after runs were made" in r for r in post_hoc(out))
    # 6 runs made by `train` (no plan in force) under a plan saying it came before the first run
    other = compared(tmp_path / "trained", digest="")
    assert any("says it was recorded before the first run, but 6 of the runs" in r for r in post_hoc(other))
    # runs recorded before runs recorded their plan: judged as before
    older = compared(tmp_path / "older", digest=None)
    assert post_hoc(older) == []


def test_a_run_whose_summary_lost_its_plan_digest_is_not_made_under_the_plan(tmp_path):
    """Issue 57: a summary.json without its `plan` passed as a run of an earlier version, and the
    decisions kept to the plan. Its config.yaml (written by a version that records the plan) tells
    the two apart: only a run made before runs recorded their plan lacks the digest in both."""
    out = compared(tmp_path / "cmp")
    run = out / "lenet-fashion-mnist" / "fine-seed1"
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("run:\n", "run:\n  plan: ''\n", 1))
    assert post_hoc(out) == []  # its summary still records the plan it was made under
    stamp(run, None)
    said = post_hoc(out)
    assert len(said) == 1 and "1 of the runs under" in said[0] and "lost the plan digest" in said[0], said


def test_a_parent_plan_over_another_comparisons_runs_is_post_hoc(tmp_path):
    out = compared(tmp_path / "a" / "b")
    (out / "plan.json").rename(tmp_path / "a" / "plan.json")
    assert post_hoc(out) == []  # the same plan, one folder up: the runs were made under it
    edit_plan(tmp_path / "a" / "plan.json", judging__margin=0.5, judging__min_gain=0.5)
    assert any("were made under another plan" in r for r in post_hoc(out))


def test_runs_under_no_plan_beside_runs_under_one_are_named():
    under = plan.Plan(Judging(), path=Path("/x/plan.json"))
    assert made_under([under], [("", None), (under.digest, under)]) == ["1 of the runs lie under no plan"]


def test_compare_records_its_plan_in_each_run(tmp_path):
    from factories import tiny_compare
    from fineprune_cli.drivers.matrix import run_matrix

    cfg, c = tiny_compare(tmp_path, policies=["regular"])
    cfg.train.epochs = 1
    recorded = plan.record(Path(c.out), Judging(), None, 0, FAMILY, [0])
    [run] = run_matrix(cfg, c, show_progress=False)
    assert json.loads((run / "summary.json").read_text())["plan"] == recorded.digest
    assert cfg.run.plan == ""  # the caller's config is left as it was

import json

import pytest
import yaml
from typer.testing import CliRunner

from conftest import metrics_rows, summary_of, tiny
from factories import tiny_compare as _cfg
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.study import study
from fineprune_cli.arms import shorter_schedule
from fineprune_cli.cli import app
from fineprune_cli.drivers.compare import Job, job_config, load_compare, plan
from fineprune_cli.drivers.matrix import run_matrix
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.errors import ConfigError

runner = CliRunner()
TINY = tiny(test_subset=500, epochs=4, window=2, start=1, milestones=3)


def test_plan_runs_whole_seeds_first(tmp_path):
    jobs = plan(*_cfg(tmp_path, models=["lenet", "resnet18"], seeds=[0, 1], policies=["regular", "fine"]))
    assert len(jobs) == 2 * 2 * 2
    assert [j.seed for j in jobs] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert jobs[0] == Job("lenet", "synthetic", "regular", 0)
    assert jobs[0].run_dir("o").as_posix() == "o/lenet-synthetic/regular-seed0"
    assert [(j.arm, j.seed) for j in jobs[:4]] == [("regular", 0), ("fine", 0), ("regular", 0), ("fine", 0)]


def test_plan_order_arm_keeps_each_arms_seeds_together(tmp_path):
    jobs = plan(*_cfg(tmp_path, seeds=[2, 0, 1], policies=["regular", "fine"], frontier=[0.2]))
    assert [(j.arm, j.seed) for j in jobs][:4] == [("regular", 2), ("fine", 2), ("random-every-20", 2), ("regular", 0)]
    by_arm = plan(*_cfg(tmp_path, seeds=[2, 0, 1], policies=["regular", "fine"], frontier=[0.2], order="arm"))
    assert [(j.arm, j.seed) for j in by_arm] == [
        ("regular", 2),
        ("regular", 0),
        ("regular", 1),
        ("fine", 2),
        ("fine", 0),
        ("fine", 1),
        ("random-every-20", 2),
        ("random-every-20", 0),
        ("random-every-20", 1),
    ]
    with pytest.raises(ConfigError, match="order must be one of: seed, arm"):
        plan(*_cfg(tmp_path, order="policy"))


@pytest.mark.parametrize(
    "compare, words",
    [
        ({"policies": ["fine", "lucky"]}, "--policies takes policies from: regular, fine, random.*not 'lucky'"),
        ({"seeds": []}, "between 1 and 1,000 seeds"),
        ({"models": ["nope"]}, "--model must be one of: lenet"),
        ({"seeds": [0, 1, 0]}, "regular, seed 0 .* is listed twice"),
        ({"policies": ["fine", "regular", "fine"]}, "fine, seed 0 .* is listed twice"),
        ({"models": ["lenet", "lenet"]}, "is listed twice"),
        ({"frontier": [0.2, 0.201]}, "random-every-20, seed 0 .* and random-every-20 share it"),
    ],
)
def test_plan_rejects_bad_matrices(tmp_path, compare, words):
    with pytest.raises(ConfigError, match=words):
        plan(*_cfg(tmp_path, **compare))


def test_job_config_sets_policy_and_folder(tmp_path):
    cfg, c = _cfg(tmp_path)
    regular, fine, rand = (
        job_config(cfg, Job("lenet", "synthetic", p, 3), c.out) for p in ("regular", "fine", "random")
    )
    assert not regular.prune.enabled and fine.prune.enabled and rand.prune.policy == "random"
    assert fine.prune.policy == "fine" and rand.run.seed == 3
    assert cfg.prune.enabled is False  # the shared config is not modified
    assert rand.run.out.endswith("lenet-synthetic/random-seed3")


@pytest.mark.slow
def test_random_control_has_the_same_budget(tmp_path):
    dirs = run_matrix(*_cfg(tmp_path), show_progress=False)
    regular, fine, rand = (summary_of(d) for d in dirs)
    assert regular["policy"] == "regular" and regular["samples_skipped"] == 0
    assert fine["policy"] == "fine" and rand["policy"] == "random"
    assert fine["pruning_epochs"] == rand["pruning_epochs"] == [2, 4]
    assert fine["samples_skipped"] == rand["samples_skipped"] == 2 * 60


@pytest.mark.slow
def test_compare_resumes_and_extends_the_matrix(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular", "fine", "random"])
    cfg.train.epochs = 2
    first = run_matrix(cfg, c, show_progress=False)
    started = {d: summary_of(d)["started"] + str((d / "metrics.csv").stat().st_mtime_ns) for d in first}
    # an interrupted run: its summary never reached "complete"
    broken = first[1]
    s = summary_of(broken)
    s["status"] = "incomplete"
    (broken / "summary.json").write_text(json.dumps(s))
    c.seeds = [0, 1]
    second = run_matrix(cfg, c, show_progress=False)
    assert second[:3] == first and len(second) == 6
    for d in (first[0], first[2]):  # complete runs were not touched
        assert summary_of(d)["started"] + str((d / "metrics.csv").stat().st_mtime_ns) == started[d]
    assert all(summary_of(d)["status"] == "complete" for d in second)


def test_compare_refuses_a_folder_made_with_other_settings(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular"])
    run_matrix(cfg, c, show_progress=False)
    cfg.train.lr = 0.05
    with pytest.raises(ConfigError, match="train.lr"):
        run_matrix(cfg, c, show_progress=False)


@pytest.mark.slow
def test_cli_compare_table_json_and_yaml_matrix(tmp_path):
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", *TINY, "--seeds", "0", "--policies", "regular,fine", "--out", str(out)])
    assert result.exit_code == 0, result.output
    # stdout: stderr names fine as its random control here (4 epochs, window 2), and the decisions
    # below the table name random pruning as a C(p) not measured
    table = result.stdout.split("n: seeds;")[0]
    assert "fine" in table and "saved" in table and "random" not in table
    assert "can't tell yet" in result.output  # one seed: the decision is printed, and it is no claim
    cfg = tmp_path / "m.yaml"
    cfg.write_text(yaml.safe_dump({"compare": {"policies": ["regular", "fine"], "seeds": [0]}}))
    result = runner.invoke(app, ["compare", *TINY, "--config", str(cfg), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output[result.output.index("[") :])
    assert [r["policy"] for r in rows] == ["regular", "fine"]
    assert rows[1]["skipped_pct_mean"] > 0 and rows[0]["saved_pct_mean"] == 0


def test_cli_compare_bad_input(tmp_path):
    result = runner.invoke(app, ["compare", *TINY, "--policies", "fine,best", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not 'best'" in result.output
    assert "Traceback" not in result.output


def test_frontier_arms_prune_every_epoch_at_their_budget(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular", "fine"], frontier=[0.1, 0.25])
    jobs = plan(cfg, c)
    assert [j.arm for j in jobs] == ["regular", "fine", "random-every-10", "random-every-25"]
    arm = job_config(cfg, jobs[3], c.out)
    p = arm.prune
    assert (p.enabled, p.policy, p.prune_fraction, p.window, p.start, p.block, p.count) == (
        True,
        "random",
        0.25,
        1,
        0,
        1,
        1,
    )
    assert arm.run.arm == "random-every-25" and arm.run.out.endswith("random-every-25-seed0")
    assert job_config(cfg, jobs[1], c.out).run.arm == ""  # a plain policy is its own arm
    with pytest.raises(ConfigError, match="--frontier takes fractions in"):
        load_compare(None, {"compare.frontier": [0.5, 1.0]})


@pytest.mark.parametrize(
    "epochs, milestones, warmup, budget, expected",
    [
        (200, [60, 120, 160], 1.0, 0.3, (140, [42, 84, 112], 0.7)),  # the paper's recipe at 30%
        (200, [60, 120, 160], 1.0, 0.1, (180, [54, 108, 144], 0.9)),
        (23, [7, 14, 19], 1.0, 0.5, (12, [4, 7, 10], 0.5)),  # 11.5 -> 12, 3.5 -> 4: half up
        (23, [7, 14, 19], 2.0, 0.1, (21, [6, 13, 17], 1.8)),  # 20.7, 6.3, 12.6, 17.1
        (2, [1, 2], 1.0, 0.5, (1, [], 0.5)),  # both land on the only epoch: no effect
        (10, [3, 6, 8], 1.0, 0.3, (7, [2, 4, 6], 0.7)),  # 5.6 -> 6 stays, below the 7th epoch
    ],
)
def test_a_shorter_arm_compresses_epochs_milestones_and_warm_up(epochs, milestones, warmup, budget, expected):
    # Catches: banker's rounding (12.5 -> 12, 3.5 -> 4 but 4.5 -> 4), truncation, epochs scaled
    # by b instead of 1 - b, milestones left at their full-schedule epochs.
    short, scaled, ramp = shorter_schedule(epochs, milestones, warmup, budget)
    assert (short, scaled) == expected[:2] and ramp == pytest.approx(expected[2])


def test_shorter_arms_train_regular_with_the_compressed_schedule(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular"], shorter=[0.5])
    cfg.train.milestones = [2, 3]
    jobs = plan(cfg, c)
    assert [j.arm for j in jobs] == ["regular", "shorter-50"]
    arm = job_config(cfg, jobs[1], c.out)
    # 3 -> 1.5 -> 2 falls on the arm's last epoch: it would change no epoch's lr, so it goes
    assert (arm.train.epochs, arm.train.milestones, arm.prune.enabled, arm.run.arm) == (2, [1], False, "shorter-50")
    cfg.train.milestones = [1, 2]  # 0.5 -> 1 and 1 -> 1 collide before the end
    with pytest.raises(ConfigError, match="shorter-50: milestones 1,2 scaled by 0.5 give 1,1"):
        plan(cfg, c)
    with pytest.raises(ConfigError, match="--shorter takes fractions in"):
        load_compare(None, {"compare.shorter": [0.0]})


@pytest.mark.slow
def test_a_shorter_run_trains_fewer_epochs_and_every_sample(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular"], shorter=[0.25])
    regular, arm = run_matrix(cfg, c, show_progress=False)
    s = summary_of(arm)
    assert s["arm"] == "shorter-25" and s["policy"] == "regular"
    assert s["epochs_completed"] == 3 and s["samples_skipped"] == 0
    # the trainer's lr, as it logs it, is regular's compressed (milestone 3 of 4 -> 2 of 3)
    [found] = study(load_runs([regular, arm])[0]).compression
    assert (found.arm, found.state, found.checked) == ("shorter-25", "compressed", (0,))
    assert [r["lr"] for r in metrics_rows(arm)] == ["0.1", "0.1", "0.020000000000000004"]


@pytest.mark.slow
def test_frontier_run_skips_its_share_in_every_epoch(tmp_path):
    cfg, c = _cfg(tmp_path, policies=["regular"], frontier=[0.2])
    cfg.train.epochs = 2
    regular, arm = run_matrix(cfg, c, show_progress=False)
    s = summary_of(arm)
    assert s["arm"] == "random-every-20" and s["policy"] == "random"
    assert s["pruning_epochs"] == [1, 2] and s["samples_skipped"] == 2 * 40


@pytest.mark.slow
def test_a_run_folder_of_the_first_release_is_reused(tmp_path):
    """Schema-1 folders (no schema key, the compare matrix inside config.yaml, no run.arm) count
    as finished runs of the same settings: long experiments survive an upgrade."""
    cfg, c = _cfg(tmp_path, policies=["regular", "fine"])
    cfg.train.epochs = 2
    first = run_matrix(cfg, c, show_progress=False)
    for d in first:
        s = summary_of(d)
        for key in ("schema", "arm", "final_test_loss"):
            s.pop(key)
        (d / "summary.json").write_text(json.dumps(s))
        old = yaml.safe_load((d / "config.yaml").read_text())
        old["run"].pop("arm")
        old["compare"] = {
            "models": [],
            "datasets": [],
            "policies": ["regular", "fine", "random"],
            "seeds": [0],
            "out": "results/runs/compare",
        }
        (d / "config.yaml").write_text(yaml.safe_dump(old))
    stamps = [(d / "metrics.csv").stat().st_mtime_ns for d in first]
    assert run_matrix(cfg, c, show_progress=False) == first
    assert [(d / "metrics.csv").stat().st_mtime_ns for d in first] == stamps


def _interrupted_run(tmp_path):
    """A 2-epoch regular run whose summary says it was interrupted (its checkpoint is whole)."""
    cfg, c = _cfg(tmp_path, policies=["regular"])
    cfg.train.epochs = 2
    (run,) = run_matrix(cfg, c, show_progress=False)
    s = summary_of(run)
    s["status"] = "interrupted"
    (run / "summary.json").write_text(json.dumps(s))
    return cfg, c, run


def test_compare_refuses_to_resume_a_run_made_with_other_settings(tmp_path):
    cfg, c, run = _interrupted_run(tmp_path)
    cfg.train.lr = 0.05
    with pytest.raises(ConfigError, match=r"holds a run \(interrupted\) made with other settings .*train.lr"):
        run_matrix(cfg, c, show_progress=False)


@pytest.mark.slow
def test_compare_keeps_a_run_whose_checkpoint_fails_to_load_for_another_reason(tmp_path):
    """Only a checkpoint that can never continue (older format, other settings) is trained
    again; any other failure (every CUDA resume once failed so) stops with the folder kept:
    compare deleted each such run and trained it from the start."""
    import torch

    cfg, c, run = _interrupted_run(tmp_path)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    state["trainer"]["model"] = {}
    torch.save(state, run / "checkpoint.pt")
    with pytest.raises(ConfigError, match=r"does not fit this run .*compare keeps .* as it is"):
        run_matrix(cfg, c, show_progress=False)
    assert summary_of(run)["status"] == "interrupted" and (run / "checkpoint.pt").exists()
    state["format"] = 1  # an older format: trained again
    torch.save(state, run / "checkpoint.pt")
    run_matrix(cfg, c, show_progress=False)
    assert summary_of(run)["status"] == "complete"


def test_duplicate_arms_are_refused_before_anything_trains(tmp_path, monkeypatch):
    from fineprune_cli import runner as front_door

    monkeypatch.setattr(front_door, "train", lambda *a, **k: pytest.fail("trained"))
    result = runner.invoke(app, ["compare", *TINY, "--policies", "regular,fine,regular", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "regular, seed 0 (lenet on synthetic) is listed twice" in result.output
    assert not (tmp_path / "c").exists()


def test_compare_refuses_a_run_made_on_other_data(tmp_path):
    """Class folders swapped after the run: same files, every label flipped."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "reliability"))
    from crafted import grey_folder, swap_class_folders

    grey_folder(tmp_path / "imgs")
    args = [
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "folder",
        "--data-dir",
        str(tmp_path / "imgs"),
        "--epochs",
        "1",
        "--policies",
        "regular",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "c"),
    ]
    assert runner.invoke(app, args).exit_code == 0
    assert runner.invoke(app, args).exit_code == 0  # unchanged: reused
    swap_class_folders(tmp_path / "imgs" / "train")
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "made on other data: the train images in" in result.output, result.output


def test_a_shorter_arm_scales_the_resolved_default_milestones(tmp_path):
    """Milestones left unset are 30/60/80% of the full run, made concrete before --shorter
    scales them: 20 epochs -> 6, 12, 16, then x 0.5 -> 3, 6, 8 over 10 epochs."""
    from fineprune_cli.engine.setup.config import Config

    cfg = Config()
    cfg.model.name, cfg.data.dataset, cfg.train.epochs = "lenet", "synthetic", 20
    arm = job_config(cfg, Job("lenet", "synthetic", "regular", 0, shorter=0.5), str(tmp_path))
    assert (arm.train.epochs, arm.train.milestones) == (10, [3, 6, 8])


COMMITTED = [  # (experiment file, compare flags, the folder its runs are in), as their commands say
    ("experiments/demo.yaml", {"compare.seeds": [0, 1, 2, 3, 4]}, "results/demo/runs"),  # its looks: 3, then 5 seeds
    (
        "experiments/demo.yaml",
        {
            "compare.seeds": [0, 1, 2, 3, 4, 5, 6, 7],  # seeds 5-7: the looks' arms
            "compare.policies": ["regular", "fine", "random", "infobatch", "ucb", "egreedy", "kakurenbo"],
            "compare.frontier": [0.1, 0.2, 0.3, 0.4, 0.5],
            "compare.shorter": [0.1, 0.2, 0.3, 0.4, 0.5],
            "compare.out": "results/policies/fashion-mnist/runs",
        },
        "results/policies/fashion-mnist/runs",
    ),
]


@pytest.mark.parametrize("experiment, matrix, folder", COMMITTED)
def test_committed_run_folders_still_count_as_complete(experiment, matrix, folder, monkeypatch):
    """Runs made when the schedule's defaults were fixed numbers (written out in config.yaml)
    are the same runs under the defaults scaled to --epochs: compare reuses every one."""
    from pathlib import Path

    from fineprune_cli.drivers.reuse import existing_state

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    cfg, c = build_config(experiment, {}), load_compare(experiment, matrix)
    found = {p.parent for p in (root / folder).glob("*/*/config.yaml")}
    assert found, f"no committed runs in {folder}"
    checked = set()
    for job in plan(cfg, c):
        job_cfg = job_config(cfg, job, c.out)
        if (root / job_cfg.run.out) in found:
            assert existing_state(job_cfg, {}) == "complete", job_cfg.run.out
            checked.add(root / job_cfg.run.out)
    assert checked == found  # every committed folder is a job of its command (look 2 trained a subset)


def test_a_run_another_compare_is_writing_is_left_to_it(tmp_path, capsys):
    """A second compare into the same --out while a run is in its first epoch (no checkpoint yet,
    its folder locked by the first): the run is neither deleted nor trained again, and the second
    compare says whose it is. At d26b633 it said 'an earlier attempt left no checkpoint' and
    deleted the folder under the first process."""
    import fcntl
    import os

    cfg, c = _cfg(tmp_path, policies=["regular"], seeds=[0])
    run_matrix(cfg, c, show_progress=False)
    (run,) = list((tmp_path / "cmp").glob("*/regular-seed0"))
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "incomplete", "epochs_completed": 0}))
    (run / "checkpoint.pt").unlink()
    before = sorted(p.name for p in run.iterdir())
    fd = os.open(run / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first compare, still training it
    try:
        run_matrix(cfg, c, show_progress=False)
    finally:
        os.close(fd)
    assert sorted(p.name for p in run.iterdir()) == before
    assert json.loads((run / "summary.json").read_text())["status"] == "incomplete"
    assert "is being written by another fineprune process: left to it" in capsys.readouterr().err


def test_shorter_arms_that_round_to_one_schedule_are_refused(tmp_path):
    """45% and 50% fewer of 6 epochs are both 3 epochs: trained twice under two names at d26b633."""
    cfg, c = _cfg(tmp_path, shorter=[0.45, 0.5])
    cfg.train.epochs = 6
    with pytest.raises(ConfigError, match="shorter-45 and shorter-50 both train 3 epochs"):
        plan(cfg, c)


def test_a_matrix_without_regular_says_nothing_can_be_decided_and_looks_refuse_it(tmp_path, capsys):
    """Issue 57: `--policies rs2,seta` planned no regular arm, silently. A plain matrix is kept (an
    ablation read beside regular's runs from another folder) and says so; looks, which decide over
    --out's runs alone, are refused."""
    c = load_compare(None, {"compare.policies": ["rs2", "seta"], "compare.out": str(tmp_path)})
    assert c.policies == ["rs2", "seta"]
    assert "no regular arm planned (--policies rs2,seta): no policy can be decided" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--until-decided with --policies rs2,seta: no regular arm"):
        load_compare(None, {"compare.policies": ["rs2", "seta"], "compare.until_decided": True})
    load_compare(None, {"compare.policies": ["rs2", "regular"], "compare.until_decided": True})
    assert "no regular arm" not in capsys.readouterr().err


def test_a_shorter_arm_that_rounds_to_regulars_schedule_is_refused(tmp_path):
    """10% fewer of 5 epochs rounds to 5: regular's run trained again as 'shorter-10', a cheap
    alternative that costs as much as regular."""
    cfg, c = _cfg(tmp_path, shorter=[0.1])
    cfg.train.epochs = 5
    with pytest.raises(ConfigError, match="shorter-10 of 5 epochs trains 5, as regular does: it is no shorter"):
        plan(cfg, c)
    cfg.train.epochs = 20
    assert {j.arm for j in plan(cfg, c)} >= {"shorter-10"}  # 18 epochs


@pytest.mark.slow
@pytest.mark.parametrize("edit", ["final 150", "final a word", "a copy of seed 0"])
def test_compare_leaves_out_a_finished_run_whose_record_a_report_would_refuse(tmp_path, capsys, edit):
    """Reused as finished, a final accuracy of 150 vanished from the decisions later, which then
    asked for more seeds; a copy of seed 0's run under seed 1's name counted as a second seed.
    Now the record checks run on reuse, and the run left out is named with the reason."""
    import shutil

    from fineprune_cli.analysis.decide.judging import Judging
    from fineprune_cli.drivers.matrix import judged_matrix

    cfg, c = _cfg(tmp_path, policies=["regular"], seeds=[0, 1])
    cfg.train.epochs = 2
    runs = run_matrix(cfg, c, show_progress=False)
    assert summary_of(runs[0])["num_test"] == 500  # recorded: every accuracy is k / 500
    edited = runs[1]
    if edit.startswith("final"):  # a word: unreadable, it was resumed (and the matrix stopped)
        final = 150 if edit == "final 150" else "high"
        (edited / "summary.json").write_text(json.dumps({**summary_of(edited), "final_accuracy": final}))
    else:  # every file of seed 0, the seed in its summary and config made 1
        shutil.rmtree(edited)
        shutil.copytree(runs[0], edited)
        (edited / "summary.json").write_text(json.dumps({**summary_of(edited), "seed": 1, "run_dir": str(edited)}))
        config = yaml.safe_load((edited / "config.yaml").read_text())
        config["run"].update(seed=1, out=str(edited))
        (edited / "config.yaml").write_text(yaml.safe_dump(config))
    before = {p.name: p.read_bytes() for p in edited.iterdir() if p.is_file()}
    capsys.readouterr()
    found = judged_matrix(cfg, c, Judging(), show_progress=False)
    err = capsys.readouterr().err
    why = {
        "final 150": "implausible (",
        "final a word": "unreadable (",
        "a copy of seed 0": "copy (every epoch's losses are those of seed 0",
    }[edit]
    assert f"left out {edited}: {why}" in err and "delete that folder and compare again" in err, err
    assert "1 of 2 runs already finished" in err
    assert [r.seed for r in found.runs] == [0]
    assert {p.name: p.read_bytes() for p in edited.iterdir() if p.is_file()} == before  # kept as it was


def test_compare_names_an_arm_that_is_its_random_control_once_before_its_first_run(tmp_path, capsys, monkeypatch):
    # The tiny matrix: 4 epochs, window 2, start 1 (a = 1, 0): fine prunes 2 and 4, each a window's
    # first. With window 3 epoch 2 is p = 2 and chooses by the counts. Catches: no line, one line a
    # seed, the random control named, a line after training began, or one for an arm whose counts choose.
    from fineprune_cli.drivers import matrix

    said = []
    monkeypatch.setattr(matrix, "train_job", lambda *args: said.append(capsys.readouterr().err))
    cfg, c = _cfg(tmp_path, policies=["regular", "fine", "random"], seeds=[0, 1])
    matrix.run_matrix(cfg, c, show_progress=False)
    assert (
        len(said) == 6
        and said[0].count("is its random control here") == 1
        and "random control here" not in "".join(said[1:])
    )
    assert (
        "lenet on synthetic, fine: fine-pruning is its random control here: each of its 2 pruning epochs (2, 4)"
        in said[0]
    )
    cfg.prune.window = 3
    matrix.run_matrix(cfg, c, show_progress=False)
    assert "random control here" not in "".join(said[6:])

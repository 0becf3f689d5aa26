"""analysis.group.groups: runs that differ in any setting are different rows; seed, machine and
fields added later (read as their defaults) never split a row; each row meets its own regular."""

from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from factories import make_run
from fineprune_cli.analysis.group.groups import Context, group
from fineprune_cli.analysis.read.runs import load_runs, policy_label
from fineprune_cli.analysis.render.summary import csv_cells, summary_rows
from fineprune_cli.analysis.study import study
from fineprune_cli.cli import app

RESULTS = Path(__file__).resolve().parents[1] / "results"


def run(root, policy, seed, final, skipped_epochs=(), arm=None, summary=None, **settings):
    """A 2-epoch run of `policy` (folder named by `arm` or the policy, as compare names it)
    whose config.yaml also holds `settings` ({'prune.prune_fraction': 0.5, ...})."""
    return make_run(
        root,
        "lenet",
        policy,
        seed,
        100.0,
        [60.0, final],
        skipped_epochs=skipped_epochs,
        arm=arm or "",
        settings=settings,
        summary=summary,
    )


def rows_of(*roots):
    return {r["policy"]: r for r in summary_rows(study(load_runs(list(roots))[0]))}


def test_a_sweep_of_two_prune_fractions_is_two_rows(tmp_path):
    """Merged, the two fractions read as one 'fine' row of 2 seeds with differences +1, -3."""
    for seed, reg in enumerate((70.0, 74.0)):
        run(tmp_path / "regular", "regular", seed, reg)
        run(tmp_path / "f01", "fine", seed, reg + 1.0, (2,), **{"prune.prune_fraction": 0.1})
        run(tmp_path / "f05", "fine", seed, reg - 3.0 + seed, (2,), **{"prune.prune_fraction": 0.5})
    rows = rows_of(tmp_path)
    assert set(rows) == {"regular", "fine (prune_fraction 0.1)", "fine (prune_fraction 0.5)"}
    assert rows["fine (prune_fraction 0.1)"]["seeds"] == 2
    assert rows["fine (prune_fraction 0.1)"]["d_final_mean"] == pytest.approx(1.0)
    assert rows["fine (prune_fraction 0.5)"]["d_final_mean"] == pytest.approx(-2.5)


def test_prune_settings_that_never_acted_do_not_split_regular_runs(tmp_path):
    """A regular run given --prune-fraction 0.5 (and another policy and window) trained like any
    other: its seed joins the regular row, and fine pairs with both seeds (differences -1, -1.49)."""
    run(tmp_path / "a", "regular", 0, 70.0)
    run(tmp_path / "b", "regular", 1, 72.0, **{"prune.prune_fraction": 0.5, "prune.policy": "ucb", "prune.window": 5})
    for seed, final in enumerate((69.0, 70.51)):
        run(tmp_path / "c", "fine", seed, final, (2,))
    groups = group(load_runs([tmp_path])[0])
    assert list(groups) == [Context("lenet", "CIFAR-10 (JPEG q75)")]
    rows = rows_of(tmp_path)
    assert set(rows) == {"regular", "fine"} and rows["regular"]["seeds"] == 2
    assert rows["fine"]["d_final_mean"] == pytest.approx(-1.245) and rows["fine"]["d_final_n"] == 2


def test_a_setting_at_its_default_is_not_named(tmp_path):
    run(tmp_path / "a", "regular", 0, 70.0)
    run(tmp_path / "b", "fine", 0, 69.0, (2,), **{"prune.prune_fraction": 0.3})
    run(tmp_path / "c", "fine", 0, 68.0, (2,), **{"prune.prune_fraction": 0.5})
    assert set(rows_of(tmp_path)) == {"regular", "fine", "fine (prune_fraction 0.5)"}
    assert policy_label("fine (prune_fraction 0.5)") == "fine-pruning (prune_fraction 0.5)"


def test_the_ablation_folder_is_its_own_row_paired_with_regular_of_the_same_seed(tmp_path):
    """As the lead reports runs/ and runs-no-rescale/ together: the same folder names
    (infobatch-seedN) in both; regular differs by seed, so a wrong pairing reads otherwise."""
    main, ablation = tmp_path / "runs", tmp_path / "runs-no-rescale"
    for seed, reg in enumerate((70.0, 72.0, 75.0)):
        run(main, "regular", seed, reg)
        run(main, "infobatch", seed, reg - 1.0, (2,), **{"prune.infobatch_rescale": True})
        run(ablation, "infobatch", seed, reg - 2.0 - seed, (2,), **{"prune.infobatch_rescale": False})
    rows = rows_of(main, ablation)
    assert set(rows) == {"regular", "infobatch", "infobatch (infobatch_rescale off)"}
    off = rows["infobatch (infobatch_rescale off)"]
    assert off["seeds"] == 3 and off["d_final_mean"] == pytest.approx(-3.0)  # -2, -3, -4
    assert off["d_final_n"] == 3 and off["d_final_seeds"] == "0 1 2"
    assert off["d_final_ci90_low"] < -3.0 < off["d_final_ci90_high"]
    assert rows["infobatch"]["d_final_mean"] == pytest.approx(-1.0) and rows["infobatch"]["d_final_std"] == 0


def test_seed_machine_place_and_fields_added_later_never_split_a_row(tmp_path):
    """Seed 0 was written before infobatch_rescale and loader existed (read as their defaults),
    seed 1 names them, on another machine, device and folder: one row of two seeds."""
    run(tmp_path / "old", "regular", 0, 70.0, **{"run.out": "somewhere", "run.device": "auto"})
    other = {"processor": "Other CPU", "threads": 1, "torch": "2.0", "device": "cpu"}
    run(
        tmp_path / "new",
        "regular",
        1,
        71.0,
        summary={"machine": other},
        **{"data.loader": "auto", "data.workers": 7, "run.device": "cpu", "run.checkpoint_every": 5},
    )
    for folder, seed in (("old", 0), ("new", 1)):
        run(tmp_path / folder, "infobatch", seed, 69.0, (2,), **({"prune.infobatch_rescale": True} if seed else {}))
    rows = rows_of(tmp_path)
    assert set(rows) == {"regular", "infobatch"} and rows["regular"]["seeds"] == 2


def test_a_variant_of_the_training_recipe_meets_the_regular_run_of_that_recipe(tmp_path):
    """Two regular recipes (lr 0.1, lr 0.05): fine at lr 0.05 pairs with regular at lr 0.05."""
    for seed in range(2):
        run(tmp_path / "a", "regular", seed, 70.0 + seed)
        run(tmp_path / "b", "regular", seed, 60.0 + seed, **{"train.lr": 0.05})
        run(tmp_path / "c", "fine", seed, 59.0 + seed, (2,), **{"train.lr": 0.05})
    groups = group(load_runs([tmp_path])[0])
    assert list(groups) == [Context("lenet", "CIFAR-10 (JPEG q75)"), Context("lenet", "CIFAR-10 (JPEG q75)", "lr 0.05")]
    rows = {(r["variant"], r["policy"]): r for r in summary_rows(study(load_runs([tmp_path])[0]))}
    assert set(rows) == {("", "regular"), ("lr 0.05", "regular (lr 0.05)"), ("lr 0.05", "fine")}
    assert rows[("lr 0.05", "fine")]["d_final_mean"] == pytest.approx(-1.0)


def test_a_shorter_arm_meets_the_full_schedules_regular_despite_its_epochs(tmp_path):
    run(tmp_path, "regular", 0, 70.0, **{"train.epochs": 2, "train.milestones": [2]})
    run(
        tmp_path,
        "regular",
        0,
        69.0,
        arm="shorter-50",
        **{"train.epochs": 1, "train.milestones": [1], "train.warmup_epochs": 0.5},
    )
    assert list(rows_of(tmp_path)) == ["regular", "shorter-50"]


def test_a_shorter_arm_of_another_recipe_is_its_own_row_never_fewer_epochs_of_this_one(tmp_path):
    """Beside a 10-epoch regular: shorter-50 of that recipe (5 epochs, milestones 2,3,4,
    warm-up 0.5) is paired; shorter-50 of a 20-epoch recipe (10 epochs, 3,6,8) read as
    '-100% of sample-epochs skipped' against it before, and fed the fewer-epochs verdict."""
    ten = {"train.epochs": 10, "train.milestones": [3, 6, 8]}
    for seed in range(2):
        run(tmp_path / "a", "regular", seed, 70.0 + seed, **ten)
        run(
            tmp_path / "a",
            "regular",
            seed,
            69.0,
            arm="shorter-50",
            **{"train.epochs": 5, "train.milestones": [2, 3, 4], "train.warmup_epochs": 0.5},
        )
        run(
            tmp_path / "b",
            "regular",
            seed,
            75.0,
            arm="shorter-50",
            **{"train.epochs": 10, "train.milestones": [3, 6, 8], "train.warmup_epochs": 0.5},
        )
    groups = group(load_runs([tmp_path])[0])
    assert len(groups) == 2
    own = next(c for c in groups if c.variant)
    assert "shorter-50" in own.variant and list(groups[own]) == [
        "shorter-50 (epochs 10, milestones 3,6,8, warmup_epochs 0.5)"
    ]
    rows = {r["policy"]: r for r in summary_rows(study(load_runs([tmp_path])[0]))}
    assert rows["shorter-50 (epochs 5, milestones 2,3,4)"]["d_final_mean"] == pytest.approx(-1.5)  # -1, -2
    assert rows["shorter-50 (epochs 10, milestones 3,6,8, warmup_epochs 0.5)"].get("d_final_mean", "") == ""


def test_runs_on_other_data_from_one_folder_are_never_paired(tmp_path):
    """The class folders were swapped between the arms: the same path, other recorded
    listings. Paired before: '-100.00 [-100.00, -100.00] pt, worse than regular'."""
    before = {"train": "6 files, 1111111111111111", "test": "4 files, 2222222222222222"}
    swapped = {"train": "6 files, 3333333333333333", "test": "4 files, 4444444444444444"}
    for seed in range(2):
        run(tmp_path / "a", "regular", seed, 100.0, **{"data.data_dir": "imgs"}, summary={"data": before})
        run(tmp_path / "b", "fine", seed, 0.0, (2,), **{"data.data_dir": "imgs"}, summary={"data": swapped})
    groups = group(load_runs([tmp_path])[0])
    assert len(groups) == 2 and all(c.variant.startswith("data #") for c in groups)
    assert sorted(list(rows) for rows in groups.values()) == [["fine"], ["regular"]]
    fine = next(r for r in summary_rows(study(load_runs([tmp_path])[0])) if r["policy"] == "fine")
    assert fine.get("d_final_mean", "") == "" and fine["variant"].startswith("data #")


def test_runs_that_recorded_no_data_stay_with_the_one_identity_recorded(tmp_path):
    """Folder runs made before identities were recorded (the committed CIFAR-10 runs) still
    pair with later runs of the same folder; a copy of a run on other data is no duplicate."""
    run(tmp_path / "a", "regular", 0, 70.0, summary={"data": {}})
    run(tmp_path / "b", "fine", 0, 69.0, (2,), summary={"data": {"train": "6 files, 11", "test": "4 files, 22"}})
    assert rows_of(tmp_path)["fine"]["d_final_mean"] == pytest.approx(-1.0)
    run(tmp_path / "c", "fine", 0, 30.0, (2,), summary={"data": {"train": "6 files, 33", "test": "4 files, 44"}})
    from fineprune_cli.analysis.group.groups import duplicates

    assert duplicates(load_runs([tmp_path])[0]) == [] and len(group(load_runs([tmp_path])[0])) == 3


def test_the_scale_folder_reads_as_ten_rows():
    rows = summary_rows(study(load_runs([RESULTS / "scale" / "runs"])[0]))
    assert len(rows) == 10 and len({r["policy"] for r in rows}) == 10
    assert {r["policy"] for r in rows} >= {"regular", "regular (dist_mode async, num_ps 2, world_size 4)"}


@pytest.mark.parametrize("folder", ["policies/fashion-mnist/runs", "cifar10-jpeg-lenet-cpu/runs", "demo/runs"])
def test_committed_results_keep_their_rows(folder):
    """Made by earlier versions: their rows stay one per arm (the folder names' arms), each name
    shown in full."""
    rows = len({p.parent.name.rsplit("-seed", 1)[0] for p in (RESULTS / folder).glob("*/*/summary.json")})
    assert rows >= 3
    found = summary_rows(study(load_runs([RESULTS / folder])[0]))
    assert len(found) == rows and all(" (" not in r["policy"] for r in found)
    assert len({policy_label(r["policy"]) for r in found}) == rows


def test_the_report_table_fits_100_columns_and_names_every_row_in_full(tmp_path):
    """Five seeds of long-named arms and wide numbers; nothing cut short, no number split."""
    for seed in range(5):
        run(tmp_path / "r", "regular", seed, 70.0 + seed * 1.37)
        for pct, folder in ((10, "a"), (20, "b")):
            run(tmp_path / folder, "random", seed, 69.0 - seed * 0.91, (2,), arm=f"random-every-{pct}")
        run(tmp_path / "i", "infobatch", seed, 61.0 + seed, (2,))
        run(tmp_path / "j", "infobatch", seed, 50.0 - seed, (2,), **{"prune.infobatch_rescale": False})
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "o"), "--no-plots"])
    assert result.exit_code == 0, result.output
    table = result.output.split("n: seeds; mean±std")[0].splitlines()
    assert max(cell_len(line) for line in table) <= 100
    assert "…" not in result.output and "random-every-10 " in result.output and "random-every-20 " in result.output
    rows = [line for line in table if line.strip().startswith(("regular", "random", "infobatch"))]
    assert len(rows) == 5 and all(line.count("±") >= 3 for line in rows)  # numbers whole, on one line
    assert any(line.strip() == "(infobatch_rescale off)" for line in table)  # a long name wraps, never cut
    assert "5 rows (runs that share every setting but the seed) from 25 runs" in result.output


def test_a_copied_run_folder_is_left_out_as_a_duplicate_not_counted_twice(tmp_path):
    import shutil

    from fineprune_cli.analysis.render.report import write_report

    for seed in range(2):
        run(tmp_path / "a", "regular", seed, 70.0 + seed)
        run(tmp_path / "a", "fine", seed, 69.0, (2,))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    report = write_report([tmp_path / "a", tmp_path / "b"], tmp_path / "o", with_plots=False)
    assert len(report.runs) == 4 and len(report.problems) == 4
    assert {p.status for p in report.problems} == {"duplicate"}
    assert all(
        str(p.path).startswith(str(tmp_path / "b")) and "an identical record of the run in" in p.reason
        for p in report.problems
    )
    assert len((tmp_path / "o" / "runs.csv").read_text().splitlines()) == 1 + 4


def test_two_image_folders_are_two_rows(tmp_path):
    """The data's folder is a setting: without it two unlabelled image folders would merge."""
    run(tmp_path / "a", "regular", 0, 70.0, **{"data.data_dir": "/data/a"})
    run(tmp_path / "b", "regular", 0, 60.0, **{"data.data_dir": "/data/b"})
    rows = summary_rows(study(load_runs([tmp_path])[0]))
    assert sorted(r["policy"] for r in rows) == ["regular (data_dir /data/a)", "regular (data_dir /data/b)"]


def test_the_console_table_and_table_2_print_the_same_interval(tmp_path):
    """Differences 0 and 0.265356 give the 90% interval [-0.705018, +0.970374] (t(0.95, 1) =
    6.3138). Rounded to 4 decimals first (-0.705, just below in binary) the console table would
    print -0.70 where Table 2 prints -0.71. Catches: summary rows rounded before the console
    formats them."""
    for seed, diff in enumerate((0.0, 0.265356)):
        run(tmp_path, "regular", seed, 70.0)
        run(tmp_path, "fine", seed, 70.0 + diff, (2,))
    row = rows_of(tmp_path)["fine"]
    assert row["d_final_ci90_low"] == pytest.approx(-0.705018, abs=1e-6)  # unrounded
    assert csv_cells(row)[list(row).index("d_final_ci90_low")] == -0.705  # summary.csv: 4 decimals
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert "+0.13 [-0.71,+0.97]" in result.output  # the console table
    assert "+0.13 [-0.71, +0.97] pt" in (tmp_path / "report" / "table2_accuracy.md").read_text()
    assert "-0.70" not in result.output


def test_rows_are_named_frontier_shorter_or_pruned_by_their_arm():
    """A row's arm decides what it is, whatever settings follow its name."""
    from fineprune_cli.analysis.group.groups import is_frontier, is_shorter, pruned_policies

    assert is_shorter("shorter-30") and is_shorter("shorter-30 (epochs 7)") and not is_shorter("regular")
    assert is_frontier("random-every-20 (window 3)") and not is_frontier("random") and not is_frontier("shorter-30")
    assert pruned_policies(dict.fromkeys(["regular", "fine", "shorter-30"])) == ["fine", "shorter-30"]


def test_a_shorter_arm_of_a_recipe_that_cannot_be_shortened_is_its_own_row(tmp_path):
    """Regular's milestones 1,2 at 50% both land on epoch 1 (shorter_schedule refuses them): no
    shorter-50 follows from that recipe, so a shorter-50 run is never its 'fewer epochs'."""
    run(tmp_path, "regular", 0, 70.0, **{"train.epochs": 10, "train.milestones": [1, 2]})
    run(
        tmp_path,
        "regular",
        0,
        69.0,
        arm="shorter-50",
        **{"train.epochs": 5, "train.milestones": [1], "train.warmup_epochs": 0.5},
    )
    groups = group(load_runs([tmp_path])[0])
    assert len(groups) == 2
    own = next(c for c in groups if c.variant)
    assert own.variant == "no regular run whose schedule shorter-50 scales"


@pytest.mark.parametrize(
    "settings",
    [
        {"train.epochs": 5, "train.milestones": [2, 3], "train.warmup_epochs": 0.5},  # a milestone short
        {"train.epochs": 5, "train.milestones": [2, 3, 4], "train.warmup_epochs": 1.0},  # warm-up unscaled
        {"train.epochs": 6, "train.milestones": [2, 3, 4], "train.warmup_epochs": 0.5},  # one epoch more
    ],
)
def test_a_shorter_arm_must_follow_regulars_schedule_in_epochs_milestones_and_warm_up(tmp_path, settings):
    """Regular: 10 epochs, milestones 3,6,8, warm-up 1.0; its shorter-50 is 5 epochs, 2,3,4, 0.5.
    An arm that matches in all but one of the three is another recipe's: its own context."""
    run(tmp_path, "regular", 0, 70.0, **{"train.epochs": 10, "train.milestones": [3, 6, 8]})
    run(tmp_path, "regular", 0, 69.0, arm="shorter-50", **settings)
    assert len(group(load_runs([tmp_path])[0])) == 2


@pytest.mark.parametrize(
    "regular_warmup, arm_warmup, paired_",
    [
        (5.0, 2.53, True),  # 2.5 expected; 0.03 off is within 1% of 5 (0.05)
        (0.5, 0.258, True),  # 0.25 expected; 0.008 off is within 0.01 (1% of at least one epoch)
        (1.0, 0.515, False),  # 0.5 expected; 0.015 off is beyond 0.01
    ],
)
def test_a_shorter_arms_warm_up_is_matched_within_one_percent_of_regulars_or_of_one_epoch(
    tmp_path, regular_warmup, arm_warmup, paired_
):
    """The warm-up tolerance: 1% of regular's warm-up, and never below 1% of one epoch."""
    run(
        tmp_path,
        "regular",
        0,
        70.0,
        **{"train.epochs": 10, "train.milestones": [], "train.warmup_epochs": regular_warmup},
    )
    run(
        tmp_path,
        "regular",
        0,
        69.0,
        arm="shorter-50",
        **{"train.epochs": 5, "train.milestones": [], "train.warmup_epochs": arm_warmup},
    )
    assert (len(group(load_runs([tmp_path])[0])) == 1) == paired_

"""A shorter arm's learning rate against regular's compressed to its epochs (analysis/group/compression.py,
issue 48): a cosine with a fixed T_max is named beside each decision that reads the arm, in
index.md and the terminal; a schedule that follows the epochs is not, whatever the rounding of its
milestones; runs that log no lr are said not to be checked."""

import math
import random
from pathlib import Path

import pytest

from factories import make_run
from fineprune_cli.analysis.group.compression import compression, logged, mismatch
from fineprune_cli.analysis.group.groups import group
from fineprune_cli.analysis.read.runs import load_runs
from fineprune_cli.analysis.render.report import write_report
from fineprune_cli.arms import shorter_schedule
from fineprune_cli.cli import views

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def cosine(epochs, t_max, after_step=False, lr=0.1):
    """CosineAnnealingLR stepped once an epoch, its lr logged before the step (or after it)."""
    return [lr / 2 * (1 + math.cos(math.pi * (e - 1 + after_step) / t_max)) for e in range(1, epochs + 1)]


def steps(epochs, milestones, lr=0.1, gamma=0.2):
    """MultiStepLR: milestone m decays the epochs after it."""
    return [lr * gamma ** sum(e > m for m in milestones) for e in range(1, epochs + 1)]


def warm(epochs, warmup, lr=0.1):
    """A linear warm-up over `warmup` epochs, then constant."""
    return [lr * min(1.0, e / warmup) for e in range(1, epochs + 1)]


def short(epochs, budget):
    return shorter_schedule(epochs, [], 0.0, budget)[0]


@pytest.mark.parametrize("after_step", [False, True])
def test_a_cosine_whose_t_max_follows_the_epochs_is_compressed(after_step):
    """Every length from 2 to 200 epochs at every budget, lr logged before or after the step.
    Catches: regular's epoch read at j·E/E' with no tolerance (between two epochs of a cosine)."""
    for epochs in range(2, 201):
        for budget in BUDGETS:
            n = short(epochs, budget)
            if n < epochs:
                assert mismatch(cosine(epochs, epochs, after_step), cosine(n, n, after_step)) is None, (epochs, n)


@pytest.mark.parametrize(
    "epochs, t_max, budget",
    [
        (200, 200, 0.3),  # kuangliu's pytorch-cifar: T_max=200, the arm stops at 140 epochs
        (200, 200, 0.1),
        (20, 20, 0.5),
        (12, 12, 0.15),  # 10 epochs: two short of regular's
        (30, 200, 0.5),  # T_max fixed longer than either run
    ],
)
def test_a_cosine_with_a_fixed_t_max_is_not(epochs, t_max, budget):
    n = short(epochs, budget)
    found = mismatch(cosine(epochs, t_max), cosine(n, t_max))
    assert found is not None and found.epochs == n
    assert found.lr > found.high  # the arm stopped early, at a larger lr than regular's there
    assert f"epoch {found.epoch} of {n} at lr" in found.text()


def test_step_milestones_compressed_as_compare_does_pass():
    """2,000 random recipes, their milestones compressed by `shorter_schedule` (rounded half up,
    those at the arm's end dropped). Catches a tolerance of one of regular's epochs: 200 epochs at
    0.9 put milestone 64 at 6 of 20, four of regular's epochs early."""
    rng = random.Random(0)
    checked = 0
    for _ in range(2000):
        epochs = rng.randint(3, 200)
        milestones = sorted(rng.sample(range(1, epochs), min(rng.randint(0, 4), epochs - 1)))
        budget = rng.choice(BUDGETS)
        try:
            n, scaled, _ = shorter_schedule(epochs, milestones, 0.0, budget)
        except ValueError:  # milestones that collide when compressed: compare refuses the arm
            continue
        if n < epochs:
            checked += 1
            assert mismatch(steps(epochs, milestones), steps(n, scaled)) is None, (epochs, milestones, budget)
    assert checked > 1500
    assert mismatch(steps(200, [64]), steps(20, [6])) is None


@pytest.mark.parametrize("milestone, passes", [(5, True), (4, True), (6, True), (3, False), (7, False)])
def test_a_step_one_of_the_arms_epochs_off_passes_two_fail(milestone, passes):
    """Regular: 20 epochs, milestone 10; the arm: 10 epochs, compressed milestone 5. Rounding moves
    it by less than one of the arm's epochs; two are another schedule. Catches a window twice as
    wide (3 and 7 would pass) or half as wide (4 and 6 would fail)."""
    assert (mismatch(steps(20, [10]), steps(10, [milestone])) is None) == passes


def test_a_warm_up_scaled_or_kept_whole_passes_and_a_longer_one_does_not():
    """A warm-up held fixed is training fewer epochs as practitioners do (issue 55; timm's own
    scheduler: tests/test_warmup.py); one longer than regular's is another schedule."""
    assert mismatch(warm(20, 8), warm(10, 4)) is None
    assert mismatch(warm(200, 5), warm(140, 3.5)) is None
    assert mismatch(warm(20, 8), warm(10, 8)) is None
    found = mismatch(warm(20, 8), warm(10, 10))  # still warming up where regular has long reached its lr
    assert found is not None and found.lr < found.low


def test_constant_noise_and_a_decay_per_epoch():
    assert mismatch([0.1] * 30, [0.1] * 21) is None  # a constant lr is its own compression
    noisy = [lr * (1 + 1e-9 * (-1) ** e) for e, lr in enumerate(cosine(21, 21))]
    assert mismatch(cosine(30, 30), noisy) is None  # float noise is no other schedule
    # ExponentialLR with regular's gamma: the arm ends at a larger lr; gamma ** (30 / 15) would not
    assert mismatch([0.1 * 0.9**e for e in range(30)], [0.1 * 0.9**e for e in range(15)]) is not None
    assert mismatch([0.1 * 0.9**e for e in range(30)], [0.1 * 0.81**e for e in range(15)]) is None


def test_an_lr_of_zero_every_epoch_is_one_never_logged():
    assert not logged([0.0] * 5) and logged([0.0, 0.1, 0.1])  # a warm-up from 0 is logged


# Reports: regular (10 epochs), shorter-10 (9, compressed) and shorter-30 (7, a cosine with T_max 10);
# ucb at 10% reads shorter-10, egreedy at 30% reads shorter-30.
ARMS = {"shorter-10": 9, "shorter-30": 7}


def recipe(budget=0.0):
    """The 10-epoch recipe's settings as `compare --shorter` scales them (a shorter arm meets only
    the regular whose schedule it scales)."""
    return dict(zip(("train.epochs", "train.milestones", "train.warmup_epochs"), shorter_schedule(10, [], 1.0, budget)))


def _runs(root, fixed=("shorter-30",), lr=cosine):
    for seed in range(3):
        make_run(root, "lenet", "regular", seed, 10.0, [60.0 + e for e in range(9)] + [80.0 + seed],
                 settings=recipe(), rows={e: {"lr": v} for e, v in enumerate(lr(10, 10), 1)})  # fmt: skip
        for name, epochs in ARMS.items():
            curve = lr(epochs, 10 if name in fixed else epochs)
            make_run(root, "lenet", "regular", seed, epochs, [60.0 + e for e in range(epochs - 1)] + [78.0 - seed],
                     arm=name, settings=recipe(1 - epochs / 10),
                     rows={e: {"lr": v} for e, v in enumerate(curve, 1)})  # fmt: skip
        for policy, kept, pruned in (("ucb", 50, (2, 3)), ("egreedy", 70, tuple(range(1, 11)))):
            make_run(root, "lenet", policy, seed, 9.0, [60.0 + e for e in range(9)] + [79.0 + seed], kept=kept,
                     skipped_epochs=pruned, settings=recipe(),
                     rows={e: {"lr": v} for e, v in enumerate(lr(10, 10), 1)})  # fmt: skip
    return root


def _chains(report):
    """Each decision's chain in index.md, by the policy's label."""
    decisions = (report.out / "index.md").read_text().split("## Decisions", 1)[1].split("\n## ", 1)[0]
    chains = {}
    for block in decisions.split("\n- **")[1:]:
        chains[block.split("**", 1)[0]] = block
    return chains


def test_the_arm_is_named_beside_each_decision_that_reads_it(tmp_path):
    report = write_report([_runs(tmp_path / "runs")], tmp_path / "report", with_plots=False)
    states = {a.arm: a.state for a in report.study.compression}
    assert states == {"shorter-10": "compressed", "shorter-30": "not compressed"}
    (off,) = [a for a in report.study.compression if a.off]
    assert sorted(off.off) == [0, 1, 2] and off.off[0].epoch > 4  # the arm ends high on the curve
    chains = _chains(report)
    assert {"UCB", "epsilon-greedy"} <= set(chains), chains.keys()
    assert "C(p) reads shorter-30, which did not train regular's learning-rate schedule" in chains["epsilon-greedy"]
    assert "T_max = epochs" in chains["epsilon-greedy"]
    assert "shorter-30" not in chains["UCB"] and "learning-rate" not in chains["UCB"]  # its C(p) is shorter-10
    index = (report.out / "index.md").read_text()
    section = index.split("## Learning-rate schedules\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "1 shorter arm did not train" in section
        and "- lenet on CIFAR-10 (JPEG q75), shorter-30, seed 0: epoch" in section
    )
    assert "off in seeds 0, 1, 2" in section and "shorter-10" not in section


def test_the_terminal_says_it_after_the_decisions(tmp_path, capsys):
    report = write_report([_runs(tmp_path / "runs")], tmp_path / "report", with_plots=False)
    views.show_report(report, as_json=False)
    out = " ".join(capsys.readouterr().out.split())
    assert "C(p) reads shorter-30, which did not train" in out
    assert "1 shorter arm did not train regular's learning-rate schedule" in out
    views.show_compare([], compressed=report.study.compression)  # compare's, after its decisions
    out = " ".join(capsys.readouterr().out.split())
    assert "1 shorter arm did not train" in out and "shorter-30, seed 0: epoch" in out


def test_schedules_that_follow_the_epochs_say_nothing(tmp_path):
    report = write_report([_runs(tmp_path / "runs", fixed=())], tmp_path / "report", with_plots=False)
    assert {a.state for a in report.study.compression} == {"compressed"}
    index = (report.out / "index.md").read_text()
    assert "Learning-rate schedules" not in index and "learning-rate" not in index


def test_runs_that_log_no_lr_are_said_not_to_be_checked(tmp_path):
    report = write_report([_runs(tmp_path / "runs", lr=lambda n, t: [0.0] * n)], tmp_path / "report",
                          with_plots=False)  # fmt: skip
    assert {a.state for a in report.study.compression} == {"not checked"}
    index = (report.out / "index.md").read_text()
    assert "lenet on CIFAR-10 (JPEG q75), shorter-30: its schedule was not checked, as its runs, or regular's" in index
    assert "C(p) reads shorter-30, whose schedule was not checked" in _chains(report)["epsilon-greedy"]


def test_the_built_in_trainers_shorter_arms_pass():
    """The committed runs of fineprune's own trainer: 23 epochs, milestones 7,14,19 (shorter-20:
    18 epochs, 6,11,15) and 200 epochs, 60,120,160, at 10% to 30% fewer. Catches a check stricter
    than the rounding `shorter_schedule` makes."""
    folders = [ROOT / "results/demo/runs", ROOT / "results/cifar10-jpeg-lenet-cpu/runs/lenet-folder"]
    runs = [r for r in load_runs(folders)[0] if r.policy.startswith(("regular", "shorter-"))]
    found = compression(group(runs))
    assert {a.arm for a in found} >= {"shorter-10", "shorter-20", "shorter-30"}
    assert {a.state for a in found} == {"compressed"} and all(len(a.checked) == 3 for a in found)

"""`compare --script ... --shorter` end to end over the training libraries users run (issue 55),
to the report's decisions: their C(p) must be read from the shorter arms, training fewer epochs
of the script's own schedule. Every `--script` user's shorter arms were trained and then filed
apart, since a script run's config.yaml records no warm-up and the report filled in the trainer's
1.0; and timm's standard recipe (a whole-epoch warm-up) was refused. Three scripts: one of timm's
real parts (tests/scripts/timm_train.py: its scheduler factory with warm-up and cool-down, its
loader, its losses, mixup), a Lightning Trainer (tests/scripts/lightning_train.py: a warm-up
held fixed, then a cosine), and the shipped examples/own_script.py (MultiStepLR)."""

import csv
import math
import shlex
import sys
from pathlib import Path

import pytest

from conftest import invoke

ROOT = Path(__file__).resolve().parents[1]
# each run of a script is its own process, forked from a server that imported torch, timm and
# Lightning once (tests/forkrun): a new interpreter spends 4-7 s of CPU importing them, ~100 s
# over this file's 27 runs; tests/test_script_arms.py runs the shipped example as `python SCRIPT`
PYTHON = f"{shlex.quote(sys.executable)} {ROOT / 'tests/forkrun'}"
PRELOAD = ["torch", "torch._dynamo", "fineprune_cli.harness", "PIL.Image", "timm", "timm.data", "timm.loss",
           "timm.optim", "timm.scheduler", "lightning", "fineprune.integrations.lightning"]  # fmt: skip
TIMM = f"{PYTHON} {ROOT / 'tests/scripts/timm_train.py'} --seed {{seed}} --epochs {{epochs}}"
LIGHTNING = f"{PYTHON} {ROOT / 'tests/scripts/lightning_train.py'} --seed {{seed}} --epochs {{epochs}}"
OWN = f"{PYTHON} {ROOT / 'examples/own_script.py'} --seed {{seed}} --epochs {{epochs}} --milestones {{milestones}}"


@pytest.fixture(scope="session")
def preloaded(_own_cache_folder):
    from fineprune_cli.drivers.executors.forkclient import ForkServer

    with ForkServer(PRELOAD) as server:
        yield server.address


@pytest.fixture
def here(tmp_path, monkeypatch, preloaded):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # each script run one thread: CI's two cores, two workers
    monkeypatch.setenv("FINEPRUNE_TEST_FORK", preloaded)
    return tmp_path


def compare(script, *flags, out="cmp"):
    return invoke(["compare", "--script", script, *flags, "--out", out])


def decisions(index: str) -> dict[str, str]:
    """The decisions table of index.md: each policy's C(p) column."""
    section = index.split("## Decisions", 1)[1].split("\n- **", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    header = [c.strip() for c in rows[0]]
    return {r[0].strip(): r[header.index("C(p)")].strip() for r in rows[1:]}


def compare_and_report(script, epochs, milestones):
    """regular and fine with shorter arms at 10% and 20% in seeds 0, 1; the report's index.md."""
    flags = ["--epochs", str(epochs), "--milestones", milestones, "--policies", "regular,fine"]
    done = compare(script, *flags, "--shorter", "0.1,0.2", "--seeds", "0,1")
    assert done.exit_code == 0, done.output
    report = invoke(["report", "cmp", "--out", "rep"])
    assert report.exit_code == 0, report.output
    return Path("rep/index.md").read_text(), " ".join(report.output.split())


def read_c_p_from_the_shorter_arms(index: str, said: str) -> None:
    assert decisions(index) == {"fine-pruning": "fewer epochs"}, decisions(index)
    assert "Against C(p), training fewer epochs at the same budget (arms shorter-" in index
    assert "no regular run whose schedule" not in index and "warmup_epochs" not in index
    assert "## Learning-rate schedules" not in index  # the arms trained the schedule compressed: nothing to name
    assert "compare --shorter" not in index  # no advice to add the arms it was given


def rows(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # 8 runs of a script importing timm, then 3 that compare refuses
def test_timms_scheduler_loader_and_losses_under_compare_read_c_p_from_the_shorter_arms(here):
    """A warm-up of 2 epochs held fixed and a 1-epoch cool-down folded into --epochs; mixup with
    label smoothing, per-sample losses checked against timm's own; timm's train loader rebuilt
    around the run's sampler with drop_last, as timm's is."""
    script = f"{TIMM} --warmup-epochs 2 --cooldown-epochs 1"
    index, said = compare_and_report(script, 8, "")
    read_c_p_from_the_shorter_arms(index, said)
    runs = here / "cmp" / "timm_train-data"
    for arm, epochs in (("regular", 8), ("shorter-10", 7), ("shorter-20", 6)):
        trained = rows(runs / f"{arm}-seed0")
        # drop_last leaves 250 % 32 = 26 samples out of each epoch: the sampler counts what trained
        assert [int(r["samples"]) for r in trained] == [224] * epochs and {r["pruned"] for r in trained} == {"0"}
        assert all(math.isfinite(float(r["cpu_seconds"])) for r in trained)  # a CPU run records its CPU time
    assert min(int(r["samples"]) for r in rows(runs / "fine-seed0")) < 224
    summary = {r["policy"]: r for r in csv.DictReader(open(here / "rep" / "summary.csv"))}
    assert float(summary["regular"]["skipped_pct_mean"]) == 0  # drop_last is no one's pruning
    assert float(summary["shorter-10"]["skipped_pct_mean"]) == pytest.approx(12.5)
    # the same recipe, its cosine's length fixed at regular's 12 epochs: not fewer epochs of it
    fixed = compare(f"{script} --length 12", "--epochs", "12", "--milestones", "", "--policies", "regular",
                    "--shorter", "0.5", "--seeds", "0", out="fixed")  # fmt: skip
    told = " ".join(fixed.output.split())
    assert fixed.exit_code == 2 and "is not regular's compressed to the arm's 6 epochs" in told, fixed.output
    # timm's train.py trains --epochs and then the cool-down: told what to do about it
    cool = compare(f"{script} --cooldown-as-timm", "--epochs", "3", "--milestones", "", "--policies", "regular",
                   "--seeds", "0", out="cool")  # fmt: skip
    assert cool.exit_code != 0
    told = " ".join(cool.output.split())
    assert "epoch 4 recorded, but this run trains 3 epochs" in told and "fold the cool-down into {epochs}" in told


@pytest.mark.slow  # 8 runs of a script importing Lightning
def test_a_lightning_trainer_script_under_compare_reads_c_p_from_the_shorter_arms(here):
    index, said = compare_and_report(LIGHTNING, 8, "")
    read_c_p_from_the_shorter_arms(index, said)
    lrs = [float(r["lr"]) for r in rows(here / "cmp" / "lightning_train-data" / "shorter-20-seed1")]
    assert lrs[0] < lrs[1] == max(lrs) and lrs[-1] < 0.01  # its 1-epoch warm-up held, its cosine to the end


@pytest.mark.slow  # 8 runs of the shipped example
def test_the_shipped_example_under_compare_reads_c_p_from_the_shorter_arms(here):
    index, said = compare_and_report(OWN, 8, "4,6")
    read_c_p_from_the_shorter_arms(index, said)

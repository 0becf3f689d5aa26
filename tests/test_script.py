"""`compare --script`: the user's own training script as the arms of a comparison, with the same
controls, looks, executors and decisions as fineprune's trainer (docs/howto/own-script.md)."""

import csv
import difflib
import shlex
import sys
from pathlib import Path

import pytest
from test_slurm import slurm_here  # noqa: F401 (a fixture: the stand-in Slurm on the PATH)

from conftest import invoke, summary_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own_script.py"
ARGS = f"{EXAMPLE} --seed {{seed}} --epochs {{epochs}} --milestones {{milestones}}"
COMMAND = f"{shlex.quote(sys.executable)} {ARGS}"
MATRIX = ["--script", COMMAND, "--epochs", "6", "--milestones", "3,5", "--policies", "regular,fine,random"]


def _samples(run: Path) -> list[int]:
    with open(run / "metrics.csv") as f:
        return [int(r["samples"]) for r in csv.DictReader(f)]


def _decisions(report: Path) -> list[str]:
    """The policies named in the report's decisions table."""
    lines = (report / "index.md").read_text().split("## Decisions", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| policy"))
    table = [line for line in lines[start + 2 :] if line.startswith("|")]
    table = table[: next((i for i, line in enumerate(lines[start + 2 :]) if not line.startswith("|")), len(table))]
    return [line.split("|")[1].strip() for line in table]


@pytest.mark.slow  # 12 script runs, each a process forked with torch imported
def test_compare_script_runs_every_arm_with_its_controls_under_jobs_and_looks_and_decides(
    tmp_path, monkeypatch, preloaded_python
):
    """Every arm (a policy, its random control, a shorter schedule) of the user's script, through
    `--jobs 2` and planned looks, then `report`: one comparison for all of it, since each script
    run is a process start of its own (the serial executor runs scripts in tests/test_harness.py
    and the hostile script cases). The script runs forked (conftest's preloaded_python), whole;
    the through-Slurm test below starts it as `python SCRIPT`."""
    monkeypatch.chdir(tmp_path)
    matrix = [*MATRIX[:1], f"{preloaded_python} {ARGS}", *MATRIX[2:]]
    argv = ["compare", *matrix, "--shorter", "0.1", "--until-decided", "--looks", "2,3", "--jobs", "2", "--out", "cmp"]
    done = invoke(argv)
    assert done.exit_code == 0, done.output
    runs = tmp_path / "cmp" / "own_script-data"
    status = {p.name: summary_of(p)["status"] for p in runs.iterdir()}
    assert set(status.values()) == {"complete"} and (tmp_path / "cmp" / "looks.json").exists()
    seeds = sorted({int(name.rpartition("-seed")[2]) for name in status})
    assert seeds in ([0, 1], [0, 1, 2])  # look 1's two seeds; look 2's third unless look 1 decided
    for seed in seeds:
        assert {f"{arm}-seed{seed}" for arm in ("regular", "fine", "random")} <= set(status)
        fine, random = _samples(runs / f"fine-seed{seed}"), _samples(runs / f"random-seed{seed}")
        assert fine == random and min(fine) < 1600  # the control skips what the policy skips, epoch by epoch
    for seed in (0, 1):  # look 1: later looks train only what an open decision reads (C(p) is random's)
        shorter = summary_of(runs / f"shorter-10-seed{seed}")
        assert (shorter["epochs"], shorter["epochs_completed"], shorter["seed"]) == (5, 5, seed)
        # its schedule compressed as built-in arms': 3,5 x 0.9 -> 3 (and 5, the last epoch, dropped)
        assert shorter["command"].endswith("--epochs 5 --milestones 3")
    report = invoke(["report", "cmp", "--out", "rep"])
    assert report.exit_code == 0, report.output
    assert _decisions(tmp_path / "rep") == ["fine-pruning"]  # one decision per policy; random is its control


@pytest.mark.slow
def test_compare_script_through_the_stand_in_slurm(tmp_path, monkeypatch, slurm_here):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    done = invoke(["compare", *MATRIX, "--seeds", "0", "--executor", "slurm", "--out", "cmp"])
    assert done.exit_code == 0, done.output
    assert "sbatch" in (slurm_here / "calls.log").read_text()
    for arm in ("regular", "fine", "random"):
        assert summary_of(tmp_path / "cmp" / "own_script-data" / f"{arm}-seed0")["status"] == "complete"


def _code(path: Path) -> list[str]:
    """A script's lines after its module docstring (which says what the script is for)."""
    text = path.read_text()
    return text[text.index('"""', 3) + 3 :].splitlines()


def test_a_script_written_as_popular_cifar_scripts_are_is_harnessed_in_a_few_lines():
    plain, harnessed = (
        _code(ROOT / "examples" / "cifar_train.py"),
        _code(ROOT / "examples" / "cifar_train_harnessed.py"),
    )
    diff = [line for line in difflib.unified_diff(plain, harnessed, lineterm="", n=0) if line[:1] in "+-"]
    changed = [line for line in diff if not line.startswith(("+++", "---"))]
    assert sum(line.startswith("+") for line in changed) <= 15, "\n".join(changed)
    assert "fineprune.start(" in "\n".join(harnessed) and "fineprune" not in "\n".join(plain)


def _image_folder(root: Path) -> Path:
    """A tiny CIFAR-shaped image folder of JPEGs (3 classes, 16 + 4 images each): the GPU dry run's."""
    sys.path[:0] = [str(ROOT / "experiments" / "gpu"), str(ROOT / "experiments" / "bench")]
    try:
        from reproduce import tiny_images
    finally:
        del sys.path[:2]
    return tiny_images(root, classes=3, per_class=(16, 4))


@pytest.mark.slow  # two script runs, each importing torch and torchvision
def test_the_harnessed_popular_style_script_runs_under_compare_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = _image_folder(tmp_path / "images")
    script = ROOT / "examples" / "cifar_train_harnessed.py"
    command = f"{shlex.quote(sys.executable)} {script} --data {data} --seed {{seed}} --epochs {{epochs}} --milestones {{milestones}}"
    done = invoke(["compare", "--script", command, "--epochs", "3", "--milestones", "2", "--window", "2",
                   "--start", "1", "--policies", "regular,fine", "--seeds", "0", "--out", "cmp"])  # fmt: skip
    assert done.exit_code == 0, done.output
    for arm in ("regular", "fine"):
        summary = summary_of(tmp_path / "cmp" / "cifar_train_harnessed-data" / f"{arm}-seed0")
        assert summary["status"] == "complete" and summary["data"]["train"].startswith("48 files, content")


def test_the_how_to_page_shows_the_example_and_the_diff_as_they_are():
    """docs/howto/own-script.md quotes both; an edit to a script must reach the page."""
    page = (ROOT / "docs" / "howto" / "own-script.md").read_text()
    assert EXAMPLE.read_text().rstrip() in page
    plain, harnessed = (
        _code(ROOT / "examples" / "cifar_train.py"),
        _code(ROOT / "examples" / "cifar_train_harnessed.py"),
    )
    for line in difflib.unified_diff(plain, harnessed, lineterm="", n=0):
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            assert line in page.splitlines(), line

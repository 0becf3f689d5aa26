"""The command line's conventions: --version, help that is quick and shows examples, --dry-run
and --print-config, --name, and `auto` augmentation of any RGB size."""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import TINY, invoke

HELP_CPU_S = 2.0  # processor seconds: help alone about 0.7, with torch imported over 3.5


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize("args", [[], ["train"], ["compare"]])
def test_help_imports_no_torch(args, tmp_path):
    """Rendering --help must not import torch: that import is what made help take 6 s."""
    code = (
        "import sys\nfrom fineprune_cli.cli import app\n"
        f"try:\n    app({[*args, '--help']!r})\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout, done.stdout[-300:]


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["train", "--help"]])
def test_help_takes_little_processor_time(args, tmp_path):
    """Processor seconds, not wall seconds: a loaded machine stretches the wall clock of a start
    (3.8 s once under a load of 7), not the work it does. Help costs about 0.7 s of CPU here;
    importing torch alone costs over 3 s."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "fineprune_cli", *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0 and "Usage" in done.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < HELP_CPU_S, f"fineprune {' '.join(args)} took {cpu:.2f} s of processor time"


def test_version_prints_package_and_torch_versions():
    import torch

    import fineprune_cli

    result = invoke(["--version"])
    assert result.exit_code == 0
    assert result.output.split() == [
        "fineprune",
        f"{fineprune_cli.__version__},",
        "torch",
        torch.__version__.split("+")[0],
    ]


@pytest.mark.parametrize("command", ["train", "compare", "report", "scale", "estimate", "models", "policies"])
def test_every_command_help_shows_examples(command):
    result = invoke([command, "--help"])
    assert result.exit_code == 0
    after = result.output.split("Examples:", 1)[-1]
    assert "Examples:" in result.output and f"fineprune {command}" in after


def test_required_options_are_marked():
    text = " ".join(invoke(["train", "--help"]).output.replace("│", " ").split())  # the panel's cell walls
    assert "[required: this flag or model.name in --config]" in text
    assert "[required: this flag or data.dataset in --config]" in text
    assert text.count("[required") == 2  # no other train option is


def test_train_and_scale_share_the_launch_flags():
    """Declared once: the same flags, types and help in both commands (their help had drifted)."""
    import typer

    from fineprune_cli.cli import app

    commands = typer.main.get_command(app).commands

    def launch(name):
        flags = ("nnodes", "node_rank", "rdzv_endpoint")
        return {
            p.name: (p.type_descriptor.annotation, p.opts, p.default, p.help)
            for p in commands[name].params
            if p.name in flags
        }

    assert launch("train") == launch("scale") and len(launch("train")) == 3


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


def _in(folder: Path, args: list) -> Any:
    old = os.getcwd()
    os.chdir(folder)
    try:
        return invoke(args)
    finally:
        os.chdir(old)


@pytest.fixture
def steady_probe(monkeypatch):
    """The dry run's probe replaced by a steady one: the figure is tests/test_dryrun.py's concern."""
    from fineprune_cli.drivers import dryrun
    from fineprune_cli.drivers.probe import Probe

    monkeypatch.setattr(dryrun, "probe", lambda *args: Probe([1e-3] * 5, [1e-4] * 5, 1, 128))


def test_train_dry_run_writes_nothing_and_lists_the_pruning_epochs(tmp_path, steady_probe):
    args = [
        "train",
        *TINY,
        "--epochs",
        "6",
        "--prune",
        "--window",
        "4",
        "--start",
        "2",
        "--block",
        "1",
        "--attenuation",
        "1",
        "--dry-run",
        "--json",
    ]
    result = _in(tmp_path, args)
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) == []  # no run folder, no results/, no cache
    dry = json.loads(result.output)
    (run,) = dry["runs"]
    # window 4, start 2, every epoch of a block: positions 2, 3 of each window -> epochs 2, 3, 6
    assert run["pruning_epochs"] == [2, 3, 6] and run["epochs"] == 6 and run["arm"] == "fine"
    assert run["images"] == round((6 - 3 * 0.3) * 200)  # three epochs train 70% of 200
    assert dry["config"]["train"]["epochs"] == 6 and dry["estimated_seconds"] > 0
    assert run["run_dir"].startswith("results/runs/") and run["run_dir"].endswith("-lenet-synthetic")


def test_train_dry_run_text_says_nothing_is_written(tmp_path):
    result = _in(tmp_path, ["train", *TINY, "--dry-run"])
    assert result.exit_code == 0, result.output
    # the real probe: an estimate, or on a machine whose speed changes while it times, why not
    assert "nothing is written" in result.output
    assert "estimated time" in result.output or "no time estimate" in result.output
    assert _files(tmp_path) == []


def test_compare_dry_run_lists_arms_times_seeds_and_writes_nothing(tmp_path):
    args = [
        "compare",
        *TINY,
        "--seeds",
        "3,4",
        "--policies",
        "regular,fine",
        "--frontier",
        "0.2",
        "--shorter",
        "0.5",
        "--out",
        str(tmp_path / "cmp"),
        "--dry-run",
        "--json",
    ]
    result = _in(tmp_path, args)
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) == []
    runs = json.loads(result.output)["runs"]
    assert [(r["arm"], r["seed"]) for r in runs] == [
        (arm, seed) for seed in (3, 4) for arm in ("regular", "fine", "random-every-20", "shorter-50")
    ]
    by_arm = {r["arm"]: r for r in runs}
    assert by_arm["random-every-20"]["pruning_epochs"] == [1, 2]  # the frontier prunes every epoch
    assert by_arm["shorter-50"]["epochs"] == 1 and by_arm["shorter-50"]["pruning_epochs"] == []
    assert by_arm["regular"]["images"] == 2 * 200


def test_print_config_is_yaml_that_config_reads_back(tmp_path):
    first = _in(tmp_path, ["train", *TINY, "--lr", "0.05", "--print-config"])
    assert first.exit_code == 0, first.output
    assert _files(tmp_path) == []
    printed = yaml.safe_load(first.output)
    assert printed["train"]["lr"] == 0.05 and printed["model"]["name"] == "lenet"
    (tmp_path / "back.yaml").write_text(first.output)
    again = _in(tmp_path, ["train", "--config", "back.yaml", "--print-config"])
    assert again.exit_code == 0 and yaml.safe_load(again.output) == printed


def test_compare_print_config_holds_the_matrix(tmp_path):
    result = _in(tmp_path, ["compare", *TINY, "--seeds", "0,1", "--print-config"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert printed["compare"]["seeds"] == [0, 1] and printed["compare"]["policies"] == ["regular", "fine", "random"]


def test_name_sets_the_run_folder(tmp_path):
    result = _in(tmp_path, ["train", *TINY, "--epochs", "1", "--name", "my-run_1", "--json"])
    assert result.exit_code == 0, result.output
    (folder,) = (tmp_path / "results" / "runs").iterdir()
    stamp, _, name = folder.name.partition("-")
    assert name.split("-", 1)[1] == "my-run_1" and stamp.isdigit()  # <YYYYmmdd>-<HHMMSS>-NAME
    assert json.loads(result.output)["run_dir"] == str(Path("results/runs") / folder.name)
    assert (folder / "summary.json").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "a/b"], "--name must be a folder name"),
        (["--name", ".."], "--name must be a folder name"),
        (["--name", "x", "--out", "elsewhere"], "--name and --out both name the run folder"),
    ],
)
def test_name_refusals_are_one_line(tmp_path, args, message):
    result = _in(tmp_path, ["train", *TINY, *args])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and _files(tmp_path) == []


def _rgb_folder(root: Path, size: int) -> Path:
    from PIL import Image

    for split in ("train", "test"):
        for label, colour in (("a", (200, 30, 30)), ("b", (30, 30, 200))):
            d = root / split / label
            d.mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (size, size), colour).save(d / f"{i}.png")
    return root


@pytest.mark.parametrize("size, pad", [(32, 4), (48, 6), (12, 1)])
def test_auto_augments_rgb_folders_of_any_size(tmp_path, size, pad):
    import torch

    from fineprune_cli.engine.inputs.stream import load_data
    from fineprune_cli.engine.setup.config import DataConfig

    d = DataConfig(dataset="folder", data_dir=str(_rgb_folder(tmp_path / "imgs", size)), loader="device")
    data, channels, _ = load_data(d, 0, torch.device("cpu"))
    assert channels == 3 and data.crop is not None
    assert data.crop.pad == pad and data.train_x.shape[-1] == size + 2 * pad


def test_auto_leaves_grey_images_alone():
    from fineprune_cli.engine.inputs.devicedata import wants_augment

    assert not wants_augment("auto", 1) and wants_augment("crop-flip", 1) and not wants_augment("none", 3)


def test_a_named_parallel_run_hands_its_processes_one_folder():
    """Each process must not name the folder again by its own start time."""
    from fineprune_cli.cli import conventions

    argv = ["train", "--name", "x", "-m", "lenet", "--name=y", "--epochs", "2"]
    assert conventions.without_name(argv, "results/runs/t-x") == [
        "train",
        "-m",
        "lenet",
        "--epochs",
        "2",
        "--out",
        "results/runs/t-x",
    ]


def test_every_help_example_parses():
    """Each example's flags exist on its command (nothing runs)."""
    import shlex

    import typer

    from fineprune_cli.cli import app
    from fineprune_cli.cli.conventions import EXAMPLES

    group = typer.main.get_command(app)
    lines = [line.strip() for text in EXAMPLES.values() for line in text.splitlines()[2:] if line.strip()]
    assert len(lines) >= 20
    for line in lines:
        argv = shlex.split(line, comments=True)[1:]
        argv = argv[: argv.index(">")] if ">" in argv else argv
        if argv[0] == "COMMAND":
            continue
        try:
            group.commands[argv[0]].make_context(argv[0], argv[1:])
        except typer.TyperException as exc:
            pytest.fail(f"help example: {line}: {exc.format_message()}")


def test_compare_dry_run_counts_finished_runs_out_of_the_time(tmp_path, steady_probe):
    args = ["compare", *TINY, "--epochs", "1", "--policies", "regular", "--out", str(tmp_path / "cmp")]
    assert _in(tmp_path, args).exit_code == 0
    before = _files(tmp_path)
    result = _in(tmp_path, [*args, "--seeds", "0,1", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    dry = json.loads(result.output)
    assert [(r["seed"], r["state"]) for r in dry["runs"]] == [(0, "complete"), (1, "new")]
    assert dry["estimated_seconds"] == dry["runs"][1]["seconds"] > 0  # seed 1 only
    assert _files(tmp_path) == before

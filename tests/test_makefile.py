"""The Makefile's experiment targets pass ARGS and DEVICE through and keep the committed results
(checked with `make -n`: the commands are printed, nothing runs)."""

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _clean_env(**extra: str) -> dict:
    """The environment without the variables under test, nor an outer make's (`make test
    DEVICE=cpu` hands DEVICE down through MAKEFLAGS)."""
    import os

    drop = ("DEVICE", "ARGS", "REFRESH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _commands(target: str, *assignments: str, env: dict | None = None) -> list[list[str]]:
    """The fineprune commands `make -n target` would run, split into words."""
    out = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), target, *assignments],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env() if env is None else env,
    ).stdout
    return [shlex.split(line)[1:] for line in out.splitlines() if line.split(" ", 1)[0].endswith("bin/fineprune")]


def test_reproduce_passes_args_and_device_through():
    (compare, report) = _commands("reproduce", "DEVICE=cpu", "ARGS=--seeds 0 --epochs 3")
    assert compare == [
        "compare",
        "--config",
        "experiments/paper.yaml",
        "--device",
        "cpu",
        "--seeds",
        "0",
        "--epochs",
        "3",
    ]
    assert report[:2] == ["report", "results/paper/runs"]


def test_device_from_the_environment_passes_too_and_nothing_when_unset():
    (compare, _) = _commands("reproduce")
    assert compare == ["compare", "--config", "experiments/paper.yaml"]  # the file's run.device decides
    (compare, _) = _commands("reproduce", env=_clean_env(DEVICE="cpu"))
    assert compare[-2:] == ["--device", "cpu"]


def test_demo_writes_to_an_ignored_folder_unless_refresh():
    (compare, report) = _commands("demo")
    assert compare[compare.index("--out") + 1] == "results/runs/demo/runs"
    assert report[:4] == ["report", "results/runs/demo/runs", "--out", "results/runs/demo"]
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "results/runs/demo/index.md"])
    assert ignored.returncode == 0, "results/runs/demo is not ignored by git"
    (compare, report) = _commands("demo", "REFRESH=1", "ARGS=--seeds 0,1")
    assert compare[compare.index("--out") + 1] == "results/demo/runs" and compare[-2:] == ["--seeds", "0,1"]
    assert report[:4] == ["report", "results/demo/runs", "--out", "results/demo"]


def _dry(target: str, *assignments: str) -> list[str]:
    return subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), target, *assignments],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env(),
    ).stdout.splitlines()


def test_demo_continues_shows_compare_and_prints_its_table_once():
    """Interrupted, `make demo` again reuses the finished runs (it deleted them first, issue 41);
    compare's output shows (its progress, looks and table), the report's copy of the table not."""
    lines = _dry("demo")
    assert not any(x.startswith("rm ") for x in lines)
    (compare,) = [x for x in lines if " compare " in x]
    assert "/dev/null" not in compare
    (report,) = [x for x in lines if " report " in x]
    assert report.rstrip().endswith("> /dev/null")
    assert any("idle machine" in x for x in lines)  # what saved % can be compared with
    for fresh in ("FRESH=1", "REFRESH=1"):
        assert any(x.startswith("rm -rf ") and x.endswith("/runs") for x in _dry("demo", fresh))


def test_setup_waits_for_another_apt_get():
    """Another apt-get holding the dpkg lock failed `make setup` at once (issue 41)."""
    text = (ROOT / "Makefile").read_text()
    calls = [line for line in text.splitlines() if "apt-get" in line and not line.lstrip().startswith("#")]
    assert calls and all("DPkg::Lock::Timeout=" in line for line in calls)


def test_cifar10_jpeg_without_the_shared_copy_says_where_it_must_be(tmp_path):
    """It ended in Python's "can't open file '../shared/data/unpack_cifar10_jpeg.py'"."""
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "cifar10-jpeg", f"CIFAR10_SHARED={tmp_path}", f"CIFAR10_JPEG={tmp_path}/out"],
        capture_output=True,
        text=True,
        env=_clean_env(),
    )
    assert done.returncode == 2
    said = done.stderr.splitlines()[0]
    assert (
        f"no cifar10-jpeg.npz and unpack_cifar10_jpeg.py in {tmp_path}" in said
        and "--dataset cifar10 --download" in said
    )
    assert not (tmp_path / "out").exists()

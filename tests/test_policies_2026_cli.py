"""The 2024–26 policies through the command line end to end (issue 50): one `compare` over every
one of them, with `--set prune.reweight=cumulative`, then `report`; and a policy's own settings
reaching its arm."""

import csv
import re

import pytest
import yaml

from conftest import TINY, invoke

NEW = ("rs2", "seta", "ies", "orderdp", "selective-backprop")


def _prune(runs, arm):
    return yaml.safe_load((runs / f"{arm}-seed0" / "config.yaml").read_text())["prune"]


@pytest.mark.slow  # seven tiny runs in this process
def test_compare_trains_and_reports_every_new_policy_with_cumulative_reweighting(tmp_path, monkeypatch):
    # Catches a new policy that compare or report cannot take (a name left out of a registry, a
    # setting refused by one of them), and --set prune.reweight reaching fine-pruning and another
    # policy but not regular. 8 epochs: IES's first pruning epoch is the 7th.
    monkeypatch.chdir(tmp_path)
    policies = ["regular", "fine", *NEW]
    tiny = list(TINY)
    tiny[tiny.index("--epochs") + 1] = "8"
    argv = ["compare", *tiny, "--policies", ",".join(policies), "--set", "prune.reweight=cumulative"]
    done = invoke([*argv, "--seeds", "0", "--out", "cmp"])
    assert done.exit_code == 0, done.output
    runs = tmp_path / "cmp" / "lenet-synthetic"
    assert {p: _prune(runs, p)["reweight"] for p in policies} == {
        p: "none" if p == "regular" else "cumulative" for p in policies
    }
    report = invoke(["report", "cmp", "--out", "rep", "--no-plots"])
    assert report.exit_code == 0, report.output
    with open(tmp_path / "rep" / "summary.csv", newline="") as f:
        rows = {row["policy"] for row in csv.DictReader(f)}
    assert rows == set(policies), rows


@pytest.mark.slow
def test_compare_trains_orderdp_with_its_settings(tmp_path):
    # The CLI end to end: each arm's recorded config holds what acted in it, and the runs prune.
    # Catches the CLI's compare building its config as a regular run's (settings lost).
    flags = ["--policies", "regular,orderdp", "--reweight", "cumulative", "--orderdp-subset", "0.9"]
    result = invoke(["compare", *TINY, *flags, "--seeds", "0", "--out", tmp_path])
    assert result.exit_code == 0, result.output
    runs = tmp_path / "lenet-synthetic"
    prune = {
        arm: yaml.safe_load((runs / f"{arm}-seed0" / "config.yaml").read_text())["prune"] for arm in flags[1].split(",")
    }
    assert [prune[a]["reweight"] for a in ("regular", "orderdp")] == ["none", "cumulative"]
    assert prune["orderdp"]["orderdp_subset"] == 0.9


def test_compare_help_names_every_policy():
    # Issue 50: every policy is named in `compare --help`, in its examples' --policies lists (the
    # help loads no torch, so it cannot ask the registry). Catches a policy added without a word
    # there; a name only inside another word (ies in "policies") does not count.
    from fineprune_cli.pruning import list_policies

    result = invoke(["compare", "--help"])
    assert result.exit_code == 0
    named = {n for listed in re.findall(r"--policies\s+([a-z0-9,-]+)", result.output) for n in listed.split(",")}
    assert [p for p in list_policies() if p not in named] == []

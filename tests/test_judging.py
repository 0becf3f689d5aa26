"""The judging plan as a settings section: the same flags on `compare` and `report`, YAML and
flags filling the same fields, and the family's correction named from one place."""

import re

import pytest

from conftest import invoke
from fineprune_cli.analysis import judging
from fineprune_cli.analysis.judging import Correction, Judging, load_judging
from fineprune_cli.analysis.numbers import summary_rows
from fineprune_cli.analysis.sequence import record
from fineprune_cli.analysis.study import study
from fineprune_cli.analysis.verdict import build
from fineprune_cli.errors import ConfigError
from factories import context, pruned, shorter

FLAGS = ("--margin", "--min-gain", "--alpha", "--family", "--target")


def _flags(command):
    text = invoke([command, "--help"]).output
    return {f for f in FLAGS if re.search(rf"{f}\b", text)}


def test_compare_and_report_take_the_same_judging_flags():
    assert _flags("compare") == _flags("report") == set(FLAGS)


def test_yaml_and_flags_fill_the_same_fields_and_unknown_keys_are_refused(tmp_path):
    config = tmp_path / "e.yaml"
    config.write_text("judging:\n  margin: 0.5\n  alpha: 0.1\n")
    found = load_judging(config, {"judging.alpha": 0.02, "judging.min_gain": None})
    assert (found.margin, found.alpha, found.gain) == (0.5, 0.02, 0.5)  # flags over the file
    config.write_text("judging:\n  margins: 0.5\n")
    with pytest.raises(ConfigError, match="unknown key 'judging.margins'"):
        load_judging(config, {})


def _runs():
    name, kw = shorter(0.3)
    arms = {"regular": (0.0, {}), name: (-1.5, kw), "ucb": (0.0, pruned("ucb", 0.3))}
    arms["egreedy"] = (-1.2, pruned("egreedy", 0.3))
    return [run for seeds in context(arms).values() for run in seeds.values()]


def test_switching_the_correction_renames_it_in_every_sentence(monkeypatch):
    """A second correction (Šidák's, for the test) named in the family sentence, every decision's
    chain, the looks record, and nowhere Bonferroni: the name comes from one place."""
    sidak = Correction(
        "Šidák",
        "Šidák over {policies}{looks_text}: each policy's claims are tested at {level}",
        "each policy's claims at 1 - (1 - alpha)^(1 / (policies x looks))",
        lambda p, k, looks: 1 - (1 - p) ** (k * looks),
        lambda alpha, k, looks: 1 - (1 - alpha) ** (1 / (k * looks)),
    )
    monkeypatch.setitem(judging.FAMILIES, "sidak", sidak)
    found = study(_runs(), Judging(family="sidak"))
    text = "\n".join(build(found).markdown())
    assert "Šidák over 2 policies" in text and "Šidák-adjusted in brackets" in text
    assert text.count("Šidák-adjusted p") == len(found.decisions)
    assert "Bonferroni" not in text
    assert record((2, 3), [], found.decisions, found.judging)["rule"] == "Šidák"
    rows = [r for r in summary_rows(found) if r["decision"]]
    d = found.decisions[0]
    assert rows[0]["p_adjusted"] == pytest.approx(1 - (1 - d.p_claim) ** 2)
    assert d.level == pytest.approx(1 - 0.95**0.5)  # the bounds at Šidák's level, not alpha / k


def test_the_family_help_lists_each_correction_by_its_entry():
    """`--family`'s help (the flag's and the settings page's) is built from FAMILIES: every entry by
    the name the flag takes and its own description, and the default the field has."""
    text = judging.FIELDS["family"].metadata["help"]
    assert judging.FAMILIES, "no correction to list"
    for key, correction in judging.FAMILIES.items():
        assert f"{key} ({correction.description})" in text
    assert text.endswith(f"(default {Judging().family})")

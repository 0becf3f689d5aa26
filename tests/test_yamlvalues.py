"""Settings read as people write them (issue 31, item 5): `1e-3` is a float, `1:00` and `010`
(base 60 and octal to YAML 1.1) are refused, a `--set` value is never cut at a ' #'."""

import pytest
from typer.testing import CliRunner

from fineprune_cli.cli import app
from fineprune_cli.cli.options import parse_set
from fineprune_cli.engine.config import build_config
from fineprune_cli.engine.yamlvalues import dump, load
from fineprune_cli.errors import ConfigError


@pytest.mark.parametrize(
    "text, value",
    [
        ("1e-3", 0.001),
        ("5e-4", 0.0005),
        ("-1e3", -1000.0),
        ("1.0e-10", 1e-10),
        ("1_000", 1000),
        ("0x10", 16),
        ("0", 0),
        (".5", 0.5),
        ("12", 12),
    ],
)
def test_numbers_read_as_python_reads_them(text, value):
    got = load(f"v: {text}")["v"]
    assert got == value and type(got) is type(value)


def test_the_way_most_people_write_lr_and_weight_decay_is_accepted(tmp_path):
    """YAML 1.1 reads 1e-3 as text: 'expected float' before."""
    f = tmp_path / "c.yaml"
    f.write_text("train: {lr: 1e-3, weight_decay: 5e-4}\n")
    cfg = build_config(f, parse_set(["train.momentum=8e-1"]))
    assert (cfg.train.lr, cfg.train.weight_decay, cfg.train.momentum) == (0.001, 0.0005, 0.8)


@pytest.mark.parametrize("text, words", [("1:00", "base-60"), ("010", "leading 0"), ("1:30.5", "base-60")])
def test_numbers_yaml_11_reads_otherwise_are_refused(tmp_path, text, words):
    """1:00 trained 60 epochs before; 010 trained 8."""
    with pytest.raises(ConfigError, match=words):
        parse_set([f"train.epochs={text}"])
    f = tmp_path / "c.yaml"
    f.write_text(f"train:\n  epochs: {text}\n")
    with pytest.raises(ConfigError, match=f"line 2: '{text}' .*{words}"):
        build_config(f, {})


def test_a_set_value_is_never_cut_at_a_comment():
    """--set 'run.out=a #b' wrote to a/ before."""
    with pytest.raises(ConfigError, match="start of a comment"):
        parse_set(["run.out=a #b"])
    assert parse_set(["run.out='a #b'", "data.label=a#b"]) == {"run.out": "a #b", "data.label": "a#b"}


def test_text_that_reads_as_a_number_is_quoted_when_written():
    data = {"label": "1e-3", "out": "1:00", "other": "010", "lr": 1e-3, "n": 7}
    assert load(dump(data)) == data
    assert "'1e-3'" in dump(data)


def test_the_cli_refuses_one_colon_zero_zero_epochs_in_one_line():
    result = CliRunner().invoke(
        app, ["train", "-m", "lenet", "-d", "synthetic", "--set", "train.epochs=1:00", "--dry-run"]
    )
    assert result.exit_code == 2 and "base-60" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1

"""Settings read as people write them (issue 31, item 5): `1e-3` is a float, `1:00` and `010`
(base 60 and octal to YAML 1.1) are refused, a `--set` value is never cut at a ' #'."""

import pytest
import yaml
from typer.testing import CliRunner

from fineprune_cli.cli import app
from fineprune_cli.cli.options import parse_set
from fineprune_cli.engine.setup.config import build_config
from fineprune_cli.engine.setup.yamlvalues import dump, load
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


def test_a_merge_key_merges_as_yaml_says_and_its_own_keys_override(tmp_path):
    """`<<: *base` is valid YAML: it was refused as 'not valid YAML' (no constructor for the tag)."""
    f = tmp_path / "c.yaml"
    f.write_text(
        "<<: {model: {name: lenet}}\n"
        "data: &d {dataset: synthetic, subset: 64}\n"
        "train: {<<: [{epochs: 3, lr: 0.5}, {epochs: 5, lr: 0.2, batch_size: 16}], lr: 0.05}\n"
    )
    cfg = build_config(f, {})
    assert (cfg.model.name, cfg.data.dataset, cfg.data.subset) == ("lenet", "synthetic", 64)
    # own keys over merged ones; of the merged, the first mapping listed wins (PyYAML's own
    # merge read epochs 5: equal keys that are distinct string objects were not seen as equal)
    assert (cfg.train.epochs, cfg.train.lr, cfg.train.batch_size) == (3, 0.05, 16)


@pytest.mark.parametrize(
    "text, words",
    [
        ("train:\n  <<: 5\n", "a merge key \\(<<\\) takes a mapping"),
        ("train:\n  <<: [1, 2]\n", "a merge key \\(<<\\) takes a mapping"),
        ("train:\n  <<: {epochs: 3}\n  lr: 0.1\n  lr: 0.2\n", "duplicate key 'lr'"),
    ],
)
def test_a_merge_key_of_no_mapping_or_a_repeated_own_key_is_refused(tmp_path, text, words):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=f"line \\d+: {words}"):
        build_config(f, {})


def _bomb() -> str:
    """Nine nested aliases of nine items, in one flow list: 9**9 strings once expanded."""
    inner = '["x","x","x","x","x","x","x","x","x"]'
    for name in "abcdefgh":
        inner = f"[&{name} {inner}" + f",*{name}" * 8 + "]"
    return inner


@pytest.mark.parametrize("look", ["--print-config", "--dry-run"])
def test_a_yaml_alias_bomb_in_compare_slurm_is_refused_before_it_expands(tmp_path, look):
    """The bomb read cheaply (shared lists), then --print-config and --dry-run copied the
    settings and expanded its 387 million strings."""
    import time

    config = tmp_path / "c.yaml"
    config.write_text(f"compare:\n  executor: slurm\n  slurm:\n    setup: {_bomb()}\n")
    start = time.monotonic()
    result = CliRunner().invoke(app, ["compare", "-m", "lenet", "-d", "synthetic", "--config", str(config), look])
    assert time.monotonic() - start < 10 and result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {config}: its aliases repeat ") and "more than the 10,000" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_aliases_are_measured_as_they_expand_and_refused_beyond_a_small_size():
    shared = "base: &b {lr: 0.1, epochs: 3}\none: *b\ntwo: *b\n"
    assert load(shared)["two"] == {"lr": 0.1, "epochs": 3}  # a few shared settings are fine
    ten_thousand = "a: &a [" + ",".join(["x"] * 100) + "]\nb: [" + ",".join(["*a"] * 99) + "]\n"
    assert len(load(ten_thousand)["b"]) == 99  # 99 repeats of 101 nodes: 9,999, under the limit
    with pytest.raises(yaml.YAMLError, match="its aliases repeat 10,100 values"):
        load(ten_thousand.replace("*a]", "*a,*a]"))
    with pytest.raises(yaml.YAMLError, match="an alias refers to a value that holds it"):
        load("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="--set compare.slurm.setup: its aliases repeat"):
        parse_set(["compare.slurm.setup=" + _bomb()])

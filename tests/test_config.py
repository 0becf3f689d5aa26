import pytest

from fineprune_cli.engine.config import Config, build_config, parse_int_list, validate
from fineprune_cli.errors import ConfigError


def test_defaults_are_the_papers_recipe():
    t = Config().train
    assert (t.epochs, t.batch_size, t.lr, t.momentum, t.weight_decay) == (200, 128, 0.1, 0.9, 5e-4)
    assert (t.milestones, t.gamma) == ([60, 120, 160], 0.2)


def test_precedence_defaults_then_yaml_then_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("model: {name: lenet}\ntrain: {epochs: 7, lr: 0.05}\nprune: {enabled: true}\n")
    cfg = build_config(f, {"train.epochs": 3, "train.lr": None, "data.dataset": "synthetic"})
    assert cfg.model.name == "lenet" and cfg.train.epochs == 3 and cfg.train.lr == 0.05
    assert cfg.prune.enabled and cfg.data.dataset == "synthetic" and cfg.train.batch_size == 128


@pytest.mark.parametrize("text, word", [
    ("model: {nmae: lenet}", "unknown key 'model.nmae'"),
    ("modle: {name: lenet}", "unknown section 'modle'"),
    ("train: {epochs: ten}", "train.epochs: expected int"),
    ("train: {milestones: 60}", "expected a list"),
    ("train: [1, 2]", "section 'train' must be a mapping"),
    ("- a\n- b", "expected a mapping"),
    ("train: {epochs: 3\n", "not valid YAML"),
    ("prune: {enabled: 1}", "expected bool"),
])
def test_bad_yaml_is_one_clear_error(tmp_path, text, word):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=word):
        build_config(f, {})


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        build_config(tmp_path / "nope.yaml", {})


def _valid(**changes):
    cfg = Config()
    cfg.model.name, cfg.data.dataset = "lenet", "synthetic"
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        setattr(getattr(cfg, section), key, value)
    return cfg


@pytest.mark.parametrize("changes, word", [
    ({"model__name": "resnet9"}, "--model must be one of: lenet, .*got 'resnet9'"),
    ({"data__dataset": "mnist"}, "--dataset must be one of: fashion-mnist, .*got 'mnist'"),
    ({"train__epochs": 0}, "--epochs must be between 1 and 100,000, got 0"),
    ({"train__batch_size": -1}, "--batch-size must be between 1 and 16,777,216, got -1"),
    ({"train__lr": 0.0}, "--lr must be positive"),
    ({"train__milestones": [120, 60]}, "strictly increasing"),
    ({"prune__prune_fraction": 1.0}, "prune-fraction"),
    ({"prune__tolerance": -0.1}, "tolerance"),
    ({"prune__window": 0}, "window"),
    ({"prune__policy": "greedy"}, "policy"),
    ({"run__device": "tpu"}, "--device"),
    ({"data__subset": 0}, "--subset"),
])
def test_validate_rejects(changes, word):
    with pytest.raises(ConfigError, match=word):
        validate(_valid(**changes))


def test_parse_int_list():
    assert parse_int_list("60, 120,160", "--milestones") == [60, 120, 160]
    assert parse_int_list("", "--milestones") == []
    with pytest.raises(ConfigError):
        parse_int_list("60;120", "--milestones")


def test_yaml_alias_bomb_gives_a_short_error_quickly(tmp_path):
    """309 bytes that expand to 10**9 list items: the error line must not repr() them all."""
    import time

    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefgh"[i]
        lines.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    lines.append("train: {milestones: *i}")
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        build_config(f, {})
    assert time.perf_counter() - t0 < 5 and len(str(err.value)) < 300


def test_non_finite_numbers_are_refused(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("prune: {tolerance: .nan}\n")
    with pytest.raises(ConfigError, match="prune.tolerance: must be a finite number"):
        build_config(f, {})


def test_a_key_given_twice_is_an_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  epochs: 3\n  epochs: 30\n")
    with pytest.raises(ConfigError, match="not valid YAML at line 2: duplicate key 'epochs'"):
        build_config(f, {})

import pytest
import yaml

from fineprune_cli.engine.setup.config import Config, build_config, parse_int_list, resolve, validate
from fineprune_cli.errors import ConfigError
from fineprune_cli.pruning import PruneConfig


def test_defaults_are_the_papers_recipe():
    t = resolve(Config()).train
    assert (t.epochs, t.batch_size, t.lr, t.momentum, t.weight_decay) == (200, 128, 0.1, 0.9, 5e-4)
    assert (t.milestones, t.gamma) == ([60, 120, 160], 0.2)


def test_precedence_defaults_then_yaml_then_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("model: {name: lenet}\ntrain: {epochs: 7, lr: 0.05}\nprune: {enabled: true}\n")
    cfg = build_config(f, {"train.epochs": 3, "train.lr": None, "data.dataset": "synthetic"})
    assert cfg.model.name == "lenet" and cfg.train.epochs == 3 and cfg.train.lr == 0.05
    assert cfg.prune.enabled and cfg.data.dataset == "synthetic" and cfg.train.batch_size == 128


@pytest.mark.parametrize(
    "text, word",
    [
        ("model: {nmae: lenet}", "unknown key 'model.nmae'"),
        ("modle: {name: lenet}", "unknown section 'modle'"),
        ("train: {epochs: ten}", "train.epochs: expected int"),
        ("train: {milestones: 60}", "expected a list"),
        ("train: [1, 2]", "section 'train' must be a mapping"),
        ("- a\n- b", "expected a mapping"),
        ("train: {epochs: 3\n", "not valid YAML"),
        ("prune: {enabled: 1}", "expected bool"),
    ],
)
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


@pytest.mark.parametrize(
    "changes, word",
    [
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
    ],
)
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
        lines.append(
            f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]"
        )
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


# --- defaults that are shares of --epochs, and pruning implied by a policy ----------------


def test_length_defaults_resolve_to_the_papers_numbers_at_200_epochs():
    cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic"})
    assert cfg.train.milestones == [60, 120, 160]
    assert (cfg.prune.window, cfg.prune.start) == (60, 30)


def test_length_defaults_scale_with_epochs_and_explicit_values_win(tmp_path):
    cfg = build_config(None, {"train.epochs": 10})
    assert cfg.train.milestones == [3, 6, 8] and (cfg.prune.window, cfg.prune.start) == (3, 2)
    cfg = build_config(None, {"train.epochs": 30})
    assert cfg.train.milestones == [9, 18, 24] and (cfg.prune.window, cfg.prune.start) == (9, 5)
    f = tmp_path / "c.yaml"
    f.write_text("train: {epochs: 200, milestones: [50]}\nprune: {window: 40}\n")
    cfg = build_config(f, {"train.epochs": 20})  # the flag's 20 scales only what is unset
    assert cfg.train.milestones == [50] and (cfg.prune.window, cfg.prune.start) == (40, 3)
    assert build_config(None, {"train.epochs": 10, "train.milestones": []}).train.milestones == []


def test_tiny_runs_drop_milestones_that_coincide():
    from fineprune_cli.engine.setup.config import paper_milestones

    assert paper_milestones(4) == [1, 2, 3] and paper_milestones(3) == [1, 2] and paper_milestones(1) == [1]


def test_a_pruning_policy_implies_pruning_and_no_prune_wins(tmp_path):
    assert build_config(None, {"prune.policy": "random"}).policy == "random"
    assert build_config(None, {"prune.policy": "regular"}).policy == "regular"
    assert build_config(None, {}).policy == "regular"
    assert build_config(None, {"prune.enabled": True}).policy == "fine"
    assert build_config(None, {"prune.policy": "random", "prune.enabled": False}).policy == "regular"
    f = tmp_path / "c.yaml"
    f.write_text("prune: {policy: ucb}\n")
    assert build_config(f, {}).policy == "ucb"
    assert build_config(f, {"prune.enabled": False}).policy == "regular"


def test_yaml_schedule_that_prunes_no_epoch_is_refused(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "model: {name: lenet}\ndata: {dataset: synthetic}\ntrain: {epochs: 20}\n"
        "prune: {enabled: true, window: 60, start: 30}\n"
    )
    with pytest.raises(ConfigError, match="prunes no epoch of 20: window 60 with start 30 first prunes epoch 30"):
        validate(build_config(f, {}))
    f.write_text("model: {name: lenet}\ndata: {dataset: synthetic}\ntrain: {epochs: 20}\nprune: {enabled: true}\n")
    assert validate(build_config(f, {})).prune.window == 6


def test_a_resolved_config_round_trips_through_a_run_folder():
    """config.yaml holds numbers: reading it back changes nothing (resolving twice is a no-op)."""
    from fineprune_cli.engine.setup.config import config_from_dict

    cfg = build_config(None, {"train.epochs": 30, "prune.policy": "random"})
    again = config_from_dict(yaml.safe_load(yaml.safe_dump(cfg.to_dict())))
    assert again.to_dict() == cfg.to_dict()
    assert cfg.to_dict()["prune"]["enabled"] is True and cfg.to_dict()["train"]["milestones"] == [9, 18, 24]


def test_the_prune_sections_defaults_are_the_papers():
    # Li et al.: a_k halves per window (attenuation 2), block 2 with 1 pruning epoch, 30% left
    # out, counted above the plain batch mean (tolerance 0); InfoBatch r = 0.5 with rescaling;
    # KAKURENBO tau 0.7 (its authors' code); UCB c = 1, epsilon 0.1, running-loss weight 0.3.
    cfg = PruneConfig()
    assert (cfg.attenuation, cfg.block, cfg.count, cfg.prune_fraction, cfg.tolerance, cfg.drop) == (
        2.0,
        2,
        1,
        0.3,
        0.0,
        "hard",
    )
    assert (cfg.infobatch_ratio, cfg.infobatch_rescale, cfg.kakurenbo_tau) == (0.5, True, 0.7)
    assert (cfg.ucb_c, cfg.epsilon, cfg.ema_weight, cfg.anneal) == (1.0, 0.1, 0.3, None)

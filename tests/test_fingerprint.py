"""What makes two runs the same run (engine/records/fingerprint.py)."""

import copy

from fineprune_cli.engine.records.fingerprint import LATER, drop_unused, fingerprint, matches
from fineprune_cli.engine.setup.config import Config


def _config(**run):
    cfg = Config()
    cfg.model.name, cfg.data.dataset = "lenet", "synthetic"
    for key, value in run.items():
        setattr(cfg.run, key, value)
    return cfg.to_dict()


def _before_the_layout_fields(config):
    """A config as written before num_ps and batch_per_worker existed (group_size's default 2)."""
    old = copy.deepcopy(config)
    del old["run"]["num_ps"], old["train"]["batch_per_worker"]
    old["run"]["group_size"] = 2
    return old


def test_old_sync_checkpoints_still_match_and_layout_changes_do_not_matter_to_sync():
    new = _config()
    assert fingerprint(_before_the_layout_fields(new)) == fingerprint(new)
    assert fingerprint(_config(num_ps=3, group_size=5)) == fingerprint(new)  # unused by sync


def test_server_layout_and_weak_scaling_change_a_server_run():
    base = _config(dist_mode="mixed")
    assert fingerprint(_config(dist_mode="mixed", num_ps=2)) != fingerprint(base)
    assert fingerprint(_config(dist_mode="mixed", group_size=2)) != fingerprint(base)
    weak = copy.deepcopy(base)
    weak["train"]["batch_per_worker"] = 32
    assert fingerprint(weak) != fingerprint(base)


def test_drop_unused_leaves_what_a_comparison_needs():
    config = drop_unused(_config())
    assert "group_size" not in config["run"] and "num_ps" not in config["run"]
    assert "batch_per_worker" not in config["train"] and config["run"]["dist_mode"] == "sync"
    kept = drop_unused(_config(dist_mode="async", num_ps=2))
    assert kept["run"]["num_ps"] == 2 and kept["run"]["group_size"] == 0


def _without(config, *groups):
    old = copy.deepcopy(config)
    for group in groups:
        for section, added in group.items():
            for key in added:
                del old[section][key]
    return old


def test_a_checkpoint_made_before_later_settings_existed_still_resumes():
    """A run interrupted before the 2024-26 policies or Selective-Backprop's settings existed:
    its checkpoint's fingerprint was taken without them, and its config.yaml read now gets them at
    their defaults. Each such group's defaults are the declared ones."""
    now = _config()
    for section, added in (pair for group in LATER for pair in group.items()):
        assert {key: now[section][key] for key in added} == added  # the declared defaults
    assert matches(fingerprint(now), now)
    assert matches(fingerprint(_without(now, LATER[1])), now)  # before Selective-Backprop
    assert matches(fingerprint(_without(now, *LATER)), now)  # before the 2024-26 policies
    assert fingerprint(_without(now, LATER[1])) != fingerprint(now)  # so the old check refused it


def test_a_later_setting_away_from_its_default_is_still_a_change():
    now = _config()
    moved = copy.deepcopy(now)
    moved["prune"]["sb_keep"] = 0.25
    assert not matches(fingerprint(_without(now, LATER[1])), moved)
    assert not matches(fingerprint(now), moved)
    # a checkpoint made with the group present is not matched by leaving out only part of it
    part = _without(now, {"prune": {"sb_keep": 0.5}})
    assert not matches(fingerprint(part), now)

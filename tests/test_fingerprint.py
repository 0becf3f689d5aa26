"""What makes two runs the same run (engine/fingerprint.py)."""

import copy

from fineprune_cli.engine.config import Config
from fineprune_cli.engine.fingerprint import drop_unused, fingerprint


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

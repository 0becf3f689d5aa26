"""What makes two runs the same run: the settings a checkpoint must match to be continued, and
a comparison must match to be reused, less what cannot change a run's result."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

# data settings added after the first release, with the defaults that reproduce it
ADDED_LATER = {"image_size": None, "loader": "auto"}
# settings of other sections added later (issue 23), at the values that reproduce older runs
SECTION_ADDED_LATER = {
    "train": {"lr_schedule": "epochs", "lr_scale_pruned": None},
    "prune": {"kakurenbo_tau": 0.7, "infobatch_rescale": True},
}
# settings added since, one group per change that added them, oldest first (issue 50: the 2024-26
# policies, then Selective-Backprop). A checkpoint made before a group holds none of its fields nor
# any later group's, so it is matched with those left out where they are at their defaults;
# checkpoints written since keep them in (`fingerprint` is unchanged for them).
LATER = (
    {
        "prune": {
            "seta_ratio": 0.1,
            "seta_groups": 10,
            "seta_window": 0.5,
            "ies_threshold": 0.001,
            "orderdp_subset": 0.8,
            "reweight": "none",
        }
    },
    {"prune": {"sb_keep": 0.5, "sb_start": 0.5, "sb_end": 0.9, "sb_interrupt": 2}},
)


def drop_unused(settings: dict[str, Any], group_size: int | None = None) -> dict[str, Any]:
    """Remove (in place) the settings that cannot change this run: the parameter-server layout
    of a synchronous run, an unset weak-scaling batch; so runs made before these fields existed
    stay comparable. `group_size`: put that value back instead (fingerprints of old
    checkpoints hold group_size 2, the old default, whatever the mode)."""
    run = settings.get("run", {})
    run.pop("tensorboard", None)  # a view of the metrics, not a setting of the run
    if run.get("dist_mode", "sync") == "sync" or run.get("ps_device") == "cpu":
        run.pop("ps_device", None)  # the default keeps runs made before the field comparable
    if run.get("dist_mode", "sync") == "sync":
        run.pop("group_size", None)
        run.pop("num_ps", None)
        if group_size is not None:
            run["group_size"] = group_size
    if run.get("num_ps") == 1:
        del run["num_ps"]
    if settings.get("train", {}).get("batch_per_worker", 0) is None:
        del settings["train"]["batch_per_worker"]
    return settings


def matches(stored: Any, config: dict[str, Any], data: dict[str, str] | None = None) -> bool:
    """Whether a checkpoint's `stored` fingerprint is this config's, as written now or as written
    before a group of settings in LATER existed."""
    return stored in {fingerprint(config, data, before=era) for era in range(len(LATER) + 1)}


def _without_later(settings: dict[str, Any], before: int) -> None:
    for group in LATER[before:]:
        for section, added in group.items():
            values = settings.get(section, {})
            for key, default in added.items():
                if key in values and values[key] == default:
                    del values[key]


def fingerprint(config: dict[str, Any], data: dict[str, str] | None = None, before: int | None = None) -> str:
    """What a checkpoint must match to be continued: the resolved settings, less where the run
    is written, how often it checkpoints and how long ranks wait for each other, and the data's
    identity (an image folder's listings, `data_changes`) where the run recorded one. `before`:
    as a checkpoint made before LATER[before] existed recorded it."""
    settings = copy.deepcopy(config)
    if data:
        settings["data_identity"] = data
    for key in ("out", "checkpoint_every", "dist_timeout", "plan"):  # the plan decides, not trains
        settings.get("run", {}).pop(key, None)
    data = settings.get("data", {})
    data.pop("workers", None)  # how many processes decode does not change what they decode
    for key, default in ADDED_LATER.items():  # checkpoints made before these fields still resume
        if key in data and data[key] == default:
            del data[key]
    for section, added in SECTION_ADDED_LATER.items():
        values = settings.get(section, {})
        for key, default in added.items():
            if key in values and values[key] == default:
                del values[key]
    if before is not None:
        _without_later(settings, before)
    drop_unused(settings, group_size=2)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def data_changes(then: dict[str, str], now: dict[str, str], where: str) -> str | None:
    """What changed between a run's recorded data identity and the data now, in words; None
    when nothing did (or the run recorded none: made before data identity was recorded)."""
    for split in sorted(then):
        if then[split] != now.get(split):
            return (
                f"the {split} images in {where} changed since the run started ({then[split]} then, "
                f"{now.get(split, 'none')} now: files added, removed, moved between classes or edited)"
            )
    return None

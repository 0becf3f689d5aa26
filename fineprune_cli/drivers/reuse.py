"""A compare job's folder: reused when it holds a finished run made with the same settings
on the same data, resumed when it holds an interrupted one, trained anew otherwise."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ..engine.inputs.dataid import is_content
from ..engine.records.files import read_regular_text
from ..engine.records.fingerprint import data_changes, drop_unused
from ..engine.records.holders import lock_problem
from ..engine.records.record import SUMMARY, Status, held, load_run_config, read_summary
from ..engine.setup.config import Config, config_from_dict
from ..engine.setup.scriptconfig import used_by_script
from ..errors import ConfigError
from .trainers.contract import HELD
from .trainers.registry import trainer_for

__all__ = ["HELD", "existing_state", "train_job"]


def _comparable(config: dict[str, Any], by_content: bool = False) -> dict[str, Any]:
    """The settings that decide a run's result; where it is written and the matrix do not, nor,
    for a run that recorded its data by content (`by_content`), where the data lies: the same
    bytes at another path (a node's local disk, a fresh unpacking) are the same data."""
    config = copy.deepcopy(used_by_script(config))  # a script's config.yaml holds only what it uses
    if by_content:
        config.get("data", {}).pop("data_dir", None)
    config.get("run", {}).pop("out", None)
    config.get("run", {}).pop("checkpoint_every", None)
    config.get("run", {}).pop("dist_timeout", None)
    config.get("run", {}).pop("arm", None)
    config.get("run", {}).pop("plan", None)  # the plan judges the run; compare keeps it with the runs
    config.get("data", {}).pop("label", None)
    config.get("data", {}).pop("workers", None)  # decoding processes: same images, same run
    config.get("script", {}).pop("recipe", None)  # declared by the script as it runs: compare cannot know it
    if not config.get("prune", {}).get("enabled", False):
        config.pop("prune", None)
    return drop_unused(config)


def _differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            diffs += _differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            diffs.append(f"{prefix}{key}: {vb!r} there, {va!r} now")
    return diffs


def existing_state(job_cfg: Config, data: dict[str, str] | None = None) -> str:
    """'new', 'incomplete', 'complete', 'diverged' or 'held' (another process is writing it)
    for the job's folder; a run made with other settings or on other data (`data`: the data's
    identity now), finished or not, is an error."""
    path = Path(job_cfg.run.out)
    if held(path):  # a run in progress, perhaps in its first epoch: never trained twice nor deleted
        problem = lock_problem(path)  # or a process left behind by one that ended: not a run to wait for
        if problem:
            raise ConfigError(problem)
        return "held"
    if not (path / SUMMARY).exists():
        return "new"
    try:
        summary = read_summary(path)
        status, saved = summary.status, load_run_config(path)
    except ConfigError:  # a finished run's damaged record is left out with its reason, never resumed
        return "complete" if _says_complete(path) else "incomplete"
    try:  # fields added since the run was made read as their defaults
        saved = config_from_dict(saved).to_dict()
    except ConfigError as exc:
        raise ConfigError(
            f"{path} holds a run whose config this version cannot read ({exc}); use another --out or delete that folder"
        ) from None
    # a finished run on data recorded by content: the identity below decides, not its path (an
    # interrupted one resumes from its own config.yaml, so its path must still hold the data)
    content = is_content(summary.data) and not status.resumable
    diffs = _differences(_comparable(job_cfg.to_dict(), content), _comparable(saved, content))
    if diffs:  # whatever its status: resuming it would mix settings under one label too
        raise ConfigError(
            f"{path} holds a run ({status.value}) made with other settings ({diffs[0]}); "
            "use another --out or delete that folder"
        )
    data = trainer_for(job_cfg).recorded_data(job_cfg, data, summary.data)
    changed = data_changes(summary.data, data, str(job_cfg.data.data_dir))
    if changed:
        raise ConfigError(
            f"{path} holds a run ({status.value}) made on other data: {changed}; "
            "use another --out or delete that folder"
        )
    if status == Status.DIVERGED:
        return "diverged"  # deterministic: training it again would diverge again
    return "incomplete" if status.resumable else "complete"


def _says_complete(path: Path) -> bool:
    """Whether summary.json, whatever else is wrong with the record, says the run finished."""
    try:
        data = json.loads(read_regular_text(path / SUMMARY))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("status") == Status.COMPLETE.value


def train_job(job_cfg: Config, state: str, command: str | None, bar: Any) -> None:
    """Train one job of the matrix whose folder is in `state` ('new' or 'incomplete'), by its trainer."""
    trainer_for(job_cfg).train(job_cfg, state, command, bar)

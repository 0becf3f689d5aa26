"""The `script` section: `compare --script` runs the user's own training command for each arm
and seed (docs/howto/own-script.md). Kept in the one config tree so a job's config carries it to
any executor and a run folder's config.yaml records which command made the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...settings import between, option

PLACEHOLDERS = ("seed", "epochs", "milestones", "policy", "arm", "out")


def _command(text: str) -> str | None:
    import shlex
    import string

    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:  # an unmatched brace
        return f"is not a command with {{placeholders}}: {exc}"
    try:
        shlex.split(text)
    except ValueError as exc:  # an unbalanced quote
        return f"is not a command line: {exc}"
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        return f"names {{{unknown[0]}}}; the placeholders are {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
    return None


@dataclass
class ScriptConfig:
    command: str = option(
        "",
        flag="--script",
        check=_command,
        help="Your own training command, run once per arm and seed instead of fineprune's trainer, e.g. "
        "'python train.py --seed {seed} --epochs {epochs} --milestones {milestones}'; the script learns its "
        "run through fineprune.start() (docs: Decide on your own script).",
    )
    timeout: int = option(
        0,
        flag="--script-timeout",
        check=between(0, 366 * 86400),
        help="Seconds one script run may take before it is stopped and counted failed; 0: no limit. (default 0)",
    )
    recipe: dict[str, Any] = option(
        factory=dict,
        flag="",
        help="What the script declared it trains with (fineprune.start(recipe=...)), recorded by the run: "
        "runs whose recipes differ are never paired.",
    )


# what a --script run reads of its config: the names it is filed under, its schedule, its seed
# and folder, its policy, the script itself; the rest (fineprune's trainer, its data loading,
# its devices) never reaches the script, and listing it read as if it did (issue 49)
SCRIPT_USES = {
    "model": ("name",),
    "data": ("dataset", "label"),
    "train": ("epochs", "milestones"),
    "run": ("seed", "out", "arm", "plan"),
}


def runs_script(cfg: Any) -> bool:
    """Whether a config (a Config or its tree) has the user's script train its run: the one place
    that reads it. The config's own checks ask it; compare asks drivers/trainers, which asks it."""
    section = cfg.get("script") if isinstance(cfg, dict) else cfg.script
    return bool(section.get("command") if isinstance(section, dict) else getattr(section, "command", ""))


def used_by_script(tree: dict[str, Any]) -> dict[str, Any]:
    """A config tree as a `--script` run uses it (the tree itself for fineprune's trainer);
    what it leaves out reads back as its default, which nothing of a script's run reads."""
    if not runs_script(tree):
        return tree
    return {
        section: {k: v for k, v in values.items() if k in SCRIPT_USES[section]}
        if section in SCRIPT_USES and isinstance(values, dict)
        else values
        for section, values in tree.items()
    }

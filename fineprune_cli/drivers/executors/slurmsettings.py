"""`compare.slurm`: `--executor slurm`'s settings (SlurmConfig), and submitit's other sbatch
settings given in that mapping, each with its type and bounds, checked when the section is read.

submitit checks none of them: `setup: 5` or `nodes: abc` reached its script writer and ended in
its traceback, and `time: -1` went to sbatch past --slurm-time's own check. So a setting that
has a flag is set by the flag alone, and the rest are typed here. Strings end up on one
`#SBATCH` line each (or, for `setup` and `teardown`, as lines of the job script), so a line
break or a control character in one would write a different script than the one given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ...errors import ConfigError
from ...settings import apply_values, between, option, short_repr

# set by compare's own checked flags, or by the script submitit writes around the run
FLAGGED = {
    "time": "--slurm-time",
    "partition": "--slurm-partition",
    "gpus_per_task": "--slurm-gpus-per-task",
    "cpus_per_task": "compare.slurm.cpus_per_task",
    "account": "--slurm-account",
}
WRITTEN = ("array", "output", "error", "signal", "open-mode")

Check = Callable[[Any], "str | None"]
TEXT = ("qos", "mem", "mem_per_gpu", "mem_per_cpu", "comment", "constraint", "exclude", "gres")
TEXT += ("mail_type", "mail_user", "nodelist", "dependency", "job_name", "wckey")
# a run is one process: a second task (or node) would train the same run into the same folder
ONE_TASK = "each run of compare is one Slurm task on one node"
COUNTS: dict[str, Check] = {
    "nodes": lambda v: None if v == 1 else f"must be 1 ({ONE_TASK})",
    "ntasks_per_node": lambda v: None if v == 1 else f"must be 1 ({ONE_TASK})",
    "cpus_per_gpu": between(1, 4096),
    "gpus_per_node": between(0, 64),
    "signal_delay_s": between(0, 86_400),
    "array_parallelism": between(1, 1_000_000),
}
SWITCHES = ("stderr_to_stdout", "use_srun")
LINES = ("setup", "teardown", "srun_args")
NAME = re.compile(r"[a-z][a-z0-9-]*$")  # an sbatch long option


def known() -> list[str]:
    """The names compare.slurm takes (the rest of submitit's are its internals or a flag's)."""
    return sorted((*TEXT, *COUNTS, *SWITCHES, *LINES, "exclusive", "additional_parameters"))


def checked(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with numbers given for text made text; raises ConfigError naming the first bad one."""
    return {str(key): _value(str(key), value) for key, value in values.items()}


def _value(key: str, value: Any) -> Any:
    where = f"compare.slurm.{key[:40]}"
    if key in FLAGGED:
        raise ConfigError(f"{where}: set it with {FLAGGED[key]}, which checks it (not through compare.slurm)")
    if key in TEXT:
        return _text(where, value)
    if key in COUNTS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected int, got {short_repr(value)}")
        problem = COUNTS[key](value)
        if problem:
            raise ConfigError(f"{where} {problem}, got {value}")
        return value
    if key in SWITCHES:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {short_repr(value)}")
        return value
    if key in LINES:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list of strings, got {short_repr(value)}")
        return [_text(f"{where}[{i}]", v) for i, v in enumerate(value)]
    if key == "exclusive":  # sbatch's --exclusive, or --exclusive=user|mcs
        return True if value is True else _text(where, value)
    if key == "additional_parameters":
        return _extra(where, value)
    raise ConfigError(f"compare.slurm: unknown setting {key[:40]!r} (valid: {', '.join(known())})")


def _text(where: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a string, got {short_repr(value)}")
    text = str(value)
    if not text.isprintable():
        raise ConfigError(f"{where}: {short_repr(text)} holds a line break or control character")
    return text


def _extra(where: str, value: Any) -> dict[str, Any]:
    """sbatch options submitit has no name for; none may replace one it, or a flag, sets."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping of sbatch options, got {short_repr(value)}")
    taken = {k.replace("_", "-") for k in (*known(), *FLAGGED)} | set(WRITTEN)
    extra = {}
    for key, item in value.items():
        name = str(key)
        if not NAME.match(name):
            raise ConfigError(f"{where}: {short_repr(name)} is not an sbatch option name")
        if name.startswith("ntasks"):
            raise ConfigError(f"{where}.{name}: {ONE_TASK}; it takes no task counts")
        if name in taken or name.replace("-", "_") in FLAGGED:
            raise ConfigError(f"{where}.{name}: already set by submitit or a setting of compare; set it there")
        extra[name] = True if item is True else _text(f"{where}.{name}", item)
    return extra


@dataclass
class SlurmConfig:
    """`--executor slurm`'s settings: `compare: {slurm: {partition: gpu, mem: 32G}}` in a --config
    file; a name that is no field here (mem, qos, constraint, setup, ...) goes to submitit's
    SlurmExecutor, checked for its type."""

    partition: str = option("", flag="--slurm-partition", help="The partition. (default: the cluster's)")
    time: int = option(
        60,
        check=between(1, 525600),
        flag="--slurm-time",
        help="Minutes per task; a task that runs out is requeued and resumes from its checkpoint. (default 60)",
    )
    gpus_per_task: int = option(0, check=between(0, 64), flag="--slurm-gpus-per-task", help="GPUs per run. (default 0)")
    cpus_per_task: int = option(0, check=between(0, 1024), flag="", help="CPUs per run. (default: the cluster's)")
    account: str = option("", flag="--slurm-account", help="The account charged. (default: yours)")
    detach: bool = option(
        False,
        flag="--detach",
        help="Submit and return at once; `compare` again with the same arguments collects what "
        "finished and submits what is missing.",
    )
    submit_timeout: int = option(
        120,
        check=between(1, 3600),
        flag="",
        help="Seconds sbatch may take to answer before compare gives up on it (a controller that "
        "never answers must not hang compare). (default 120)",
    )
    options: dict[str, Any] = option(
        factory=dict,
        flag="",
        help="Submitit's other sbatch settings, each given as compare.slurm.NAME (--set "
        "compare.slurm.mem=32G); each checked for its type.",
    )

    def check(self) -> None:
        self.options = checked(self.options)


def read(values: dict[str, Any], source: str) -> SlurmConfig:
    """The section from a mapping: its fields by name, every other name one of submitit's
    (given there, or in its `options` mapping)."""
    section = SlurmConfig()
    names = {f for f in SlurmConfig.__dataclass_fields__ if f != "options"}
    apply_values(section, {k: v for k, v in values.items() if k in names or k == "options"}, source, "compare.slurm")
    section.options = {**section.options, **{k: v for k, v in values.items() if k not in names and k != "options"}}
    return section

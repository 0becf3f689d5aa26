"""A run's record as data: `EpochRow` is one line of metrics.csv, `RunSummary` is summary.json,
`Status` says in one place what is complete, resumable or diverged; the file names of a run
folder. `record` writes and reads them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...errors import ConfigError

CONFIG, METRICS, SUMMARY, CHECKPOINT = "config.yaml", "metrics.csv", "summary.json", "checkpoint.pt"
SCHEMA = 3  # 1: written before the typed record (no "schema" key); 2: before the machine signature


class Status(str, Enum):
    INCOMPLETE = "incomplete"  # training, or killed before it could say otherwise
    INTERRUPTED = "interrupted"  # stopped on a signal after a whole epoch
    DIVERGED = "diverged"  # loss became NaN or infinite: training again would too
    COMPLETE = "complete"

    @property
    def resumable(self) -> bool:
        return self in (Status.INCOMPLETE, Status.INTERRUPTED)

    @classmethod
    def of(cls, value: Any) -> "Status":
        try:
            return cls(value)
        except ValueError:
            return cls.INCOMPLETE


@dataclass
class EpochRow:
    """One epoch in metrics.csv; the column order is the field order."""

    epoch: int
    lr: float
    samples: int
    train_seconds: float
    train_loss: float
    test_loss: float
    test_accuracy: float
    pruned: int
    overhead_seconds: float
    # the process's CPU seconds of the epoch's training (a script's: since its last record), beside the
    # wall clock, which other work on the machine stretches; NaN: not recorded (a GPU run, or made before)
    cpu_seconds: float = math.nan

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_csv(cls, row: dict[str, str]) -> "EpochRow":
        """Raises ValueError/KeyError/TypeError on a malformed row."""
        values = {}
        for f in dataclasses.fields(cls):
            text = row.get(f.name)
            if text in (None, "") and f.name == "overhead_seconds":
                text = "0"  # not written by some early parameter-server runs
            if text in (None, "") and f.name == "cpu_seconds":
                text = "nan"  # not recorded: made before CPU time was, or on a GPU
            values[f.name] = int(float(text)) if f.type == "int" else float(text)
        return cls(**values)


@dataclass
class RunSummary:
    """summary.json. Fields a run always has come first; the others depend on its kind."""

    model: str
    dataset: str
    epochs: int
    seed: int
    policy: str = "regular"
    arm: str = ""  # its name in a comparison when that is not the policy (e.g. random-every-20)
    status: Status = Status.INCOMPLETE
    epochs_completed: int = 0
    dataset_label: str = ""
    num_train: int = 0
    classes: int = 0  # label classes; 0: not recorded (made before it), chance level unknown
    num_test: int = 0  # test images, each accuracy a multiple of 100 / num_test (0: not recorded)
    device: str = ""
    run_dir: str = ""
    torch: str = ""
    git_commit: str = ""
    started: str = ""
    finished: str | None = None
    command: str | None = None
    world_size: int = 1
    machine: dict[str, Any] = field(
        default_factory=dict
    )  # engine.training.device.machine_signature; {} before schema 3
    load_average: list[float] = field(default_factory=list)  # 1/5/15-minute load when the run started
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    overhead_seconds: float = 0.0
    # the user's clock from the first epoch's start to the last's end, test passes included; 0: not recorded
    wall_seconds: float = 0.0
    # the metrics' cpu_seconds summed (CPU runs); None: not recorded for every epoch (a GPU run, made before)
    cpu_seconds: float | None = None
    final_accuracy: float = float("nan")
    best3_accuracy: float = float("nan")
    final_test_loss: float | None = None
    samples_seen: int = 0
    samples_skipped: int = 0
    pruning_epochs: list[int] = field(default_factory=list)
    schedule: dict[str, Any] = field(default_factory=dict)  # the prune settings of a pruned run
    data: dict[str, Any] = field(default_factory=dict)  # an image folder's listings (data_identity)
    resumed_after_epochs: list[int] = field(default_factory=list)
    diverged_epoch: int | None = None
    # the digest of the judging plan in force when the run was made (analysis.read.planruns): '' none,
    # None a run recorded before runs recorded it
    plan: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # mode-specific (staleness...), kept as is
    schema: int = SCHEMA

    @property
    def label(self) -> str:
        return self.dataset_label or self.dataset

    @property
    def pruning(self) -> bool:
        return self.policy != "regular"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        extra = data.pop("extra")
        data["pruning"] = self.pruning  # read by schema-1 tools
        return {**data, **extra}

    @classmethod
    def from_dict(cls, data: Any, where: str = SUMMARY) -> "RunSummary":
        """Schema 2, or 1 (no policy: 'fine' when pruning was on). Raises ConfigError when a
        field has the wrong type."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where} is unreadable or corrupt")
        data = dict(data)
        data.pop("pruning", None) if "policy" in data else data.update(
            policy="fine" if data.pop("pruning", False) else "regular"
        )
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "extra"}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        missing = [k for k in ("model", "dataset", "epochs", "seed") if k not in values]
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
        values["status"] = Status.of(values.get("status"))
        summary = cls(**values)
        summary.check_types(where)
        return summary

    def check_types(self, where: str) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or f.name in ("status", "extra"):
                continue
            want = {
                "str": str,
                "int": int,
                "float": (int, float),
                "list[int]": list,
                "list[float]": list,
                "dict[str, Any]": dict,
            }.get(str(f.type).replace("None", "").strip(" |"))
            bad = want is not None and (not isinstance(value, want) or isinstance(value, bool))
            if bad:
                raise ConfigError(f"{where}: '{f.name}' has the wrong type ({type(value).__name__})")

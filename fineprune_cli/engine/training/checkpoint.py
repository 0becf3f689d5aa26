"""Checkpoints (the latest only, written atomically) and graceful stops on SIGINT/SIGTERM.

A checkpoint holds everything the next epoch depends on: weights, optimizer and lr
scheduler, the trainer's and pruner's generators, DroppingCount, the global RNG, the
metrics so far and the time totals. Resuming from it reproduces the uninterrupted run.
"""

from __future__ import annotations

import io
import re
import signal
import threading
import warnings
from pathlib import Path
from typing import Any

from ...errors import ConfigError, FinepruneError
from ...lazytorch import torch
from ..records.files import atomic_torch_save
from ..records.record import CHECKPOINT

# what every .pt file of a run folder may hold: a run folder is data, and nothing read from it
# may run code, so only what torch's weights-only loader builds (no class or function of its own)
DATA_ONLY = "tensors, numbers, strings, None, and lists, tuples, dicts and sets of them (state_dicts are)"

FORMAT = 2  # 1: before the policy protocol (a "pruner" entry and an lr scheduler)
# Generator.set_state takes a CPU ByteTensor only, for a CUDA generator too: these stay on the CPU
HOST_KEYS = frozenset({"generator", "rng"})


class StaleCheckpoint(ConfigError):
    """A checkpoint that can never be continued: an older format, or other settings than the
    run's config. `compare` trains such a run again; any other failure to resume stops it with
    the run folder kept (a fault of the code or the machine must not cost the epochs done)."""


class Interrupted(FinepruneError):
    """SIGINT/SIGTERM: the run stopped after a whole epoch and can be resumed."""

    exit_code = 130


class Stopped(Interrupted):
    """The clean stop: SIGINT/SIGTERM honoured after a whole epoch, checkpointed, nothing lost."""

    stop = True


class StorageFull(FinepruneError):
    """A write failed (disk full, quota, folder gone); the records written before are whole."""

    exit_code = 1


class OutOfMemory(FinepruneError):
    """An allocation failed mid-run (the up-front check is a floor: a model's layers come on top)."""

    exit_code = 1


class Diverged(FinepruneError):
    """The training loss became NaN or infinite; the record is kept with status 'diverged'."""

    exit_code = 1


def save(path: Path, state: dict[str, Any]) -> None:
    state = dict(state, format=FORMAT)
    state["rng"] = {
        "cpu": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
    }
    atomic_torch_save(state, Path(path) / CHECKPOINT)


def load(path: Path, device: torch.device) -> dict[str, Any]:
    file = Path(path) / CHECKPOINT
    if not file.exists():
        raise ConfigError(f"{path} has no {CHECKPOINT}: no epoch was checkpointed; start the run again")
    state = load_data(file)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise StaleCheckpoint(
            f"{file} was written by an older fineprune (checkpoint format "
            f"{state.get('format', 1) if isinstance(state, dict) else '?'}); "
            "train the run again"
        )
    return to_device(state, device)


def load_data(file: Path) -> Any:
    """What a .pt file of a run folder holds, loaded weights-only (DATA_ONLY): a file that would
    build anything else (a planted pickle's os.system, a numpy array) is refused, naming it."""
    if not file.is_file():  # a FIFO would block torch.load
        raise ConfigError(f"{file} is unreadable: not a regular file")
    try:
        with warnings.catch_warnings():  # torch warns before refusing foreign pickles: one line only
            warnings.simplefilter("ignore")
            return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # any failure here means a damaged or foreign file, not a bug to trace
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if found:
            raise ConfigError(
                f"{file} is refused: it holds {found.group(1)}, and a run folder's files may hold only {DATA_ONLY}"
            ) from None
        raise ConfigError(f"{file} is unreadable or corrupt ({type(exc).__name__})") from None


def data_bytes(obj: Any, what: str) -> bytes:
    """torch.save's bytes of `obj`, refused (ConfigError naming `what`) when `load_data` could not
    load them back: a save that no resume can read fails when it is made, not when resumed."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    beyond = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    if beyond:
        raise ConfigError(
            f"{what} was given {', '.join(sorted(beyond))}, which no resume could load: a run folder keeps only "
            f"{DATA_ONLY}; convert the rest (a numpy array: torch.from_numpy)"
        )
    return buf.getvalue()


def to_device(tree: Any, device: torch.device | str) -> Any:
    """Every tensor of a nested dict/list on `device`, except those under a HOST_KEYS key
    (generator states), which stay on the CPU."""
    if isinstance(tree, torch.Tensor):
        return tree.to(device)
    if isinstance(tree, dict):
        return {k: v if k in HOST_KEYS else to_device(v, device) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_device(v, device) for v in tree)
    return tree


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["rng"]["cpu"].cpu())
    if state["rng"]["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])


class StopRequest:
    """While active, the first SIGINT/SIGTERM/SIGHUP (a closed terminal) only asks the loop to stop
    after this epoch; a second one acts as usual (KeyboardInterrupt / termination)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = signal.Signals(signum).name
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}
            for s in self.SIGNALS:
                signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

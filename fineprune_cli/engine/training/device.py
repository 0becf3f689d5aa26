"""The training device: which one, what it is, and timing on it without host syncs."""

from __future__ import annotations

import os
import platform
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch

from ...errors import ConfigError
from ..records.jobenv import CONCURRENCY


def resolve_device(name: str, given_as: str = "--device") -> torch.device:
    """`given_as`: how the error names the setting (a config file's run.device, or the flag)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        fix = "use --device cpu" if given_as == "--device" else "pass --device cpu (flags override the file)"
        raise ConfigError(f"{given_as} {name} asked for, but CUDA is not available here; {fix}")
    return device


def _cpu_model() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"cpu: {_cpu_model()}, {threads} thread{'s' if threads != 1 else ''}"


def machine_signature(device: torch.device) -> dict[str, object]:
    """What decides how fast a run trains, beyond its settings: wall times are compared only
    between runs whose signatures are equal."""
    processor = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_model()
    signature: dict[str, object] = {
        "processor": processor,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "device": device.type,
    }
    concurrency = concurrent_runs()
    if concurrency > 1:  # runs beside it share memory bandwidth and caches: another pace
        signature["concurrency"] = concurrency
    return signature


def concurrent_runs() -> int:
    """How many runs `compare --jobs` ran at once with this one (1 when alone). Only above 1 is
    it recorded, so runs made alone keep the signature they had before it existed."""
    try:
        return max(1, int(os.environ.get(CONCURRENCY, "1")))
    except ValueError:
        return 1


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load of the machine (empty where the OS has none): a run started
    under load is slower for reasons its settings do not show."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return []


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Sums the time of code sections. On CUDA it records events on the run's device and reads
    them once, in `seconds()`, so timing the per-step observe costs no synchronisation."""

    def __init__(self, device: torch.device, start_seconds: float = 0.0):
        self.device = device
        self.cuda = device.type == "cuda"
        self._host = start_seconds
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    @contextmanager
    def section(self) -> Iterator[None]:
        if self.cuda:
            # the stream of our device, not the current device's (GPU 0 unless set_device ran)
            stream = torch.cuda.current_stream(self.device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            yield
            end.record(stream)
            self._events.append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self._host += time.perf_counter() - t0

    def seconds(self) -> float:
        if self._events:
            synchronize(self.device)
            self._host += sum(s.elapsed_time(e) for s, e in self._events) / 1000.0
            self._events.clear()
        return self._host

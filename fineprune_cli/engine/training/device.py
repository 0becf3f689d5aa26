"""The training device: which one, what it is, and timing on it without host syncs."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ...errors import ConfigError
from ...lazytorch import loaded, torch
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


def describe_device(device: torch.device | str) -> str:
    if device_kind(device) == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch_threads()
    return f"cpu: {_cpu_model()}, {threads} thread{'s' if threads != 1 else ''}"


def machine_signature(device: torch.device | str) -> dict[str, object]:
    """What decides how fast a run trains, beyond its settings: wall times are compared only
    between runs whose signatures are equal."""
    kind = device_kind(device)
    processor = torch.cuda.get_device_name(device) if kind == "cuda" else _cpu_model()
    signature: dict[str, object] = {
        "processor": processor,
        "threads": torch_threads(),
        "torch": torch_version(),
        "device": kind,
    }
    concurrency = concurrent_runs()
    if concurrency > 1:  # runs beside it share memory bandwidth and caches: another pace
        signature["concurrency"] = concurrency
    return signature


def device_kind(device: torch.device | str) -> str:
    return device.split(":")[0] if isinstance(device, str) else device.type


def torch_threads() -> int:
    """torch's intra-op threads: its own count where this process imported torch, else the count it
    would start with (OMP_NUM_THREADS, else the cores this process may use, as OpenMP counts them:
    the fork server's children are set so), for a script that records its runs but never uses torch."""
    module = loaded()
    if module is not None:
        return module.get_num_threads()
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    return int(wanted) if wanted.isdigit() and int(wanted) > 0 else len(os.sched_getaffinity(0))


def torch_version() -> str:
    """torch.__version__ (with its build, e.g. '+cu130', which the package's metadata leaves out),
    read from its version.py where torch is not imported: importing it costs 1.5 s of CPU."""
    module = loaded()
    if module is not None:
        return str(module.__version__)
    spec = importlib.util.find_spec("torch")  # finds the package without running it
    folder = spec.submodule_search_locations if spec is not None else None
    text = Path(next(iter(folder)), "version.py").read_text() if folder else ""
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return found.group(1) if found else str(torch.__version__)


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

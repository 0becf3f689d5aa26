"""Timing that never forces a host sync inside an epoch."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Sums the time of code sections. On CUDA it records events and reads them once, in
    `seconds()`, so timing the per-step tracker update costs no synchronisation."""

    def __init__(self, device: torch.device, start_seconds: float = 0.0):
        self.cuda = device.type == "cuda"
        self._host = start_seconds
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    @contextmanager
    def section(self) -> Iterator[None]:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self._host += time.perf_counter() - t0

    def seconds(self) -> float:
        if self._events:
            torch.cuda.synchronize()
            self._host += sum(s.elapsed_time(e) for s, e in self._events) / 1000.0
            self._events.clear()
        return self._host

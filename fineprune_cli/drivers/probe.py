"""The dry run's timing probe: the trainer's own step and evaluation, timed on random inputs.

One probe was a second of steps right after start-up, at whatever thread count the command's
process had; load and warm-up turned it into anything from 2x to 80x the measured time. Here
the untimed warm-up runs until the step time has settled, the timed steps come in REPEATS
repeats of at least REPEAT_S each, the figure is their median, and repeats that disagree by
more than SPREAD_LIMIT give no figure at all (the machine's speed is changing under us). The
probe runs at the thread count the run will use.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

WARMUP_STEPS = 3  # untimed: allocation, first-call and kernel-choice overheads ...
WARMUP_S = 0.3  # ... and at least this long, so the clock and the caches have settled
WARMUP_MAX_S = 2.0  # ... but two steps are enough where they took this long (a ResNet on a CPU)
REPEATS = 5  # timed repeats; the figure is their median
MIN_REPEATS = 3  # a slow model (a ResNet step on a CPU takes seconds) stops here ...
BUDGET_S = 15.0  # ... once the probe has taken this long
REPEAT_S = 0.25  # each repeat: whole steps until this much time has passed (at least one)
SPREAD_LIMIT = 2.0  # repeats further apart than this: the machine's speed changes, no estimate
TIMED_BATCH = 128  # the run's batch up to this
EVAL_IMAGES = 128  # the evaluation batch up to this (a ResNet forward on a CPU is slow too)
PROBE_LR = 1e-4  # random labels at the run's lr may diverge; the step costs the same


@dataclass
class Probe:
    """Seconds per image of each timed repeat, training and evaluation apart."""

    train_s: list[float]
    eval_s: list[float]
    threads: int  # torch threads the probe ran with (the run's)
    batch: int  # images per timed training step
    load: float | None = None  # the machine's 1-minute load average when it ran
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))

    @property
    def train(self) -> float:
        return statistics.median(self.train_s)

    @property
    def eval(self) -> float:
        return statistics.median(self.eval_s) if self.eval_s else 0.0

    def spread(self) -> float:
        """Slowest over fastest training repeat: 1.0 on a steady machine."""
        return max(self.train_s) / min(self.train_s)

    def unsteady(self) -> str:
        """Why its figure cannot be trusted ('' when it can)."""
        if self.spread() <= SPREAD_LIMIT:
            return ""
        low, high = (step_text(s * self.batch) for s in (min(self.train_s), max(self.train_s)))
        return (
            f"the probe's {len(self.train_s)} timed repeats took {low} to {high} per step "
            f"({self.spread():.1f}x apart, more than {SPREAD_LIMIT:g}x): the machine's speed is changing"
            f"{busy(self.load, self.cores)}; run --dry-run again when it is steadier"
        )


def step_text(seconds: float) -> str:
    """'605 ms', '11.4 s'."""
    return f"{1000 * seconds:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def busy(load: float | None, cores: int) -> str:
    """' (load 5.1 on 2 cores)' where other work competes for the cores, else ''."""
    return f" (load {load:.1f} on {cores} cores)" if load is not None and load >= cores / 2 else ""


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not on every platform
        return None


def per_call(fn: Callable[[], Any], clock: Callable[[], float], min_s: float) -> float:
    """Seconds per call of `fn`, called until `min_s` has passed (at least once)."""
    start, calls = clock(), 0
    while calls == 0 or clock() - start < min_s:
        fn()
        calls += 1
    return (clock() - start) / calls


def measure(
    step: Callable[[], Any], evaluate: Callable[[], Any], clock: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """Seconds per training step and per evaluation of each timed repeat, after the warm-up."""
    start, warm = clock(), 0
    while warm < 2 or (warm < WARMUP_STEPS or clock() - start < WARMUP_S) and clock() - start < WARMUP_MAX_S:
        step()
        warm += 1
    start, steps, evals = clock(), [], []
    while len(steps) < REPEATS and (len(steps) < MIN_REPEATS or clock() - start < BUDGET_S):
        steps.append(per_call(step, clock, REPEAT_S))
        if not evals or clock() - start < BUDGET_S:  # a small share of a run: once is enough when slow
            evals.append(per_call(evaluate, clock, 0.0))
    return steps, evals


def probe(cfg: Any, channels: int, size: int, classes: int, threads: int | None) -> Probe:
    """Time the run's model in the engine's trainer on random inputs of the run's shape, at
    `threads` torch threads (None: this process's count, which a run in this process uses)."""
    import torch

    from ..engine.device import resolve_device, synchronize
    from ..engine.build import build_model
    from ..engine.devicedata import wants_augment
    from ..engine.trainer import Trainer

    device = resolve_device(cfg.run.device)
    batch, tests = min(cfg.train.batch_size, TIMED_BATCH), min(cfg.train.eval_batch_size, EVAL_IMAGES)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        data = random_data(channels, size, classes, batch, tests, wants_augment(cfg.data.augment, channels), device)
        train_cfg = replace(cfg.train, batch_size=batch, lr=PROBE_LR)
        trainer = Trainer(build_model(cfg, channels, classes), data, train_cfg, device, cfg.run.seed)

        def step() -> None:  # one batch: the data holds exactly one
            trainer.train_epoch(1)
            synchronize(device)

        load = load_average()
        steps, evals = measure(step, trainer.evaluate, time.perf_counter)
    finally:
        torch.set_num_threads(before)
    return Probe([s / batch for s in steps], [e / tests for e in evals], threads or before, batch, load)


def random_data(channels: int, size: int, classes: int, batch: int, tests: int, augment: bool, device: Any) -> Any:
    """One training batch and one evaluation batch of normalised noise, stored as a run's are."""
    import torch

    from ..engine.devicedata import CropFlip, DeviceData, crop_pad, pad_images

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    gen = torch.Generator().manual_seed(0)
    train_x = torch.randn(batch, channels, size, size, generator=gen)
    crop = None
    if augment:
        train_x = pad_images(train_x, crop_pad(size), torch.zeros(channels))
        crop = CropFlip(size, crop_pad(size), device)
    test_x = torch.randn(tests, channels, size, size, generator=gen)
    return DeviceData(
        train_x.to(device, dtype),
        torch.randint(0, classes, (batch,), generator=gen).to(device),
        test_x.to(device, dtype),
        torch.randint(0, classes, (tests,), generator=gen).to(device),
        crop,
    )

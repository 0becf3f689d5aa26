"""The dry run's timing probe: the trainer's own step and evaluation, timed on random inputs.

One probe was a second of steps right after start-up, at whatever thread count the command's
process had; load and warm-up turned it into anything from 2x to 80x the measured time. Here
the untimed warm-up runs until the step time has settled, the timed steps come in REPEATS
repeats of at least REPEAT_S each, the figure is their median, and repeats that disagree by
more than SPREAD_LIMIT give no figure at all (the machine's speed is changing under us). The
probe runs at the thread count the run will use.

A run's start-up was not counted, and on a small run it is about a third of its time (issue 41):
the interpreter and torch imported where the run is a process of its own (`--jobs`, `--threads`,
Slurm), the data's identity read and the data loaded, the model and trainer built. The probe
times each of them as the run does them (`start_up`), except an image folder's first decoding.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
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
NOISY = 1.25  # repeats further apart than this: the estimate is given as a range, fastest to slowest
IMPORT_TIMEOUT_S = 120  # a fresh interpreter importing what a run's process imports
# what `python -m fineprune_cli.drivers.executors.child` imports before its run starts
RUN_IMPORTS = "import torch, fineprune_cli.drivers.executors.child, fineprune_cli.engine.training.session, fineprune_cli.engine.training.build"


@dataclass
class Probe:
    """Seconds per image of each timed repeat, training and evaluation apart."""

    train_s: list[float]
    eval_s: list[float]
    threads: int  # torch threads the probe ran with (the run's)
    batch: int  # images per timed training step
    load: float | None = None  # the machine's 1-minute load average when it ran
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    start_s: float = 0.0  # a run's start-up before its first epoch (`start_up`)
    start_missing: str = ""  # what of the start-up could not be timed ('' when all was)

    @property
    def train(self) -> float:
        return statistics.median(self.train_s)

    @property
    def eval(self) -> float:
        return statistics.median(self.eval_s) if self.eval_s else 0.0

    def seconds_per_image(self, which: str = "median") -> float:
        """The training cost: the median repeat, or the 'fastest' or 'slowest' one."""
        return {"median": self.train, "fastest": min(self.train_s), "slowest": max(self.train_s)}[which]

    def noisy(self) -> bool:
        """Repeats apart enough that one figure would claim more than the probe knows."""
        return self.spread() > NOISY

    def spread(self) -> float:
        """Slowest over fastest training repeat: 1.0 on a steady machine."""
        return max(self.train_s) / min(self.train_s)

    def step_range(self) -> tuple[str, str]:
        """Its fastest and slowest training step, as text."""
        return step_text(min(self.train_s) * self.batch), step_text(max(self.train_s) * self.batch)

    def unsteady(self) -> str:
        """Why its figure cannot be trusted ('' when it can)."""
        if self.spread() <= SPREAD_LIMIT:
            return ""
        low, high = self.step_range()
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
    `threads` torch threads (None: this process's count, which a run in this process uses; a
    count: the run is a process of its own, whose start-up imports torch afresh)."""
    import torch

    from ..engine.inputs.devicedata import wants_augment
    from ..engine.training.build import build_model, check_factory
    from ..engine.training.device import resolve_device, synchronize
    from ..engine.training.trainer import Trainer

    device = resolve_device(cfg.run.device)
    check_factory(cfg, (channels, size, classes))  # a user's model that cannot train: one line, not a traceback
    batch, tests = min(cfg.train.batch_size, TIMED_BATCH), min(cfg.train.eval_batch_size, EVAL_IMAGES)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        data = random_data(channels, size, classes, batch, tests, wants_augment(cfg.data.augment, channels), device)
        train_cfg = replace(cfg.train, batch_size=batch, lr=PROBE_LR)
        built = time.perf_counter()
        trainer = Trainer(build_model(cfg, channels, classes), data, train_cfg, device, cfg.run.seed)
        built = time.perf_counter() - built

        def step() -> None:  # one batch: the data holds exactly one
            trainer.train_epoch(1)
            synchronize(device)

        load = load_average()
        steps, evals = measure(step, trainer.evaluate, time.perf_counter)
    finally:
        torch.set_num_threads(before)
    start, missing = start_up(cfg, spawned=threads is not None)
    train_s, eval_s = [s / batch for s in steps], [e / tests for e in evals]
    return Probe(train_s, eval_s, threads or before, batch, load, start_s=start + built, start_missing=missing)


def start_up(cfg: Any, spawned: bool) -> tuple[float, str]:
    """(seconds, what was not timed) of a run's start-up before its model is built: a fresh
    interpreter's imports where the run is a process of its own, its data's identity, and its
    data read (a built-in dataset from its files, an image folder from its cache: the first
    decoding of a folder is not timed, and said)."""
    from ..engine.inputs.imagefolder import cache_path
    from ..engine.inputs.stream import data_identity
    from ..errors import FinepruneError

    started, missing = time.perf_counter(), ""
    if spawned:
        try:
            subprocess.run([sys.executable, "-c", RUN_IMPORTS], capture_output=True, timeout=IMPORT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            missing = "a run's process starting"
    try:
        data_identity(cfg.data)
        missing = "; ".join(filter(None, [missing, _read_data(cfg.data, cache_path)]))
    except FinepruneError:  # the run itself will say what is wrong with its data
        missing = "; ".join(filter(None, [missing, "loading the data"]))
    return time.perf_counter() - started, missing


def _read_data(d: Any, cache_path: Callable[..., Any]) -> str:
    """Reads the run's data as its start-up does; what could not be read so ('' when all)."""
    import torch

    from ..engine.inputs.data import load_dataset

    if d.dataset != "folder":
        load_dataset(d.dataset, d.data_dir, False, d.subset, test_subset=d.test_subset, image_size=d.image_size)
        return ""
    from pathlib import Path

    cache = cache_path(Path(d.data_dir), d.image_size)
    first = "decoding the image folder the first time (later runs read it from the cache)"
    if not cache.is_file():
        return first
    try:  # weights-only: a planted cache runs nothing; a broken one the run decodes again
        torch.load(cache, weights_only=True)
    except Exception:
        return first
    return ""


def random_data(channels: int, size: int, classes: int, batch: int, tests: int, augment: bool, device: Any) -> Any:
    """One training batch and one evaluation batch of normalised noise, stored as a run's are."""
    import torch

    from ..engine.inputs.devicedata import CropFlip, DeviceData, crop_pad, pad_images

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

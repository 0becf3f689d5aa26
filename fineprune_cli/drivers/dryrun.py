"""`--dry-run`: what `train` or `compare` would do, from the settings alone.

Each planned run's epochs, pruning epochs (the schedule's, cut by annealing, as `fineprune
estimate` counts them) and folder, and a rough time: images to train x a per-image cost timed
on a few SGD steps of a throw-away copy of the model on random inputs. No data is loaded and
nothing is written (the image folder is listed, and one header read, for its size).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from ..engine.config import Config, DataConfig, validate
from ..pruning.estimate import estimate
from ..pruning.registry import get
from ..pruning.schedule import PruneSchedule
from .compare import CompareConfig, existing_state, job_config, plan

# (training images, channels, image size, classes) of the built-in datasets
KNOWN = {"fashion-mnist": (60000, 1, 28, 10), "cifar10": (50000, 3, 32, 10),
         "cifar100": (50000, 3, 32, 100), "synthetic": (50000, 3, 32, 10)}
WARMUP_STEPS = 2   # untimed: allocation and first-call overheads (CPU kernels, cuDNN choices)
TIMED_SECONDS = 1.0  # timed steps until this much time has passed ...
MAX_STEPS = 20       # ... or this many steps (a fast model on a GPU)
TIMED_BATCH = 128  # the run's batch up to this: a ResNet step on a CPU takes seconds


@dataclass
class PlannedRun:
    model: str
    dataset: str
    arm: str
    seed: int
    epochs: int
    pruning_epochs: list[int] | None   # None: chosen from the losses during the run
    prune_fraction: float
    images: int | None                 # training images over the run (None: dataset size unknown)
    run_dir: str
    state: str = "new"                 # compare: 'complete' and 'diverged' runs are not trained again


@dataclass
class DryRun:
    config: dict[str, Any]
    runs: list[PlannedRun]
    seconds_per_image: dict[str, float]   # model -> measured rough cost (training step only)
    estimated_seconds: float | None
    device: str
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shape_of(d: DataConfig) -> tuple[int, int, int, int]:
    """(training images, channels, size, classes), without loading the data."""
    if d.dataset == "folder":  # as the loader sees it: the file list and the headers, no pixels
        from ..engine.imagefolder import folder_mode
        from ..engine.stream import folder_listing

        listing = folder_listing(d)
        mode, shape = folder_mode(listing, d.image_size)
        n, channels, classes = len(listing["train"]), 3 if mode == "RGB" else 1, len(listing["train_classes"])
        size = d.image_size or max(shape)
    else:
        n, channels, size, classes = KNOWN[d.dataset]
    return (min(n, d.subset) if d.subset else n), channels, size, classes


def planned(cfg: Config, arm: str, n: int) -> PlannedRun:
    """One run: its pruning epochs (None for a policy that picks them from the losses)."""
    p, epochs = cfg.prune, cfg.train.epochs
    pruning: list[int] | None = []
    images = epochs * n
    if p.enabled:
        kind = get(p.policy)
        if not kind.budget_before_run:
            pruning = None
        else:
            anneal = p.anneal if p.anneal is not None else kind.default_anneal
            est = estimate(PruneSchedule.from_config(p), epochs, p.prune_fraction, anneal=anneal)
            pruning, images = est.pruning_epochs, round(est.t_prune * n)
    fraction = p.prune_fraction if p.enabled else 0.0
    return PlannedRun(cfg.model.name, cfg.data.dataset, arm, cfg.run.seed, epochs, pruning, fraction,
                      images, cfg.run.out or "")


def per_image_seconds(cfg: Config, channels: int, size: int, classes: int) -> float:
    """Seconds per training image of a few SGD steps on random inputs: rough (no data loading,
    no evaluation, no compile or bf16, the machine's load now), enough to tell minutes from days."""
    import torch

    from ..engine.device import resolve_device, synchronize
    from ..engine.build import build_model

    device = resolve_device(cfg.run.device)
    model = build_model(cfg, channels, classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = min(cfg.train.batch_size, TIMED_BATCH)
    x = torch.randn(batch, channels, size, size, device=device)
    y = torch.randint(0, classes, (batch,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(WARMUP_STEPS):
        step()
    synchronize(device)
    start, steps = time.perf_counter(), 0
    while steps < MAX_STEPS and (steps == 0 or time.perf_counter() - start < TIMED_SECONDS):
        step()
        synchronize(device)
        steps += 1
    return (time.perf_counter() - start) / (steps * batch)


def dry_train(cfg: Config) -> DryRun:
    """`train --dry-run`: the one run, in the folder it would get (named by the time now)."""
    from ..engine.record import default_run_dir

    validate(cfg)
    n, channels, size, classes = shape_of(cfg.data)
    run = planned(cfg, cfg.prune.active_policy, n)
    run.run_dir = run.run_dir or str(default_run_dir(cfg.model.name, cfg.data.dataset))
    return _timed(cfg.to_dict(), [run], {cfg.model.name: (cfg, channels, size, classes)}, cfg)


def dry_compare(cfg: Config, c: CompareConfig) -> DryRun:
    """`compare --dry-run`: every arm x seed of the matrix, in run order."""
    from ..engine.stream import data_identity

    runs, shapes, identities, costs = [], {}, {}, {}
    for job in plan(cfg, c):
        job_cfg = job_config(cfg, job, c.out)
        if job.dataset not in shapes:
            shapes[job.dataset], identities[job.dataset] = shape_of(job_cfg.data), data_identity(job_cfg.data)
        n, channels, size, classes = shapes[job.dataset]
        runs.append(planned(job_cfg, job.arm, n))
        # read only: a folder of other settings is refused here as the real compare would
        runs[-1].state = existing_state(job_cfg, identities[job.dataset])
        costs.setdefault(job.model, (job_cfg, channels, size, classes))
    experiment = {**cfg.to_dict(), "compare": asdict(c)}
    return _timed(experiment, runs, costs, cfg)


def _timed(config: dict[str, Any], runs: list[PlannedRun], costs: dict[str, tuple], cfg: Config) -> DryRun:
    from ..engine.device import resolve_device

    device = str(resolve_device(cfg.run.device))
    per_image = {model: per_image_seconds(*args) for model, args in costs.items()}
    total = sum(r.images * per_image[r.model] for r in runs
                if r.images is not None and r.state in ("new", "incomplete"))
    dynamic = any(r.pruning_epochs is None for r in runs)
    note = (f"rough estimate: training steps only, each model's cost per image timed on a few SGD steps of "
            f"batch {min(cfg.train.batch_size, TIMED_BATCH)} on random inputs now; no data loading or evaluation"
            + ("; loss-driven policies counted as training every sample" if dynamic else ""))
    return DryRun(config, runs, per_image, total, device, note)

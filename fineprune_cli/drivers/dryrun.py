"""`--dry-run`: what `train` or `compare` would do, from the settings alone.

Each planned run's epochs, pruning epochs (the schedule's, cut by annealing, as `fineprune
estimate` counts them) and folder, and a time: the images each run trains and evaluates x a
cost per image the probe (drivers/probe.py) measures for its model at the thread count it will
run with, plus the run's start-up as the probe timed it; the runs then placed on the slots they
will share (`--jobs`), look by look for `--until-decided` (that arithmetic: drytime.py). Where
the probe's repeats differ by more than probe.NOISY, the figure comes with a range, from the
fastest repeat to the slowest. Runs of several threads on a CPU with more work than cores get
no figure (their pace swings with the other work) but the figure at 1 thread. No data is loaded
and nothing is written (the image folder is listed, and one header read, for its size; the data
is read once, as a run's start-up reads it, to time that).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from ..engine.inputs.datashape import shape_of
from ..engine.setup.config import Config, validate
from ..engine.setup.scriptconfig import used_by_script
from ..pruning.estimate import estimate
from ..pruning.policy import random_equal_note
from ..pruning.registry import get
from ..pruning.schedule import PruneSchedule
from .compare import CompareConfig, job_config, plan, shared_schedules
from .drytime import Pace, PlannedRun, contended, ranges, time_runs, wall
from .matrix import random_equal_lines
from .probe import Probe, busy, probe, step_text
from .reuse import existing_state
from .trainers.registry import trainer_for

Timer = Callable[[Config, int, int, int, "int | None"], Probe]  # probe's signature: tests pass their own


@dataclass
class DryRun:
    config: dict[str, Any]
    runs: list[PlannedRun]
    seconds_per_image: dict[str, float]  # 'model-dataset' -> training seconds per image (the probe's median)
    eval_seconds_per_image: dict[str, float]
    estimated_seconds: float | None  # wall time of all of it (--until-decided: every look); None: see why
    fewest_seconds: float | None  # the least it can take (--until-decided: the first look decides all)
    cannot_estimate: str  # why there is no estimate ('' when there is one)
    device: str
    pace: Pace
    looks: list[int]
    note: str
    probes: dict[str, Probe] = field(default_factory=dict)
    one_thread_seconds: float | None = None  # a busy CPU, runs of several threads: the most at 1 thread a run
    fewest_range: tuple[float, float] | None = None  # a noisy probe: fewest_seconds at its fastest, slowest repeat
    estimated_range: tuple[float, float] | None = None  # the same for estimated_seconds
    schedule_check: str = ""  # --script with shorter arms: what compare checks of the script's schedule
    random_equal: list[str] = field(default_factory=list)  # arms whose policy is its random control
    shared_schedules: str = ""  # --until-decided: the shorter arms a look may add that are one schedule
    range_note: str = ""  # what the bracketed ranges span, where not the probe's repeats

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def planned(cfg: Config, arm: str, n: int, tests: int = 0) -> PlannedRun:
    """One run: its pruning epochs (None for a policy that picks them during the run) and which of
    them are random-equal (`Policy.random_equal_epochs`)."""
    p, epochs = cfg.prune, cfg.train.epochs
    pruning: list[int] | None = []
    images, equal, unplanned = epochs * n, [], ""
    if p.enabled:
        kind = get(p.policy)
        if not kind.budget_before_run:
            pruning, unplanned = None, kind.unplanned
        else:
            schedule = PruneSchedule.from_config(p)
            est = estimate(schedule, epochs, p.prune_fraction, anneal=kind.anneal_of(p))
            pruning, images = est.pruning_epochs, round(est.t_prune * n)
            equal = kind.random_equal_epochs(schedule.window, pruning)
    fraction = p.prune_fraction if p.enabled else 0.0
    where = cfg.run.out or ""
    return PlannedRun(
        cfg.model.name,
        cfg.data.dataset,
        arm,
        cfg.run.seed,
        epochs,
        pruning,
        fraction,
        images,
        where,
        tests,
        random_equal_epochs=equal,
        unplanned=unplanned,
    )


def dry_train(cfg: Config, timer: Timer | None = None) -> DryRun:
    """`train --dry-run`: the one run, in the folder it would get (named by the time now)."""
    from ..engine.records.record import default_run_dir

    validate(cfg)
    n, tests, channels, size, classes = shape_of(cfg.data)
    run = planned(cfg, cfg.prune.active_policy, n, tests)
    run.run_dir = run.run_dir or str(default_run_dir(cfg.model.name, cfg.data.dataset))
    dry = _timed(
        cfg.to_dict(), [run], {f"{run.model}-{run.dataset}": (cfg, channels, size, classes)}, cfg, Pace(), [], timer
    )
    note = random_equal_note(cfg.policy, cfg.prune, cfg.train.epochs)
    return replace(dry, random_equal=[note] if note else [])


def dry_compare(cfg: Config, c: CompareConfig, timer: Timer | None = None) -> DryRun:
    """`compare --dry-run`: every arm x seed of the matrix, in run order; with --until-decided
    the seeds of every look, each run tagged with the first look that trains it."""
    matrix = replace(c, seeds=list(range(c.looks[-1]))) if c.until_decided else c
    dry = DRY_PLANS[trainer_for(cfg).name](cfg, c, matrix, timer)
    return replace(dry, shared_schedules=shared_schedules(cfg)) if c.until_decided else dry


def builtin_plan(cfg: Config, c: CompareConfig, matrix: CompareConfig, timer: Timer | None) -> DryRun:
    """fineprune's trainer's runs, timed by the probe of each model's step."""
    from ..engine.inputs.stream import data_identity

    runs, shapes, identities, costs, configs = [], {}, {}, {}, []
    for job in plan(cfg, matrix):
        job_cfg = job_config(cfg, job, c.out)
        configs.append((job, job_cfg))
        if job.dataset not in shapes:
            shapes[job.dataset], identities[job.dataset] = shape_of(job_cfg.data), data_identity(job_cfg.data)
        n, tests, channels, size, classes = shapes[job.dataset]
        runs.append(planned(job_cfg, job.arm, n, tests))
        runs[-1].look = next((k for k, seeds in enumerate(c.looks, 1) if job.seed < seeds), 1)
        # read only: a folder of other settings is refused here as the real compare would
        runs[-1].state = existing_state(job_cfg, identities[job.dataset])
        costs.setdefault(f"{job.model}-{job.dataset}", (job_cfg, channels, size, classes))
    experiment = {**cfg.to_dict(), "compare": c.to_dict()}
    dry = _timed(experiment, runs, costs, cfg, pace_of(cfg, c), c.looks, timer)
    return replace(dry, random_equal=random_equal_lines(configs))


def script_plan(cfg: Config, c: CompareConfig, matrix: CompareConfig, timer: Timer | None = None) -> DryRun:
    """`compare --script --dry-run`: the runs and their schedules, timed from one epoch of the
    script (scriptprobe.py): from pruning saving its skipped share of each epoch's training to it
    saving none, since only the script knows what a pruned epoch costs it."""
    from .scriptprobe import ScriptEpoch, time_one_epoch

    timed = time_one_epoch(cfg, matrix)
    epoch = timed if isinstance(timed, ScriptEpoch) else None
    runs, configs = [], []
    for job in plan(cfg, matrix):
        job_cfg = job_config(cfg, job, c.out)
        configs.append((job, job_cfg))
        runs.append(planned(job_cfg, job.arm, epoch.num_train if epoch else 1))
        runs[-1].look = next((k for k, seeds in enumerate(c.looks, 1) if job.seed < seeds), 1)
        runs[-1].state = existing_state(job_cfg, {})
    experiment = {**used_by_script(cfg.to_dict()), "compare": c.to_dict()}
    check = SCHEDULE_CHECK if c.shorter or c.until_decided else ""  # later looks may add shorter arms
    pace = pace_of(cfg, c)
    why = f"one epoch of the script could not be timed: {timed}" if epoch is None else ""
    dry = DryRun(
        experiment, runs, {}, {}, None, None, why, cfg.run.device, pace, list(c.looks), "", schedule_check=check
    )
    if epoch is not None:
        dry = _script_times(dry, epoch)
    return replace(dry, random_equal=random_equal_lines(configs))


def _script_times(dry: DryRun, epoch: Any) -> DryRun:
    """The plan's fewest and most seconds, each from pruning saving its share to saving none."""
    last = max((r.look for r in dry.runs), default=1)
    spans = []
    for saves in (True, False):
        for r in dry.runs:
            r.seconds = epoch.run_seconds(r, saves)
        spans.append((wall(dry.runs, dry.pace.at_once, 1), wall(dry.runs, dry.pace.at_once or 1, last)))
    for r in dry.runs:
        r.seconds = epoch.run_seconds(r)
    (fewest, most), (fewest_high, most_high) = spans
    note = epoch.text() + "; a pruned epoch counted as saving its skipped share of the training"
    return replace(
        dry,
        estimated_seconds=most,
        fewest_seconds=fewest,
        fewest_range=(fewest, fewest_high) if fewest_high > fewest else None,
        estimated_range=(most, most_high) if most_high > most else None,
        range_note="in brackets: from pruning saving its whole skipped share of the training to saving none of it",
        note=note,
    )


SCHEDULE_CHECK = (
    "each shorter arm must train regular's learning-rate schedule compressed to its epochs (T_max and milestones "
    "from {epochs}; a warm-up or cool-down held fixed or rounded to whole epochs); compare reads the lr your script passes to run.log once a seed has regular and "
    "a shorter arm, and refuses one that is not (a script that logs no lr is not checked)"
)


# each trainer's dry run (trainers/registry.py names them; a test checks every one has its plan)
DRY_PLANS: dict[str, Callable[[Config, CompareConfig, CompareConfig, "Timer | None"], DryRun]] = {
    "builtin": builtin_plan,
    "script": script_plan,
}


def pace_of(cfg: Config, c: CompareConfig) -> Pace:
    """The slots a real compare would use; --jobs or --threads beyond the machine is refused
    here as it would be there."""
    from .executors import registry

    return Pace(*registry.kind(c.executor).pace(cfg, c))


def _timed(
    config: dict[str, Any],
    runs: list[PlannedRun],
    costs: dict[str, tuple],
    cfg: Config,
    pace: Pace,
    looks: list[int],
    timer: Timer | None,
) -> DryRun:
    from ..engine.training.device import resolve_device

    device = str(resolve_device(cfg.run.device))
    timer = timer or probe  # looked up now: a test replaces the module's probe
    probes = {key: timer(*args, pace.threads) for key, args in costs.items()}
    one = None
    why = contended(next(iter(probes.values()))) if device == "cpu" else ""
    if why:
        fewest = most = None
        one = time_runs([replace(r) for r in runs], {k: timer(*args, 1) for k, args in costs.items()}, pace)[1]
        spans: list = [None, None]
    else:
        fewest, most, why = time_runs(runs, probes, pace)
        spans = ranges(runs, probes, pace) if not why else [None, None]
    return DryRun(
        config,
        runs,
        {k: p.train for k, p in probes.items()},
        {k: p.eval for k, p in probes.items()},
        most,
        fewest,
        why,
        device,
        pace,
        list(looks),
        _note(runs, probes, pace, looks),
        probes,
        one,
        *spans,
    )


def _note(runs: list[PlannedRun], probes: dict[str, Probe], pace: Pace, looks: list[int]) -> str:
    """How the figure was made and what it leaves out."""
    p = next(iter(probes.values()))
    parts = [
        f"each model's training step and evaluation timed on random inputs: the median of "
        f"{len(p.train_s)} repeats after a warm-up ({step_text(p.train * p.batch)} per step of "
        f"{p.batch} images at {p.threads} thread{'s' if p.threads != 1 else ''})"
    ]
    if p.load is not None:
        parts.append(
            f"machine load {p.load:.1f} on {p.cores} cores when timed: "
            + (
                "the figure holds while that load lasts, an idle machine is faster"
                if busy(p.load, p.cores)
                else "about idle, other work started meanwhile slows the runs"
            )
        )
    if pace.at_once > 1:
        parts.append(
            f"{pace.at_once} runs at once on cores of their own; they share the memory bus, "
            "so expect them somewhat slower"
        )
    if pace.at_once == 0:
        parts.append("timed on this machine, not the cluster's nodes; how many run at once is the queue's")
    if any(r.pruning_epochs is None for r in runs):
        parts.append("policies that choose their pruning during the run counted as training every sample")
    if looks:
        parts.append(
            "later looks train only regular, the undecided policies and their alternatives, "
            "and may add shorter-schedule arms not counted here"
        )
    parts.append(
        f"each run's start-up timed as {step_text(p.start_s)} (its process, data and model)"
        + (f", not counting {p.start_missing}" if p.start_missing else "")
    )
    parts.append("not counted: torch.compile")
    return "; ".join(parts)

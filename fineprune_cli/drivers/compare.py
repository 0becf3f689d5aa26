"""`fineprune compare`: the same training under several pruning policies and seeds.

Every (model, dataset, policy, seed) is one ordinary run folder under
`<compare.out>/<model>-<dataset>/<policy>-seed<seed>/`. A folder whose summary says
"complete" and whose settings match is reused, so an interrupted matrix continues where
it stopped; an incomplete one is trained again from epoch 1.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import console
from ..arms import shorter_arm, shorter_schedule
from ..engine.setup.config import Config, load_yaml, resolve, split_experiment, validate
from ..errors import ConfigError
from ..pruning.registry import list_policies
from ..settings import apply_values, between, check_section, fields, option
from .executors import registry, sections
from .job import Job
from .trainers.registry import trainer_for

# the looks --until-decided plans unless told: in the simulated power table (docs/decisions.md)
# they decided more policies per seed trained than 3, 5, 8 at every noise level measured
DEFAULT_LOOKS = (5, 8, 12)


def _policies(names: list[str]) -> str | None:
    bad = [p for p in names if p not in list_policies()]
    if bad or not names:
        return f"takes policies from: {', '.join(list_policies())}" + (f" (not '{bad[0]}')" if bad else "")
    return None


@dataclass
class CompareConfig:
    """The matrix `fineprune compare` runs: an experiment file's `compare` section."""

    models: list[str] = option(
        factory=list, flag="--model -m", help="Model name(s), comma-separated. (default model.name)"
    )
    datasets: list[str] = option(
        factory=list, flag="--dataset -d", help="Dataset name(s), comma-separated. (default data.dataset)"
    )
    policies: list[str] = option(
        factory=lambda: ["regular", "fine", "random"],
        check=_policies,
        help="Policies to compare, comma-separated (see `fineprune policies`). (default regular,fine,random)",
    )
    seeds: list[int] = option(
        factory=lambda: [0],
        check=lambda v: (
            None if 1 <= len(v) <= MAX_SEEDS else f"must list between 1 and {MAX_SEEDS:,} seeds ({len(v):,} listed)"
        ),
        help="Seeds, e.g. 0,1,2. (default 0)",
    )
    frontier: list[float] = option(
        factory=list,
        check=lambda v: None if all(0 < f < 1 for f in v) else "takes fractions in (0, 1)",
        help="The random frontier: `random` pruning in every epoch at these prune fractions, "
        "e.g. 0.1,0.2,0.3,0.4,0.5, so each policy meets random at its own budget.",
    )
    shorter: list[float] = option(
        factory=list,
        check=lambda v: None if all(0 < f < 1 for f in v) else "takes fractions in (0, 1)",
        help="The shorter-schedule frontier: regular training for round((1 - b) x epochs) "
        "epochs, milestones and warm-up scaled alike, at these budgets b, e.g. 0.1,0.3, "
        "so each policy meets simply training less at its own budget.",
    )
    order: str = option(
        "seed",
        choices=("seed", "arm"),
        help="Run order: 'seed' trains every arm of seed 0, then of seed 1, ..., so slow drift of "
        "the machine spreads over the arms; 'arm' trains all seeds of one arm before the next. (default seed)",
    )
    out: str = option("results/runs/compare", help="Folder for the run folders. (default results/runs/compare)")
    until_decided: bool = option(
        False,
        flag="--until-decided",
        help="Add seeds in the planned --looks until every policy is decided (worth it / "
        "not worth it), the error spent over looks by the judging plan's --family; --seeds is not used.",
    )
    looks: list[int] = option(
        factory=list,
        check=lambda v: (
            None
            if _increasing(v)
            else f"takes an increasing list of at most {MAX_LOOKS} seed counts, each from 2 to {MAX_SEEDS:,}, "
            "e.g. 3,5,8,12"
        ),
        help="Seeds at each planned look of --until-decided, e.g. 3,5,8,12. (default with --until-decided: "
        "5,8,12, which decided the most policies per seed trained in docs/decisions.md's power table)",
    )
    jobs: int = option(
        1,
        check=between(1, 1024),
        help="Runs at once on this machine: one per visible GPU on CUDA, else the cores split "
        "between them, each run pinned to its own. (default 1)",
    )
    threads: int = option(
        0,
        check=between(0, 1024),
        help="CPU threads (and pinned cores) of each run; a run's CPU result depends on it, "
        "so fix it to compare matrices run with different --jobs. (default: cores // jobs; "
        "with --jobs 1, torch's own count in this process)",
    )
    executor: str = option(
        registry.DEFAULT,
        check=registry.problem,
        help=registry.EXECUTORS.help("Where the runs execute"),
    )
    # the chosen executor's own section (compare.<executor>), which load_compare reads; not a setting
    executor_settings: Any = field(default=None, metadata={"section": True})

    def to_dict(self) -> dict[str, Any]:
        """As a --config file's compare section writes it, the executor's own section under its name."""
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        if self.executor_settings is not None:
            out[self.executor] = asdict(self.executor_settings)
        return out


_OWN = [f.name for f in fields(CompareConfig)]
MAX_SEEDS = 1000  # more seeds than any comparison plans: a typo must not plan 10^8 runs
MAX_LOOKS = 20


def _increasing(looks: list[int]) -> bool:
    return (
        len(looks) <= MAX_LOOKS
        and all(2 <= n <= MAX_SEEDS for n in looks)
        and all(a < b for a, b in zip(looks, looks[1:]))
    )


def load_compare(config_file: str | Path | None, overrides: dict[str, Any]) -> CompareConfig:
    """The experiment file's `compare` section, then the flags ('compare.key' -> value); each
    executor's own section (compare.<executor>) from both, kept for the executor chosen."""
    c = CompareConfig()
    found: sections.Found = {}
    if config_file is not None:
        _, section = split_experiment(load_yaml(config_file))
        apply_values(c, sections.take(section, found, str(config_file), _OWN), str(config_file), "compare")
        out = Path(str(section.get("out", ""))) if isinstance(section, dict) else Path()
        if out.is_absolute() or ".." in out.parts:
            raise ConfigError(
                f"{config_file}: compare.out must be a relative path without '..' "
                f"(got '{out}'); pass --out on the command line to write elsewhere"
            )
    given = sections.nest({k.split(".", 1)[1]: v for k, v in overrides.items() if v is not None})
    apply_values(c, sections.take(given, found, "command line", _OWN), "command line", "compare")
    check_section(c, "compare.")
    c.executor_settings = sections.chosen(c.executor, found)
    if c.looks and not c.until_decided:
        raise ConfigError("--looks plans the looks of --until-decided: e.g. --until-decided --looks 5,8,12")
    if c.until_decided and not c.looks:
        c.looks = list(DEFAULT_LOOKS)
    if c.until_decided and registry.kind(c.executor).detached(c):  # a look decides on finished runs
        raise ConfigError("--until-decided waits for each look's runs; it cannot --detach")
    _without_regular(c)
    return c


def _without_regular(c: CompareConfig) -> None:
    """Every policy is decided against regular's runs of its seeds (issue 57: `--policies rs2,seta`
    planned none, silently). Looks decide over --out's runs alone: refused. A plain matrix may be
    an ablation a report reads beside regular's runs from another folder (docs/results.md): said."""
    if "regular" in c.policies:
        return
    given = ",".join(c.policies)
    if c.until_decided:
        raise ConfigError(
            f"--until-decided with --policies {given}: no regular arm, and each look decides a policy "
            "against regular's runs in --out, so no policy could be decided; add regular to --policies"
        )
    console.info(
        f"no regular arm planned (--policies {given}): no policy can be decided without one; a report "
        "decides these runs only beside regular's of the same recipe and seeds, read from another folder"
    )


def plan(cfg: Config, c: CompareConfig) -> list[Job]:
    """The matrix in run order: seeds outermost (a cut-short matrix has whole seeds, and drift
    lands on every arm alike), or with `order: arm` each arm's seeds together."""
    model_names = c.models or ([cfg.model.name] if cfg.model.name else [])
    dataset_names = c.datasets or ([cfg.data.dataset] if cfg.data.dataset else [])
    model_names, dataset_names = trainer_for(cfg).names(cfg, model_names, dataset_names)
    if not model_names:
        raise ConfigError("no model given: pass --model or list compare.models in --config")
    if not dataset_names:
        raise ConfigError("no dataset given: pass --dataset or list compare.datasets in --config")
    arms = (
        [(p, None, None) for p in c.policies]
        + [("random", f, None) for f in c.frontier]
        + [("regular", None, b) for b in c.shorter]
    )
    jobs = [Job(m, d, p, s, f, b) for s in c.seeds for m in model_names for d in dataset_names for p, f, b in arms]
    _refuse_duplicates(jobs, c.out)
    _refuse_one_schedule_twice(cfg, c.shorter)
    if c.order == "arm":  # stable: within an arm, seeds keep their order
        rank = {(j.model, j.dataset, j.arm): i for i, j in reversed(list(enumerate(jobs)))}
        jobs.sort(key=lambda j: rank[(j.model, j.dataset, j.arm)])
    for job in jobs:  # fail on a bad model or dataset before any training starts
        validate(job_config(cfg, job, c.out))
    return jobs


def shorter_runs(cfg: Config, share: float) -> tuple[int, tuple[int, ...]]:
    """The epochs and milestones a shorter arm of this recipe trains (its schedule's refusal,
    one line, where the milestones cannot be scaled)."""
    train = resolve(copy.deepcopy(cfg)).train
    epochs, milestones, _ = shorter_schedule(train.epochs, train.milestones, train.warmup_epochs, share)
    if epochs == train.epochs:  # 10% of 5 epochs rounds to none: regular's run under another name
        raise ConfigError(
            f"{shorter_arm(share)} of {train.epochs} epochs trains {epochs}, as regular does: it is no "
            "shorter; use a larger budget or more epochs"
        )
    return epochs, tuple(milestones)


def shared_schedules(cfg: Config) -> str:
    """What the dry run of --until-decided says of the shorter arms a later look may add (at 5%
    steps of an undecided policy's budget): shares that round to one schedule of this recipe are one
    arm, trained once per seed (issue 57: 90% and 95% fewer of 6 epochs both train 1). '' if none do."""
    groups: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    for pct in range(5, 100, 5):
        with contextlib.suppress(ConfigError):  # no shorter, or milestones that cannot scale: never added
            groups.setdefault(shorter_runs(cfg, pct / 100), []).append(pct)
    shared = [(schedule, p) for schedule, p in groups.items() if len(p) > 1]
    if not shared:
        return ""
    spans = ", ".join(
        f"{p[0]}–{p[-1]}% fewer all train {e} epoch{'s' * (e != 1)}"
        + (f" (milestones {','.join(map(str, m))})" if m else "")
        for (e, m), p in shared
    )
    return (
        f"shorter arms a later look adds are one arm per distinct schedule of {resolve(copy.deepcopy(cfg)).train.epochs} "
        f"epochs, trained once per seed under the first share asked for: {spans}"
    )


def _refuse_one_schedule_twice(cfg: Config, shares: list[float]) -> None:
    """Two shorter arms that round to the same epochs and milestones (45% and 50% of 6 epochs:
    3 each) would train one schedule twice under two names and two budgets."""
    seen: dict[tuple[int, tuple[int, ...]], float] = {}  # schedule -> the first share giving it
    for share in shares:
        epochs, milestones = shorter_runs(cfg, share)
        other = seen.setdefault((epochs, milestones), share)
        if other != share:
            raise ConfigError(
                f"{shorter_arm(other)} and {shorter_arm(share)} both train {epochs} epochs"
                + (f" (milestones {','.join(map(str, milestones))})" if milestones else "")
                + " of this recipe: one schedule under two names; list one"
            )


def _refuse_duplicates(jobs: list[Job], out: str) -> None:
    """Two jobs with one run folder (a seed, model or policy listed twice, or frontier fractions
    that round to the same percent) would train the first and then find it, or overwrite it."""
    seen: dict[Path, Job] = {}
    for job in jobs:
        other = seen.setdefault(job.run_dir(out), job)
        if other is not job:
            what = "is listed twice" if other == job else f"and {other.arm} share it"
            raise ConfigError(
                f"{job.arm}, seed {job.seed} ({job.model} on {job.dataset}) {what}: each arm "
                f"of a comparison needs its own run folder ({job.run_dir(out)}); list it once"
            )


def job_config(cfg: Config, job: Job, out: str) -> Config:
    # the full run's numbers, before a shorter arm scales them; every setting kept until the
    # job's policy is known (the last line drops those that cannot act in it)
    job_cfg = resolve(copy.deepcopy(cfg), drop_idle=False)
    job_cfg.model.name = job.model
    job_cfg.data.dataset = job.dataset
    job_cfg.run.seed = job.seed
    job_cfg.prune.enabled = job.policy != "regular"
    if job.policy != "regular":
        job_cfg.prune.policy = job.policy
    if job.fraction is not None:  # every epoch prunes: one-epoch windows and blocks
        p = job_cfg.prune
        p.window, p.start, p.attenuation, p.block, p.count = 1, 0, 1.0, 1, 1
        p.prune_fraction, p.anneal = job.fraction, None
    if job.shorter is not None:
        t = job_cfg.train
        t.epochs, t.milestones, t.warmup_epochs = shorter_schedule(t.epochs, t.milestones, t.warmup_epochs, job.shorter)
    job_cfg.run.arm = job.arm if job.arm != job.policy else ""
    job_cfg.run.out = str(job.run_dir(out))
    return resolve(job_cfg)  # this job's policy: settings of the others dropped

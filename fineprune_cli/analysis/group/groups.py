"""Which runs make one row of a report: runs group by everything that makes them differ.

A run's settings are its config.yaml with the defaults filled in (a run made before a field
existed reads it as the default, which is what it ran with), less what cannot change its
result: where it was written, its seed, the machine, how often it checkpointed. A `--script`
run had none of fineprune's trainer settings (its config.yaml lists what a script uses), so
none is filled in for it: a trainer default such as `warmup_epochs 1.0` is no setting it ran. Runs of one
(model, dataset) and arm with different settings are different rows, named by the settings
in which they differ (`fine (prune_fraction 0.5)`); a setting at its default is not named.

Each row is judged against one regular row, its baseline: the one whose training settings
(all but the pruning section; for a shorter-schedule arm also the epochs, milestones and
warm-up it scales, where the runs have one) differ least from its own. Several regular rows split a (model, dataset)
into one Context per regular row, each named by how that regular run differs.

Two things are never paired, since `compare` would refuse to reuse one run for the other:
runs whose recorded data differ (an image folder's listings, `summary.data`: a folder whose
class folders were swapped keeps its path) are contexts of their own, named by their data;
and a shorter-schedule arm meets only a regular run whose epochs, milestones and warm-up (where
its runs record one) it scales (a shorter-50 arm of a 10-epoch recipe is no "fewer epochs" beside a 4-epoch regular),
otherwise it is a context of its own, named.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ...arms import REGULAR, frontier_fraction, shorter_budget, shorter_schedule
from ...engine.records.fingerprint import drop_unused
from ...engine.setup.config import Config, config_from_dict
from ...engine.setup.scriptconfig import runs_script, used_by_script
from ...errors import ConfigError
from ..read.runs import Run, arm_of, policy_order

# not settings: where a run was written, its seed, its machine, its bookkeeping (the data's
# folder stays one while no run recorded what data it read: two image folders without a label
# would otherwise read as one dataset; see `settings`)
NOT_SETTINGS = (
    "run.out",
    "run.checkpoint_every",
    "run.dist_timeout",
    "run.arm",
    "run.plan",
    "run.seed",
    "run.device",
    "data.label",
    "data.workers",
    "data.download",
)
RESCALED = ("train.epochs", "train.milestones", "train.warmup_epochs")  # what a shorter arm changes
WORLD = "run.world_size"  # from the summary: how many processes trained it (launch, not config)
SHAPES = "model.shapes"  # from the summary: a user's own model's parameter shapes (--model pkg.mod:factory)


@dataclass(frozen=True)
class Context:
    """One (model, dataset) and the regular row its other rows are judged against."""

    model: str
    label: str
    variant: str = ""  # how its regular row differs from the others' ("" when there is one)


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


DEFAULTS = {**_flat(Config().to_dict()), WORLD: 1, SHAPES: None}


FOLDER = "data.data_dir"


def settings(run: Run, by_identity: bool = False) -> dict[str, Any]:
    """The run's settings as {'section.key': value}, defaults filled in. `by_identity`: its set's
    runs recorded what data they read (`summary.data`, by content), which then tells data apart,
    so where the folder lay is no setting: a copy at another path is the same data."""
    try:
        tree = config_from_dict(run.config, str(run.path)).to_dict()
    except ConfigError:  # a field this version no longer has: what it holds still tells runs apart
        tree = copy.deepcopy(run.config)
    tree = drop_unused(tree)
    # a script run: what it recorded, its unused sections' defaults (the trainer's) never filled in
    defaults, tree = ({}, used_by_script(tree)) if runs_script(tree) else (DEFAULTS, tree)
    found = {**defaults, **_flat(tree), WORLD: run.summary.world_size, SHAPES: run.summary.extra.get("model_shapes")}
    if not found.get("prune.enabled", False):  # a regular run: the pruning settings never acted
        found = {k: v for k, v in found.items() if not k.startswith("prune.")}
    return {k: v for k, v in found.items() if k not in NOT_SETTINGS and not (by_identity and k == FOLDER)}


def _identified(runs: list[Run]) -> bool:
    return any(run.summary.data for run in runs)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def row_name(context: Context, row: str) -> str:
    """A row as tables name it: regular with its context's variant, any other row as it is."""
    return f"{REGULAR} ({context.variant})" if row == REGULAR and context.variant else row


def is_frontier(row: str) -> bool:
    return frontier_fraction(arm_of(row)) is not None


def is_shorter(row: str) -> bool:
    return shorter_budget(arm_of(row)) is not None


def pruned_policies(by_policy: dict[str, dict[int, Run]]) -> list[str]:
    """Every row but regular."""
    return [p for p in by_policy if p != REGULAR]


@dataclass
class _Row:
    arm: str
    settings: dict[str, Any]
    seeds: dict[int, Run]

    def against(self, regular: _Row) -> list[str]:
        """The training settings in which this row differs from a regular row: all but the
        pruning section, and for a shorter arm all but what it scales."""
        skip = RESCALED if shorter_budget(self.arm) is not None else ()

        def base(settings: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in settings.items() if not k.startswith("prune.") and k not in skip}

        return _differing(base(self.settings), base(regular.settings))

    def scales(self, regular: _Row) -> bool:
        """Whether this row may be judged against a regular row: any row may, a shorter arm
        only when its epochs, milestones and warm-up follow from the regular's. A script's runs
        record no warm-up (its own is in its code; compare checks its lr instead): only
        their epochs and milestones are compared."""
        budget = shorter_budget(self.arm)
        if budget is None:
            return True
        mine, theirs = self.settings, regular.settings
        try:
            epochs, milestones, warmup = shorter_schedule(
                theirs["train.epochs"], theirs["train.milestones"] or [], theirs.get(WARMUP, 0.0), budget
            )
        except (ConfigError, KeyError, TypeError, ValueError):
            return False
        own = [m for m in mine.get("train.milestones") or [] if isinstance(m, int) and m < epochs]
        return mine.get("train.epochs") == epochs and own == milestones and _warms_alike(mine, theirs, warmup)


WARMUP = "train.warmup_epochs"


def _warms_alike(mine: dict[str, Any], theirs: dict[str, Any], warmup: float) -> bool:
    """The shorter row's warm-up is regular's scaled (`warmup`), within the rounding of the arm's
    name (shorter-33 of a budget of 1/3); runs that record none (a script's) both have none."""
    if WARMUP not in mine or WARMUP not in theirs:
        return WARMUP not in mine and WARMUP not in theirs
    own = mine[WARMUP]
    return isinstance(own, (int, float)) and abs(own - warmup) <= 0.01 * max(1.0, theirs[WARMUP])


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if not _same(a.get(k), b.get(k)))


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def _suffix(row: _Row, keys: set[str]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]} {value_text(row.settings.get(k))}" for k in sorted(keys))


def _rows(runs: list[Run]) -> list[_Row]:
    rows: list[_Row] = []
    identified = _identified(runs)
    for run in sorted(runs, key=lambda r: (policy_order(r.policy), r.seed, str(r.path))):
        mine = settings(run, identified)
        row = next((r for r in rows if r.arm == run.policy and _same(r.settings, mine)), None)
        if row is None:
            rows.append(row := _Row(run.policy, mine, {}))
        row.seeds.setdefault(run.seed, run)  # the same settings and seed twice: the first one read
    return rows


def _named(row: _Row, rows: list[_Row]) -> set[str]:
    """The settings in which this row differs from the other rows of its arm, where not a default."""
    keys: set[str] = set()
    for other in rows:
        if other is not row and other.arm == row.arm:
            keys.update(
                k
                for k in _differing(row.settings, other.settings)
                if not _same(row.settings.get(k), DEFAULTS.get(k, object()))
            )
    return keys


def _split(rows: list[_Row], model: str, label: str) -> dict[Context, dict[str, dict[int, Run]]]:
    regulars = [r for r in rows if r.arm == REGULAR]
    names = {id(r): _named(r, rows) for r in rows}
    regulars.sort(key=lambda r: len(names[id(r)]))  # the default-most regular first: ties go to it
    contexts = {id(r): Context(model, label, _suffix(r, names[id(r)])) for r in regulars}
    out: dict[Context, dict[str, dict[int, Run]]] = {c: {} for c in contexts.values()}
    for row in rows:
        keys = set(names[id(row)])
        if row.arm == REGULAR:
            context, name = contexts[id(row)], REGULAR
        elif any(row.scales(r) for r in regulars):
            baseline = min((r for r in regulars if row.scales(r)), key=lambda r: len(row.against(r)))
            context = contexts[id(baseline)]
            keys.update(row.against(baseline))  # never judged silently against another recipe
            name = row.arm + (f" ({_suffix(row, keys)})" if keys else "")
        elif regulars:  # a shorter arm of another recipe: alone, named by the schedule it ran
            keys.update(k for k in RESCALED if k in row.settings)  # only the settings it had
            context = Context(model, label, f"no regular run whose schedule {row.arm} scales")
            name = row.arm + f" ({_suffix(row, keys)})"
        else:
            context = Context(model, label)
            name = row.arm + (f" ({_suffix(row, keys)})" if keys else "")
        by = out.setdefault(context, {})
        while name in by:  # cannot happen with the rules above; never merge two rows silently
            name += "*"
        by[name] = row.seeds
    return out


def data_name(run: Run) -> str:
    """The run's recorded data identity in a few words ('data #1a2b3c4d'); '' when it recorded
    none (a built-in dataset, or a folder run made before identities were recorded)."""
    if not run.summary.data:
        return ""
    digest = hashlib.sha256(json.dumps(run.summary.data, sort_keys=True, default=str).encode()).hexdigest()
    return f"data #{digest[:8]}"


def _by_data(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs of one (model, dataset) by the data they recorded. With one identity recorded (or
    none) they stay together: a run that recorded none cannot be told apart (compare reuses
    it too); with several, each is its own group and the unrecorded ones another."""
    names = {id(run): data_name(run) for run in runs}
    if len(set(names.values()) - {""}) <= 1:
        return {"": runs}
    out: dict[str, list[Run]] = {}
    for run in runs:
        out.setdefault(names[id(run)] or "data not recorded", []).append(run)
    return dict(sorted(out.items()))


def _sets(runs: list[Run]) -> list[tuple[str, str, str, list[Run]]]:
    """(model, label, data name, runs): the sets of runs that may ever be paired."""
    by_key: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_key.setdefault(run.key, []).append(run)
    return [
        (model, label, data, members)
        for (model, label) in sorted(by_key)
        for data, members in _by_data(by_key[(model, label)]).items()
    ]


Groups = dict[Context, dict[str, dict[int, Run]]]  # context -> row name -> seed -> run


def group(runs: list[Run]) -> Groups:
    """Context -> row name -> seed -> run: rows in the policy registry's order, 'regular' the baseline."""
    out: dict[Context, dict[str, dict[int, Run]]] = {}
    for model, label, data, members in _sets(runs):
        for context, rows in _split(_rows(members), model, label).items():
            if data:
                context = Context(model, label, ", ".join(v for v in (data, context.variant) if v))
            out[context] = dict(sorted(rows.items(), key=lambda kv: (policy_order(arm_of(kv[0])), kv[0])))
    return out


def duplicates(runs: list[Run]) -> list[tuple[Run, Run]]:
    """(run, the run it repeats): the same model, dataset, data, arm, settings and seed as one
    read before it, e.g. a copy of a run folder; a row holds one run per seed, so these are left out."""
    out = []
    for _, _, _, members in _sets(runs):
        for row in _rows(members):
            kept = set(map(id, row.seeds.values()))
            out += [
                (run, row.seeds[run.seed])
                for run in members
                if id(run) not in kept
                and run.policy == row.arm
                and _same(settings(run, _identified(members)), row.settings)
            ]
    return out


def subset(groups: Groups, seeds: int) -> Groups:
    """The runs of seeds 0 .. seeds - 1 in the rows they were grouped into (a planned look's
    runs: grouped once with all the others, never apart); rows left empty are left out."""
    out: Groups = {}
    for context, by in groups.items():
        rows = {name: {s: r for s, r in runs.items() if s < seeds} for name, runs in by.items()}
        out[context] = {name: runs for name, runs in rows.items() if runs}
    return out

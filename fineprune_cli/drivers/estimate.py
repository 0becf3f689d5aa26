"""`fineprune estimate`: the saving a pruning schedule predicts (the paper's Section 4.4), from
the settings and flags, an epoch time given or measured in a run folder, or, for a policy that
chooses its samples during the run, from what a run of it did."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..analysis.read.checks import check_record, check_rows
from ..analysis.read.runs import check_counts
from ..engine.records.record import SUMMARY, Status, load_run_config, read_metrics, read_summary
from ..errors import ConfigError
from ..pruning import registry as policies


def times_from_run(run_dir: Path) -> tuple[float, float]:
    """(seconds per full epoch, overhead per pruning epoch) measured in a run folder.

    The full-epoch time is the mean over unpruned epochs, leaving out epoch 1 when others
    exist (it pays for warm-up and compilation). All measured overhead (counting in every
    epoch plus selection) is charged to the pruning epochs, as Formula 6 does.
    """
    rows, summary = _checked(run_dir)
    full = [r.train_seconds for r in rows if not r.pruned]
    if len(full) > 1 and not rows[0].pruned:
        full = full[1:]
    if not full:
        raise ConfigError(f"{run_dir} has no completed unpruned epoch to time")
    n_pruned = len(summary.pruning_epochs)
    overhead = summary.overhead_seconds / n_pruned if n_pruned else 0.0
    return sum(full) / len(full), overhead


MAX_EPOCH_SECONDS = 10**6  # 11 days an epoch: beyond any run, and its products stay finite


def _checked(run_dir: Path) -> tuple[list, Any]:
    """The run's rows and summary, through the checks a report applies (a damaged record, e.g.
    negative or non-finite times, is one line naming the file, never a negative estimate)."""
    summary, rows = read_summary(run_dir), read_metrics(run_dir)
    if summary.status == Status.COMPLETE and len(rows) == summary.epochs:
        check_record(run_dir, summary, rows)
    else:  # an unfinished run: its rows still hold what they measured
        check_rows(run_dir, rows, summary.num_train, summary.num_test)
    return rows, summary


def estimate_for(
    settings: dict[str, Any], epoch_seconds: float | None, run: Path | None, config_file: Path | None
) -> tuple[Any, Any]:
    """`fineprune estimate`: the schedule from a run folder's config (if given), the config
    file and the flags; the epoch time from --epoch-seconds or measured in the run."""
    from ..engine.setup.config import Config, apply_mapping, build_config
    from ..pruning.estimate import estimate
    from ..pruning.schedule import PruneSchedule
    from ..settings import check_section

    if epoch_seconds is not None and run is not None:
        raise ConfigError("give --epoch-seconds or --run, not both")
    if epoch_seconds is not None and not (math.isfinite(epoch_seconds) and 0 < epoch_seconds <= MAX_EPOCH_SECONDS):
        raise ConfigError(f"--epoch-seconds must be positive, at most {MAX_EPOCH_SECONDS:,}, got {epoch_seconds}")
    base = Config()
    if run is not None:
        saved = load_run_config(run)
        apply_mapping(base, {k: saved[k] for k in ("train", "prune") if k in saved}, f"{run}/config.yaml")
    cfg = build_config(config_file, settings, base)
    check_section(cfg.train, "train.")
    check_section(cfg.prune, "prune.")
    policy = cfg.prune.policy
    assert policy is not None, "build_config resolves prune.policy"
    kind = policies.get(policy)
    if not kind.budget_before_run:
        if run is None:
            raise ConfigError(
                f"{policy}'s pruning is {kind.unplanned}, not a schedule: its budget is read "
                "from a run of it; pass --run RUN_DIR of one"
            )
        return _measured(run), None
    overhead = 0.0
    if run is not None:
        epoch_seconds, overhead = times_from_run(run)
    schedule = PruneSchedule.from_config(cfg.prune)
    return estimate(
        schedule, cfg.train.epochs, cfg.prune.prune_fraction, epoch_seconds, overhead, cfg.prune.anneal
    ), schedule


def _measured(run: Path) -> Any:
    """The estimate's figures from what a run of a dynamic policy did: its pruning epochs, the
    share it left out of them, and its full-epoch time where it has full epochs to time."""
    from ..pruning.estimate import from_epochs

    check_counts(read_summary(run), run / SUMMARY)  # the counts the estimate divides by, named first
    rows, summary = _checked(run)
    pruned = [r.epoch for r in rows if r.pruned]
    share = summary.samples_skipped / (len(pruned) * summary.num_train) if pruned else 0.0
    try:
        epoch_seconds, overhead = times_from_run(run)
    except ConfigError:  # pruned in every epoch: times in units of one full epoch
        epoch_seconds, overhead = None, 0.0
    return from_epochs(pruned, len(rows), share, epoch_seconds, overhead)

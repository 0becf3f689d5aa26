"""Runs made for tests through the record types, shared by the test files (imported as a plain
module, as `conftest` is: no test file imports another).

`make_run` writes a run folder as `fineprune train` does (`RunRecord` with a `RunSummary`, its
`EpochRow`s and config.yaml); `make` builds the same run in memory; `context` a whole context of
arms and seeds. A test that needs an impossible record says what it changes (`summary=`,
`rows=`): the record is still written by the record's own writer.
"""

import dataclasses
import functools
import math
from pathlib import Path

import torch

from fineprune_cli.analysis.decide.decision import NOT_WORTH, WORTH, Judging
from fineprune_cli.analysis.read.runs import Run
from fineprune_cli.arms import REGULAR, shorter_arm
from fineprune_cli.engine.records.record import EpochRow, RunRecord, RunSummary, Status
from fineprune_cli.engine.setup.config import build_config

MACHINE = {"processor": "Test CPU", "threads": 2, "torch": "2.14.1", "device": "cpu"}
LABEL = "CIFAR-10 (JPEG q75)"


def make_run(
    root,
    model,
    policy,
    seed,
    train_s,
    accs,
    overhead=0.0,
    skipped_epochs=(),
    status="complete",
    num_train=100,
    label=LABEL,
    machine=MACHINE,
    *,
    arm="",
    times=None,
    kept=70,
    settings=None,
    rows=None,
    summary=None,
):
    """A run folder under root/<model>-folder/<arm or policy>-seed<seed>, with chosen numbers: test
    accuracy `accs` per epoch, `train_s` seconds spread evenly (or `times` per epoch), `kept`
    samples trained in each of `skipped_epochs` (the rest skipped), `settings` ({'train.epochs': 10})
    in its config.yaml; machine None: written before machine signatures were recorded. `rows`
    ({epoch: {field: value}}) and `summary` ({field: value}) change the record after it is made."""
    path = Path(root) / f"{model}-folder" / f"{arm or policy}-seed{seed}"
    n = len(accs)
    times = list(times) if times is not None else [train_s / n] * n
    epochs = [
        EpochRow(
            epoch=e,
            lr=0.1,
            samples=kept if e in skipped_epochs else num_train,
            train_seconds=times[e - 1],
            # falling, as a run that learns (analysis.read.collapse names a flat one); a seed of its own
            # (analysis.read.checks takes two seeds with one loss curve for a copied folder)
            train_loss=1.0 / e + seed * 1e-3,
            test_loss=2.0 - acc / 100,
            test_accuracy=acc,
            pruned=int(e in skipped_epochs),
            overhead_seconds=0.0,
        )
        for e, acc in enumerate(accs, start=1)
    ]
    enabled = policy != REGULAR
    config = {
        "model": {"name": model},
        "data": {"dataset": "folder", "label": label},
        "prune": {"enabled": enabled, "policy": policy if enabled else "fine", "window": 2},
    }
    for key, value in (settings or {}).items():
        section, name = key.split(".")
        config.setdefault(section, {})[name] = value
    top3 = sorted(accs, reverse=True)[:3]
    record = RunSummary(
        model=model,
        dataset="folder",
        epochs=n,
        seed=seed,
        policy=policy,
        arm=arm,
        status=Status(status),
        epochs_completed=n,
        dataset_label=label,
        num_train=num_train,
        device="cpu: test machine, 2 threads",
        torch="2.14.1",
        git_commit="abc1234",
        command="fineprune compare --config x.yaml",
        train_seconds=train_s,
        final_accuracy=accs[-1],
        best3_accuracy=sum(top3) / len(top3),
        samples_skipped=sum(num_train - r.samples for r in epochs if r.pruned),
        schema=2,
    )
    if machine is not None:
        record = dataclasses.replace(record, machine=machine, load_average=[0.5, 0.4, 0.3], schema=3)
    if enabled:
        record = dataclasses.replace(
            record, overhead_seconds=overhead, pruning_epochs=list(skipped_epochs), schedule={"window": 2}
        )
    record = dataclasses.replace(record, **(summary or {}))
    for e, changes in (rows or {}).items():
        epochs[e - 1] = dataclasses.replace(epochs[e - 1], **changes)
    writer = RunRecord(path, fresh=True)
    try:
        writer.write_config(config)
        writer.write_metrics(epochs)
        writer.write_summary(record)
        if enabled:
            writer.save_scores(0, torch.tensor([0, 1, 1, 2, 0], dtype=torch.int32))
    finally:
        writer.close()
    return path


# in-memory runs: the decisions' fixtures, without folders
N = 100  # training samples per epoch
EPOCHS = 10
NOISE = [0.11, -0.07, 0.03, -0.12, 0.05, 0.09, -0.04, -0.06]  # seed effects + noise, fixed


def make(policy, seed, final, epochs=EPOCHS, skipped=0, arm="", *, dataset="toy", label="", curve=True):
    """An in-memory run: `final` % at its last epoch (on a 10,000-image test set's grid); `curve`:
    every epoch's row (each 0.37 pt below the next), else the last epoch's only (simulations)."""
    summary = RunSummary(
        model="lenet",
        dataset=dataset,
        epochs=epochs,
        seed=seed,
        policy=policy,
        arm=arm,
        status=Status.COMPLETE,
        epochs_completed=epochs,
        dataset_label=label,
        num_train=N,
        final_accuracy=final,
        best3_accuracy=final,
        samples_skipped=skipped,
    )
    first = 1 if curve else epochs
    rows = [
        EpochRow(e, 0.1, N, 1.0, 1.0 / e, 1.0, round(final - (epochs - e) * 0.37, 2), 0, 0.0)
        for e in range(first, epochs + 1)
    ]
    return Run(_folder(arm or policy, seed), summary, {}, rows)


@functools.lru_cache(maxsize=None)
def _folder(name, seed):
    """A made run's (never written) folder: one Path per name and seed (the simulations make
    millions of runs, and a Path's parsing was a fifth of their cost)."""
    return Path(f"/runs/{name}-seed{seed}")


def context(arms, seeds=range(5)):
    """arms: name -> (true mean change against regular, kwargs for make); a small fixed jitter per
    (arm, seed) so spreads are realistic, never zero."""
    by = {}
    for i, (name, (delta, kw)) in enumerate(arms.items()):
        by[name] = {}
        for s in seeds:
            jitter = NOISE[(s + 3 * i) % len(NOISE)] if name != REGULAR else 0.0
            by[name][s] = make(
                kw.get("policy", name),
                s,
                round(90.0 + NOISE[s] + delta + jitter, 2),
                **{k: v for k, v in kw.items() if k != "policy"},
            )
    return by


def shorter(share):
    """A shorter-schedule arm of the in-memory recipe: (its name, kwargs for `context`)."""
    name = shorter_arm(share)
    return name, {"policy": REGULAR, "arm": name, "epochs": round(EPOCHS * (1 - share))}


def pruned(name, share):
    """kwargs for `context`: a policy that skipped `share` of the sample-epochs."""
    return {"policy": name, "skipped": round(share * EPOCHS * N)}


# the simulated procedure's truths and judges
M = Judging().margin
GAIN = Judging().gain
WORTH_EDGE = (-M - 1e-9, 1.0)  # just past m below regular: "worth it" is false, "not worth it" true
NOT_WORTH_EDGE = (0.0, GAIN)  # exactly the minimum gain over C(p): "not worth it" is false
CLEARLY_WORTH = (0.0, 1.0)


def residual_sd(y):
    """Two-way additive residual of a complete arms x seeds table (checked against the
    statsmodels fit in test_stats)."""
    r = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return math.sqrt((r**2).sum() / df), df


def wrong(word, truth):
    """Whether a decision's word contradicts the truth (change against regular, against C(p))."""
    d_reg, d_c = truth
    worth_true = d_reg > -M and d_c > 0
    not_worth_true = d_reg < -M or d_c < GAIN
    return (word == WORTH and not worth_true) or (word == NOT_WORTH and not not_worth_true)


def tiny_compare(tmp_path, **compare):
    """(run config, compare matrix) for a tiny matrix in tmp_path/cmp."""
    from fineprune_cli.drivers.compare import load_compare

    cfg = build_config(
        None,
        {
            "model.name": "lenet",
            "data.dataset": "synthetic",
            "data.subset": 200,
            "data.test_subset": 500,
            "train.epochs": 4,
            "train.batch_size": 50,
            "train.milestones": [3],
            "run.device": "cpu",
            "prune.window": 2,
            "prune.start": 1,
        },
    )
    return cfg, load_compare(
        None, {"compare.out": str(tmp_path / "cmp"), **{f"compare.{k}": v for k, v in compare.items()}}
    )

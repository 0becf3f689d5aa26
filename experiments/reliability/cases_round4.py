"""Hostile cases of issue 31: the surfaces added since round 3 (--shorter, --frontier,
kakurenbo, --name, --dry-run, --print-config, --set values), hand-edited records of every field
under report, and mixed recipes and mixed data in one report. All cheap: refusals before any
training, and reports over copies of the template runs, each checked by the answer it gives.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Callable

from cases import TINY, Case, config, flags, train
from cases_files import _left_out, _summary_text, report_case

COMPARE = [
    "compare",
    "--model",
    "lenet",
    "--dataset",
    "synthetic",
    "--subset",
    "64",
    "--epochs",
    "2",
    "--device",
    "cpu",
    "--out",
    "cmp",
]


def compare(name: str, *extra: str, words=()) -> Case:
    return Case(name, [*COMPARE, *extra], words)


# -- --set values and config files read as Python reads numbers ------------------------------
SET_VALUES = {
    "sexagesimal-epochs": ("train.epochs=1:00", "base-60"),
    "sexagesimal-float": ("train.lr=1:30.5", "base-60"),
    "octal-epochs": ("train.epochs=010", "leading 0"),
    "octal-seed": ("run.seed=07", "leading 0"),
    "comment-in-out": ("run.out=a #b", "comment"),
    "comment-in-label": ("data.label=x #y", "comment"),
    "comment-after-number": ("train.epochs=3 #x", "comment"),
    "lr-1e400": ("train.lr=1e400", "finite"),
    "lr-negative-exponent": ("train.lr=-1e-3", "--lr"),
    "epochs-exponent": ("train.epochs=1e3", "expected int"),
    "epochs-hex-zero": ("train.epochs=0x0", "--epochs"),
    "momentum-exponent-above-one": ("train.momentum=2e0", "train.momentum"),
    "tau-exponent": ("prune.kakurenbo_tau=1e1", "--kakurenbo-tau"),
    "label-yes": ("data.label=yes", "expected str"),
    "epochs-inf-word": ("train.epochs=.inf", "expected int"),
    "warmup-nan-word": ("train.warmup_epochs=.NaN", "finite"),
    "lr-list": ("train.lr=[1e-3]", "expected float"),
    "seed-binary-huge": ("run.seed=0b" + "1" * 70, "--seed"),
}
CONFIG_TEXTS = {
    "sexagesimal": ("train:\n  epochs: 1:00\n", "base-60"),
    "octal": ("train:\n  epochs: 010\n", "line 2"),
    "lr-1e400": ("train: {lr: 1e400}\n", "finite"),
    "epochs-exponent": ("train: {epochs: 2e0}\n", "expected int"),
    "weight-decay-negative-exponent": ("train: {weight_decay: -5e-4}\n", "weight_decay"),
    "seed-octal": ("run: {seed: 0017}\n", "leading 0"),
}

# -- the new surfaces ---------------------------------------------------------------------------
NEW_SURFACES = [
    train("kakurenbo-one-epoch", "--policy", "kakurenbo", words=["epoch 2"]),
    train(
        "kakurenbo-fraction-zero",
        "--policy",
        "kakurenbo",
        "--epochs",
        "3",
        "--prune-fraction",
        "0",
        words=["hides no sample"],
    ),
    train(
        "kakurenbo-tau-negative",
        "--policy",
        "kakurenbo",
        "--epochs",
        "3",
        "--kakurenbo-tau",
        "-0.1",
        words=["--kakurenbo-tau", "got -0.1"],
    ),
    train(
        "kakurenbo-tau-above-one",
        "--policy",
        "kakurenbo",
        "--epochs",
        "3",
        "--kakurenbo-tau",
        "1.5",
        words=["--kakurenbo-tau", "got 1.5"],
    ),
    train(
        "kakurenbo-anneal-before-epoch-two",
        "--policy",
        "kakurenbo",
        "--epochs",
        "4",
        "--anneal",
        "0.2",
        words=["--anneal"],
    ),
    train(
        "tau-invalid-under-fine", "--policy", "fine", "--epochs", "3", "--kakurenbo-tau", "2", words=["--kakurenbo-tau"]
    ),
    compare("shorter-zero", "--shorter", "0", words=["--shorter"]),
    compare("shorter-one", "--shorter", "1", words=["--shorter"]),
    compare("shorter-negative", "--shorter", "-0.3", words=["--shorter", "got [-0.3]"]),
    compare("shorter-word", "--shorter", "half", words=["--shorter", "got 'half'"]),
    compare("shorter-nan", "--shorter", "nan", words=["compare.shorter", "finite", "nan"]),
    compare("shorter-twice", "--shorter", "0.3,0.3", words=["listed twice"]),
    compare(
        "shorter-milestones-collide",
        "--epochs",
        "10",
        "--milestones",
        "3,4",
        "--shorter",
        "0.5",
        words=["strictly increasing"],
    ),
    compare("frontier-zero", "--frontier", "0", words=["--frontier", "got [0.0]"]),
    compare("frontier-nan", "--frontier", "nan", words=["compare.frontier", "finite", "nan"]),
    compare("frontier-rounds-together", "--frontier", "0.101,0.104", words=["share it"]),
    compare("compare-kakurenbo-one-epoch", "--epochs", "1", "--policies", "regular,kakurenbo", words=["epoch 2"]),
    compare("compare-margin-zero", "--margin", "0", words=["--margin"]),
    compare("compare-alpha-one", "--alpha", "1", words=["--alpha"]),
    compare("compare-family-unknown", "--family", "holm", words=["--family"]),
    train("name-empty", "--name", "", words=["--name"]),
    train("name-hidden", "--name", ".x", words=["--name"]),
    train("name-dash", "--name", "-x", words=["--name", "got '-x'"]),
    train("name-slash", "--name", "a/b", words=["--name"]),
    train("name-parent", "--name", "..", words=["--name"]),
    train("name-too-long", "--name", "n" * 101, words=["--name"]),
    train("name-space", "--name", "a b", words=["--name"]),
    train("name-and-out", "--name", "x", words=["--name and --out"]),
    flags("name-and-resume", "train", "--resume", "run", "--name", "x", words=["--resume"]),
    flags("dry-run-and-resume", "train", "--resume", "run", "--dry-run", words=["--resume"]),
    flags("print-config-and-resume", "train", "--resume", "run", "--print-config", words=["--resume"]),
    train("dry-run-epochs-zero", "--epochs", "0", "--dry-run", words=["--epochs"]),
    train("dry-run-unknown-policy", "--policy", "oracle", "--dry-run", words=["--policy"]),
    train("print-config-lr-word", "--lr", "fast", "--print-config", words=["--lr", "valid number"]),
    train("print-config-set-comment", "--set", "run.out=x #y", "--print-config", words=["comment"]),
    compare("compare-dry-run-bad-seed", "--seeds", "x", "--dry-run", words=["--seeds", "got 'x'"]),
    compare("compare-print-config-bad-policy", "--policies", "oracle", "--print-config", words=["oracle"]),
    flags("report-margin-huge", "report", "nowhere", "--margin", "1e308", words=["--margin"]),
    flags("report-margin-zero", "report", "nowhere", "--margin", "0", words=["--margin"]),
    flags("report-margin-nan", "report", "nowhere", "--margin", "nan", words=["--margin"]),
    flags("report-target-zero", "report", "nowhere", "--target", "0", words=["--target"]),
    flags("report-target-above-100", "report", "nowhere", "--target", "101", words=["--target"]),
    Case("rank-beyond-world", ["train", *TINY], ["RANK"], env={"RANK": "1", "WORLD_SIZE": "1"}),
    Case("local-rank-beyond-world", ["train", *TINY], ["LOCAL_RANK"], env={"LOCAL_RANK": "2", "WORLD_SIZE": "1"}),
]


# -- hand-edited records of every field under report: left out, the reason named ---------------
RECORD_EDITS = {  # field: (JSON text, words the reason holds)
    "final-150": ("final_accuracy", "150", "final_accuracy 150"),
    "final-negative": ("final_accuracy", "-50", "final_accuracy -50"),
    "final-off-its-metrics": ("final_accuracy", "1.5", "not the last epoch's test accuracy"),
    "best3-200": ("best3_accuracy", "200", "best3_accuracy 200"),
    "best3-off": ("best3_accuracy", "0.5", "not the mean of the three best"),
    "seed-negative": ("seed", "-1", "seed -1"),
    "seed-huge": ("seed", str(2**70), "is not a seed"),
    "world-size-zero": ("world_size", "0", "world_size 0"),
    "world-size-huge": ("world_size", str(10**12), "world_size"),
    "overhead-above-train": ("overhead_seconds", "1e9", "overhead_seconds"),
    "overhead-negative": ("overhead_seconds", "-1", "overhead_seconds"),
    "epochs-completed-zero": ("epochs_completed", "0", "epochs_completed 0"),
    "train-seconds-1e308": ("train_seconds", "1e308", "train_seconds"),
    "train-seconds-huge-int": ("train_seconds", str(10**400), "train_seconds"),
    "eval-seconds-negative": ("eval_seconds", "-1", "eval_seconds"),
    "eval-seconds-nan": ("eval_seconds", "NaN", "eval_seconds"),
    "load-average-words": ("load_average", '["high", "low"]', "load_average"),
    "load-average-huge": ("load_average", "[1e308]", "load_average"),
    "load-average-long": ("load_average", "[1, 2, 3, 4, 5]", "load_average"),
    "samples-seen-off": ("samples_seen", "7", "samples_seen 7"),
    "samples-seen-negative": ("samples_seen", "-7", "samples_seen"),
    "pruning-epochs-beyond": ("pruning_epochs", "[99]", "pruning_epochs"),
    "pruning-epochs-words": ("pruning_epochs", '["x"]', "pruning_epochs"),
    "resumed-after-negative": ("resumed_after_epochs", "[-1]", "resumed_after_epochs"),
    "final-a-word": ("final_accuracy", '"high"', "wrong type"),
    "world-size-a-float": ("world_size", "1.5", "wrong type"),
}


def _row_edit(column: str, value: str) -> Callable[[Path, Path], None]:
    """metrics.csv's last row with `column` set to `value`."""

    def edit(run: Path, outside: Path) -> None:
        rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
        rows[-1][column] = value
        with open(run / "metrics.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    return edit


ROW_EDITS = {
    "row-accuracy-150": ("test_accuracy", "150", "not a test accuracy"),
    "row-epoch-out-of-order": ("epoch", "9", "is epoch 9"),
    "row-loss-1e308": ("train_loss", "1e308", "losses"),
    "row-samples-negative": ("samples", "-5", "samples"),
    "row-pruned-two": ("pruned", "2", "pruned"),
    "row-seconds-1e300": ("train_seconds", "1e300", "train_seconds"),
}


def _record_cases() -> list[Case]:
    cases = [
        report_case(f"report-edited-{name}", _summary_text(field, text), _left_out(words), template="run", plots=False)
        for name, (field, text, words) in RECORD_EDITS.items()
    ]
    cases += [
        report_case(f"report-edited-{name}", _row_edit(column, value), _left_out(words), template="run", plots=False)
        for name, (column, value, words) in ROW_EDITS.items()
    ]
    return cases


# -- mixed recipes and mixed data in one report ------------------------------------------------


def _summary_rows(work: Path) -> list[dict]:
    return list(csv.DictReader((work / "rep" / "summary.csv").read_text().splitlines()))


def _pair_setup(edit_regular, edit_other, other: str = "pruned"):
    """A regular run and another (the pruned template, or a copy of the regular one) of seed 0
    in one report, each edited."""

    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates["run"], work / "runs" / "regular")
        shutil.copytree(templates[other], work / "runs" / "other")
        edit_regular(work / "runs" / "regular")
        edit_other(work / "runs" / "other")
        return ["report", "runs", "--out", "rep", "--no-plots"]

    return setup


def _set(**changes) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        data = json.loads((run / "summary.json").read_text())
        data.update(changes)
        (run / "summary.json").write_text(json.dumps(data))

    return edit


def _train(**values) -> Callable[[Path], None]:
    """config.yaml's train section with these values."""

    def edit(run: Path) -> None:
        import yaml

        config = yaml.safe_load((run / "config.yaml").read_text())
        config["train"].update(values)
        (run / "config.yaml").write_text(yaml.safe_dump(config))

    return edit


def _never_paired(arm: str, variant_words: str) -> Callable[[Path], str | None]:
    """The arm's row holds no difference to regular, and its context is named."""

    def check(work: Path) -> str | None:
        rows = [r for r in _summary_rows(work) if r["policy"].startswith(arm)]
        if len(rows) != 1:
            return f"{len(rows)} rows of {arm}"
        if rows[0].get("d_final_mean"):
            return f"{arm} was paired with regular: {rows[0]['d_final_mean']}"
        return None if variant_words in rows[0]["variant"] else f"context unnamed: {rows[0]['variant']!r}"

    return check


def _paired(arm: str) -> Callable[[Path], str | None]:
    def check(work: Path) -> str | None:
        rows = [r for r in _summary_rows(work) if r["policy"].startswith(arm)]
        return None if len(rows) == 1 and rows[0].get("d_final_mean") else f"{arm} not paired: {rows}"

    return check


IDENTITY_A = {"train": "6 files, 1111111111111111", "test": "4 files, 2222222222222222"}
IDENTITY_B = {"train": "6 files, 3333333333333333", "test": "4 files, 4444444444444444"}
# a 4-epoch regular with milestone 2, whose shorter-50 is 2 epochs, milestone 1, warm-up 0.5
FOUR_EPOCHS = [_train(epochs=4, milestones=[2])]


def _all(*edits: Callable[[Path], None]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        for e in edits:
            e(run)

    return edit


def _shorter(budget_name: str, *edits: Callable[[Path], None]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        _set(arm=budget_name)(run)
        for e in edits:
            e(run)

    return edit


MIXED = [
    Case(
        "report-mixed-data-swapped-classes",
        (),
        (),
        _pair_setup(_set(data=IDENTITY_A), _set(data=IDENTITY_B)),
        expect="done",
        check=_never_paired("fine", "data #"),
    ),
    Case(
        "report-mixed-data-one-recorded",
        (),
        (),
        _pair_setup(_set(data={}), _set(data=IDENTITY_B)),
        expect="done",
        check=_paired("fine"),
    ),
    Case(
        "report-mixed-data-same-identity",
        (),
        (),
        _pair_setup(_set(data=IDENTITY_A), _set(data=IDENTITY_A)),
        expect="done",
        check=_paired("fine"),
    ),
    Case(
        "report-shorter-of-another-recipe",
        (),
        (),
        _pair_setup(lambda r: None, _shorter("shorter-50", _train(warmup_epochs=0.5)), other="run"),
        expect="done",
        check=_never_paired("shorter-50", "no regular run"),
    ),
    Case(
        "report-shorter-of-this-recipe",
        (),
        (),
        _pair_setup(_all(*FOUR_EPOCHS), _shorter("shorter-50", _train(warmup_epochs=0.5)), other="run"),
        expect="done",
        check=_paired("shorter-50"),
    ),
    Case(
        "report-shorter-warmup-not-scaled",
        (),
        (),
        _pair_setup(_all(*FOUR_EPOCHS), _shorter("shorter-50"), other="run"),
        expect="done",
        check=_never_paired("shorter-50", "no regular run"),
    ),
]


def _round_trip(values: dict) -> Callable[[Path], str | None]:
    def check(work: Path) -> str | None:
        from fineprune_cli.engine.setup.config import build_config

        cfg = build_config(work / "c.yaml", {})
        got = {k: getattr(getattr(cfg, k.split(".")[0]), k.split(".")[1]) for k in values}
        return None if got == values else f"read back {got}, wrote {values}"

    return check


def _written_config(values: dict) -> Callable[[Path, Path, dict], list]:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        from fineprune_cli.engine.setup.config import build_config
        from fineprune_cli.engine.setup.yamlvalues import dump

        cfg = build_config(None, {"model.name": "lenet", "data.dataset": "synthetic", **values}).to_dict()
        (work / "c.yaml").write_text(dump(cfg))
        return ["train", "--config", "c.yaml", "--print-config"]

    return setup


ROUND_TRIPS = {
    "text-like-numbers": {"data.label": "1e-3", "run.out": "1:00", "data.data_dir": "010"},
    "small-floats": {"train.lr": 1e-3, "train.weight_decay": 5e-4, "train.warmup_epochs": 1e-10},
    "words-yaml-reads-otherwise": {"data.label": "yes", "run.out": "null", "data.data_dir": "0o17"},
    "hash-in-text": {"data.label": "a #b", "run.out": "x#y"},
}
ROUND_TRIP_CASES = [
    Case(f"print-config-round-trip-{name}", (), (), _written_config(values), expect="done", check=_round_trip(values))
    for name, values in ROUND_TRIPS.items()
]

ROUND4_CASES: list[Case] = (
    [train(f"set-{name}", "--set", value, words=[words]) for name, (value, words) in SET_VALUES.items()]
    + [config(f"config-{name}", text, *TINY, words=[words]) for name, (text, words) in CONFIG_TEXTS.items()]
    + NEW_SURFACES
    + _record_cases()
    + MIXED
    + ROUND_TRIP_CASES
)

"""The hostile inputs: flags, config files, run folders and datasets a careless or adversarial
user might give. Each must be refused with exit 2 and one line, before anything is written.

A case is either a fixed argv or a setup that prepares files in its own `work` folder (the
working directory of the run; `outside` is a sibling that no case may touch) and returns argv.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

Setup = Callable[[Path, Path, dict], list]
Train = Callable[..., None]  # (ARGV, folder[, command]): `fineprune train ARGV` there; raises if it fails


@dataclass
class Case:
    name: str
    argv: Sequence[str] = ()
    words: Sequence[str] = ()  # the message must contain these
    setup: Setup | None = None
    env: dict[str, str] = field(default_factory=dict)  # set in the case's process
    # "refused": exit 2, one line, nothing written; "done": exit 0 and `check` finds nothing wrong;
    # "failed": exit 1, an `error:` line with `words` (a run of the matrix failed), `check` on the rest
    expect: str = "refused"
    check: Callable[[Path], str | None] | None = None  # given the case's work folder: what is wrong
    memory_mb: int | None = None  # RLIMIT_AS headroom over what the process maps (a smaller machine)
    said: Callable[[str], str | None] | None = None  # given its stderr: what is wrong with what it said


TINY = [
    "--model",
    "lenet",
    "--dataset",
    "synthetic",
    "--subset",
    "64",
    "--test-subset",
    "32",
    "--device",
    "cpu",
    "--epochs",
    "1",
    "--out",
    "run",
]
BIG = str(10**20)


def make_run(base: Path, train: Train) -> Path:
    """A finished two-epoch run."""
    run = base / "run"
    train([a if a != "1" else "2" for a in TINY[:-2]] + ["--out", str(run)], base)
    return run


def make_folder(base: Path, train: Train) -> Path:
    """A two-class image folder."""
    folder = base / "folder"
    from PIL import Image

    for split in ("train", "test"):
        for label in ("cat", "dog"):
            (folder / split / label).mkdir(parents=True)
            for i in range(3):
                Image.new("RGB", (8, 8), (40 * i, 90, 200)).save(folder / split / label / f"{i}.png")
    return folder


def flags(name: str, *argv: str, words: Sequence[str] = ()) -> Case:
    return Case(name, list(argv), words)


def train(name: str, *extra: str, words: Sequence[str] = ()) -> Case:
    """TINY with some flags replaced or added: a flag given in `extra` replaces TINY's."""
    given = {extra[i] for i in range(0, len(extra), 2) if extra[i].startswith("--")}
    base = []
    for i in range(0, len(TINY), 2):
        if TINY[i] not in given:
            base += TINY[i : i + 2]
    return Case(name, ["train", *base, *extra], words)


def with_file(name: str, filename: str, content: str | bytes, argv: Sequence[str], words: Sequence[str] = ()) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        target = work / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
        return list(argv)

    return Case(name, (), words, setup)


def config(name: str, text: str | bytes, *argv: str, words: Sequence[str] = ()) -> Case:
    return with_file(name, "c.yaml", text, ["train", "--config", "c.yaml", *argv], words)


def with_run(
    name: str,
    edit: Callable[[Path, Path], None],
    argv: Sequence[str],
    words: Sequence[str] = (),
    status: str | None = "interrupted",
) -> Case:
    """A copy of the finished template run as `work/run`, marked `status`, then edited."""

    def setup(work: Path, outside: Path, templates: dict) -> list:
        run = work / "run"
        shutil.copytree(templates["run"], run)
        if status:
            summary = json.loads((run / "summary.json").read_text())
            summary["status"] = status
            (run / "summary.json").write_text(json.dumps(summary))
        edit(run, outside)
        return list(argv)

    return Case(name, (), words, setup)


def with_folder(name: str, edit: Callable[[Path], None], words: Sequence[str] = (), extra: Sequence[str] = ()) -> Case:
    def setup(work: Path, outside: Path, templates: dict) -> list:
        shutil.copytree(templates["folder"], work / "imgs")
        edit(work / "imgs")
        return [
            "train",
            "--model",
            "lenet",
            "--dataset",
            "folder",
            "--data-dir",
            "imgs",
            "--device",
            "cpu",
            "--epochs",
            "1",
            "--out",
            "run",
            *extra,
        ]

    return Case(name, (), words, setup)


def _bigger(name: str) -> Callable[[Path], None]:
    """One image of another size than the rest."""

    def edit(folder: Path) -> None:
        from PIL import Image

        Image.new("RGB", (12, 12), (10, 20, 30)).save(folder / name)

    return edit


def _replace(filename: str, old: str, new: str) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        path = run / filename
        path.write_text(path.read_text().replace(old, new, 1))

    return edit


def _write(filename: str, content: str | bytes) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        (run / filename).write_bytes(content if isinstance(content, bytes) else content.encode())

    return edit


def _summary(**changes) -> Callable[[Path, Path], None]:
    def edit(run: Path, outside: Path) -> None:
        summary = json.loads((run / "summary.json").read_text())
        summary.update(changes)
        (run / "summary.json").write_text(json.dumps(summary))

    return edit


def _symlink_out(work: Path, outside: Path, templates: dict) -> list:
    (work / "link").symlink_to(outside, target_is_directory=True)
    (work / "c.yaml").write_text("run: {out: link/run}\n")
    return ["train", *TINY[:-2], "--config", "c.yaml"]


def _unlink(filename: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        shutil.rmtree(folder / filename)

    return edit


def _nothing(run: Path, outside: Path) -> None:
    pass


# a pickle that runs `touch PWNED` when loaded unsafely: the harness looks for the file
PICKLE_CODE = b"\x80\x04cos\nsystem\n\x8c\x0btouch PWNED\x85R."
DEEP = "a: " + "[" * 3000 + "]" * 3000 + "\n"
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)

CASES: list[Case] = [
    # -- train: model and data
    train("model-unknown", "--model", "resnet9", words=["--model must be one of"]),
    train("model-empty", "--model", "", words=["no model given"]),
    train("model-markup", "--model", "[red]x[/]", words=["[red]x[/]"]),
    train("dataset-unknown", "--dataset", "mnist", words=["--dataset must be one of"]),
    flags("no-model", "train", "--dataset", "synthetic", words=["no model given"]),
    flags("no-dataset", "train", "--model", "lenet", words=["no dataset given"]),
    train("widen-huge", "--model", "wrn16", "--widen", "10000", words=["--widen"]),
    train("widen-zero", "--model", "wrn16", "--widen", "0", words=["--widen", "got 0"]),
    train("widen-negative", "--model", "wrn16", "--widen", "-1", words=["--widen", "got -1"]),
    train("widen-on-lenet", "--widen", "4", words=["--widen", "wrn models only"]),
    train("subset-negative", "--subset", "-5", words=["--subset", "got -5"]),
    train("subset-zero", "--subset", "0", words=["--subset", "got 0"]),
    train("subset-one", "--subset", "1", words=["--subset", "got 1"]),
    train("subset-huge", "--subset", BIG, words=["--subset", "got 100000000000000000000"]),
    train("test-subset-zero", "--test-subset", "0", words=["--test-subset", "got 0"]),
    train("test-subset-negative", "--test-subset", "-1", words=["--test-subset", "got -1"]),
    # -- train: optimisation
    train("epochs-zero", "--epochs", "0", words=["--epochs", "got 0"]),
    train("epochs-negative", "--epochs", "-3", words=["--epochs", "got -3"]),
    train("epochs-word", "--epochs", "ten", words=["--epochs", "valid integer"]),
    train("epochs-huge", "--epochs", BIG, words=["--epochs", "got 100000000000000000000"]),
    train("epochs-float", "--epochs", "1e3", words=["--epochs", "valid integer"]),
    train("batch-zero", "--batch-size", "0", words=["--batch-size", "got 0"]),
    train("batch-negative", "--batch-size", "-1", words=["--batch-size", "got -1"]),
    train("batch-huge", "--batch-size", BIG, words=["--batch-size"]),
    train("batch-float", "--batch-size", "2.5", words=["--batch-size", "valid integer"]),
    train("lr-negative", "--lr", "-0.1", words=["--lr", "got -0.1"]),
    train("lr-zero", "--lr", "0", words=["--lr", "got 0.0"]),
    train("lr-nan", "--lr", "nan", words=["train.lr", "finite", "nan"]),
    train("lr-inf", "--lr", "inf", words=["train.lr", "finite", "inf"]),
    train("lr-overflow", "--lr", "1e400", words=["train.lr", "finite", "inf"]),
    train("lr-word", "--lr", "fast", words=["--lr", "valid number"]),
    train(
        "milestones-decreasing", "--milestones", "120,60", words=["--milestones", "strictly increasing", "[120, 60]"]
    ),
    train("milestones-words", "--milestones", "a,b", words=["--milestones", "got 'a,b'"]),
    train("milestones-repeated", "--milestones", "5,5", words=["--milestones", "strictly increasing", "[5, 5]"]),
    train("milestones-empty-item", "--milestones", "1,,2", words=["--milestones", "got '1,,2'"]),
    train("milestones-negative", "--milestones", "-1,3", words=["--milestones", "[-1, 3]"]),
    train("milestones-huge", "--milestones", BIG, words=["--milestones", "100000000000000000000"]),
    train("seed-negative", "--seed", "-1", words=["--seed", "got -1"]),
    train("seed-huge", "--seed", BIG, words=["--seed"]),
    train("seed-word", "--seed", "abc", words=["--seed", "valid integer"]),
    # -- train: device and output
    train("device-arabic-digit", "--device", "cuda:\u0663", words=["--device"]),
    train("device-unknown", "--device", "tpu", words=["--device", "got 'tpu'"]),
    train("device-empty", "--device", "", words=["--device", "got ''"]),
    train("device-negative-index", "--device", "cuda:-1", words=["--device", "got 'cuda:-1'"]),
    train("device-markup", "--device", "[bold]cpu", words=["--device", "got '[bold]cpu'"]),
    train("out-empty", "--out", "", words=["--out must not be empty"]),
    with_file(
        "out-under-a-file",
        "blocker",
        "x",
        ["train", *TINY[:-2], "--out", "blocker/run"],
        words=["blocker", "not a folder"],
    ),
    with_run("out-holds-a-run", _nothing, ["train", *TINY], words=["run"], status=None),
    train(
        "out-name-too-long",
        "--out",
        "r" * 300,
        words=["cannot write run folder", "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"],
    ),
    # -- train: pruning settings
    train("window-zero", "--prune", "--window", "0", words=["--window must be >= 1"]),
    train("start-beyond-window", "--prune", "--start", "70", words=["--start", "got 70"]),
    train("count-beyond-block", "--prune", "--count", "3", words=["--count", "got 3"]),
    train("attenuation-below-one", "--prune", "--attenuation", "0.5", words=["--attenuation", "got 0.5"]),
    train("fraction-above-one", "--prune", "--prune-fraction", "1.5", words=["--prune-fraction", "got 1.5"]),
    train("fraction-one", "--prune", "--prune-fraction", "1", words=["--prune-fraction", "got 1.0"]),
    train("fraction-nan", "--prune", "--prune-fraction", "nan", words=["prune.prune_fraction", "finite", "nan"]),
    train("fraction-negative", "--prune", "--prune-fraction", "-0.1", words=["--prune-fraction", "got -0.1"]),
    train(
        "fraction-leaves-nothing",
        "--prune",
        "--subset",
        "10",
        "--prune-fraction",
        "0.96",
        "--epochs",
        "2",
        words=["leaves none of the 10"],
    ),  # 2 epochs: 1 epoch of fine prunes none, refused before the data
    train(
        "fraction-leaves-nothing-ucb",
        "--prune",
        "--policy",
        "ucb",
        "--subset",
        "10",
        "--prune-fraction",
        "0.96",
        words=["--prune-fraction 0.96", "leaves none of the 10"],
    ),
    train("tolerance-negative", "--prune", "--tolerance", "-1", words=["--tolerance", "got -1.0"]),
    train("policy-unknown", "--prune", "--policy", "oracle", words=["--policy"]),
    train("drop-sideways", "--prune", "--drop", "sideways", words=["--drop", "got 'sideways'"]),
    train("anneal-zero", "--prune", "--anneal", "0", words=["--anneal", "got 0.0"]),
    train("anneal-above-one", "--prune", "--anneal", "1.5", words=["--anneal", "got 1.5"]),
    train("anneal-nan", "--prune", "--anneal", "nan", words=["prune.anneal", "finite", "nan"]),
    train(
        "infobatch-ratio-one",
        "--prune",
        "--policy",
        "infobatch",
        "--infobatch-ratio",
        "1",
        words=["--infobatch-ratio", "got 1.0"],
    ),
    train("ucb-c-negative", "--prune", "--policy", "ucb", "--ucb-c", "-1", words=["--ucb-c", "got -1.0"]),
    train("epsilon-above-one", "--prune", "--policy", "egreedy", "--epsilon", "2", words=["--epsilon", "got 2.0"]),
    train("ema-weight-zero", "--prune", "--policy", "ucb", "--ema-weight", "0", words=["--ema-weight", "got 0.0"]),
    train("bogus-flag", "--bogus", words=["No such option"]),
    # -- train: --set
    train("set-without-equals", "--set", "train.epochs", words=["--set", "got 'train.epochs'"]),
    train("set-unknown-section", "--set", "bad.epochs=1", words=["unknown section 'bad'"]),
    train("set-unknown-key", "--set", "train.nope=1", words=["unknown key 'train.nope'"]),
    train("set-list-for-int", "--set", "train.epochs=[1,2]", words=["train.epochs", "expected int", "[1, 2]"]),
    train("set-warmup-nan", "--set", "train.warmup_epochs=.nan", words=["train.warmup_epochs", "finite", "nan"]),
    train("set-tolerance-nan", "--prune", "--set", "prune.tolerance=.nan", words=["prune.tolerance", "finite", "nan"]),
    train("set-momentum-negative", "--set", "train.momentum=-1", words=["train.momentum", "got -1.0"]),
    train("set-gamma-zero", "--set", "train.gamma=0", words=["train.gamma", "got 0.0"]),
    train("set-augment-unknown", "--set", "data.augment=sideways", words=["data.augment", "got 'sideways'"]),
    train("set-checkpoint-negative", "--set", "run.checkpoint_every=-1", words=["--checkpoint-every", "got -1"]),
    train("set-dist-mode-unknown", "--set", "run.dist_mode=telepathy", words=["--dist-mode", "got 'telepathy'"]),
    train("set-eval-batch-zero", "--set", "train.eval_batch_size=0", words=["train.eval_batch_size", "got 0"]),
    train(
        "set-python-tag",
        "--set",
        "train.epochs=!!python/object/apply:os.system ['touch PWNED']",
        words=["--set train.epochs", "not a valid value"],
    ),
    # -- train: launcher
    train("nproc-zero", "--nproc-per-node", "0", words=["--nproc-per-node", "got 0"]),
    train("nproc-negative", "--nproc-per-node", "-1", words=["--nproc-per-node", "got -1"]),
    train("nnodes-without-endpoint", "--nproc-per-node", "1", "--nnodes", "2", words=["--nnodes", "--rdzv-endpoint"]),
    train("num-ps-zero", "--num-ps", "0", words=["--num-ps", "got 0"]),
    train("num-ps-huge", "--num-ps", "1000000", words=["--num-ps", "got 1000000"]),
    train(
        "num-ps-no-worker",
        "--dist-mode",
        "async",
        "--num-ps",
        "2",
        "--nproc-per-node",
        "2",
        words=["--num-ps 2", "at least one worker"],
    ),
    train("group-size-negative", "--group-size", "-1", words=["--group-size", "got -1"]),
    train("batch-per-worker-zero", "--batch-per-worker", "0", words=["--batch-per-worker", "got 0"]),
    train(
        "batch-per-worker-huge",
        "--batch-per-worker",
        str(10**20),
        words=["--batch-per-worker", "got 100000000000000000000"],
    ),
    train(
        "mixed-batch-uneven",
        "--dist-mode",
        "mixed",
        "--batch-size",
        "100",
        "--nproc-per-node",
        "4",
        words=["--batch-size 100", "divide evenly"],
    ),
    # -- config files
    config("config-not-utf8", b"model: {name: \xff\xfe}\n", words=["c.yaml"]),
    config("config-deep-nesting", DEEP, words=["c.yaml"]),
    config("config-alias-bomb", BOMB, words=["c.yaml"]),
    config(
        "config-duplicate-key", "train: {epochs: 1}\ntrain: {epochs: 2}\n", words=["c.yaml", "duplicate key 'train'"]
    ),
    config("config-unknown-section", "training: {epochs: 1}\n", words=["training"]),
    config("config-a-list", "- 1\n- 2\n", words=["c.yaml", "expected a mapping"]),
    config("config-a-scalar", "42\n", words=["c.yaml", "expected a mapping"]),
    config(
        "config-python-tag",
        "model: !!python/object/apply:os.system ['touch PWNED']\n",
        words=["c.yaml", "not valid YAML"],
    ),
    config("config-invalid-yaml", "train: {epochs: [\n", words=["not valid YAML"]),
    config("config-tab-indent", "train:\n\tepochs: 1\n", words=["c.yaml", "not valid YAML at line 2"]),
    config("config-infinite-epochs", "train: {epochs: .inf}\n", *TINY[:8], words=["c.yaml", "train.epochs", "inf"]),
    config(
        "config-out-absolute",
        "run: {out: /tmp/fineprune-hostile-escape}\n",
        *TINY[:-2],
        words=["run.out", "/tmp/fineprune-hostile-escape"],
    ),
    config("config-out-parent", "run: {out: ../outside/run}\n", *TINY[:-2], words=["run.out", "../outside/run"]),
    Case("config-out-through-symlink", (), ["run.out"], _symlink_out),
    config("config-section-not-mapping", "train: 3\n", words=["section 'train'", "mapping"]),
    config("config-key-not-string", "train: {1: 2}\n", words=["unknown key 'train.1'"]),
    flags("config-missing", "train", "--config", "nope.yaml", *TINY, words=["nope.yaml", "No such file"]),
    with_file(
        "config-a-folder", "d/x", "", ["train", "--config", "d", *TINY], words=["config file d", "not a regular file"]
    ),
    # -- resume
    with_run(
        "resume-with-flags",
        _nothing,
        ["train", "--resume", "run", "--epochs", "3"],
        words=["--resume takes no other options"],
    ),
    flags("resume-missing", "train", "--resume", "nowhere", words=["nowhere", "summary.json is missing"]),
    with_run("resume-complete", _nothing, ["train", "--resume", "run"], ["complete"], status=None),
    with_run(
        "resume-edited-subset",
        _replace("config.yaml", "subset: 64", "subset: 32"),
        ["train", "--resume", "run"],
        ["resume refused"],
    ),
    with_run(
        "resume-edited-model",
        _replace("config.yaml", "name: lenet", "name: vgg13"),
        ["train", "--resume", "run"],
        words=["config.yaml", "resume refused"],
    ),
    with_run(
        "resume-edited-prune",
        _replace("config.yaml", "enabled: false", "enabled: true"),
        ["train", "--resume", "run"],
        words=["config.yaml", "resume refused"],
    ),
    with_run(
        "resume-garbage-checkpoint",
        _write("checkpoint.pt", b"not a checkpoint"),
        ["train", "--resume", "run"],
        words=["checkpoint.pt", "corrupt"],
    ),
    with_run(
        "resume-pickled-code",
        _write("checkpoint.pt", PICKLE_CODE),
        ["train", "--resume", "run"],
        words=["checkpoint.pt", "os.system"],
    ),
    with_run(
        "resume-checkpoint-a-dict-of-junk",
        lambda run, o: __import__("torch").save({"x": 1}, run / "checkpoint.pt"),
        ["train", "--resume", "run"],
        words=["checkpoint.pt", "older fineprune"],
    ),
    with_run(
        "resume-summary-not-json",
        _write("summary.json", "{"),
        ["train", "--resume", "run"],
        words=["summary.json", "corrupt"],
    ),
    with_run(
        "resume-summary-a-list",
        _write("summary.json", "[1, 2]"),
        ["train", "--resume", "run"],
        words=["summary.json", "corrupt"],
    ),
    with_run(
        "resume-config-a-list",
        _write("config.yaml", "- 1\n"),
        ["train", "--resume", "run"],
        words=["config.yaml", "corrupt"],
    ),
    with_run(
        "resume-config-missing",
        lambda run, o: (run / "config.yaml").unlink(),
        ["train", "--resume", "run"],
        words=["config.yaml is missing"],
    ),
    with_run(
        "resume-diverged",
        _summary(status="diverged", diverged_epoch=2),
        ["train", "--resume", "run"],
        ["diverged"],
        status=None,
    ),
    # -- image folders
    with_folder("folder-one-class", _unlink("train/dog"), words=["class"]),
    with_folder("folder-no-test", _unlink("test"), words=["imgs/test is missing"]),
    with_folder(
        "folder-empty-class",
        lambda f: [p.unlink() for p in (f / "train" / "dog").iterdir()],
        words=["imgs/train/dog", "no .jpg/.png images"],
    ),
    with_folder(
        "folder-broken-image", lambda f: (f / "train" / "cat" / "0.png").write_bytes(b"no png"), words=["0.png"]
    ),
    with_folder(
        "folder-stream-broken-image",
        lambda f: (f / "train" / "cat" / "0.png").write_bytes(b"no png"),
        words=["0.png"],
        extra=["--loader", "stream", "--workers", "0"],
    ),
    with_folder("folder-mixed-sizes", _bigger("train/dog/1.png"), words=["1.png", "--image-size"]),
    with_folder(
        "folder-stream-mixed-sizes",
        _bigger("train/dog/1.png"),
        words=["1.png", "--image-size"],
        extra=["--loader", "stream", "--workers", "1"],
    ),
    train("image-size-zero", "--image-size", "0", words=["--image-size"]),
    train("workers-negative", "--workers", "-1", words=["--workers"]),
    train("loader-unknown", "--loader", "disk", words=["--loader"]),
    train("loader-stream-not-a-folder", "--loader", "stream", words=["folder"]),
    flags(
        "folder-missing",
        "train",
        "--model",
        "lenet",
        "--dataset",
        "folder",
        "--data-dir",
        "nowhere",
        "--out",
        "run",
        words=["nowhere", "does not exist"],
    ),
    flags(
        "cifar10-missing",
        "train",
        "--model",
        "lenet",
        "--dataset",
        "cifar10",
        "--data-dir",
        ".",
        "--out",
        "run",
        words=["cifar-10-batches-py not found"],
    ),
    with_file(
        "fashion-mnist-truncated",
        "fm/train-images-idx3-ubyte",
        b"\x00\x00\x08\x03\x00",
        ["train", "--model", "lenet", "--dataset", "fashion-mnist", "--data-dir", "fm", "--out", "run"],
        words=["Fashion-MNIST files", "not found in fm"],
    ),
    # -- estimate
    flags("estimate-seconds-inf", "estimate", "--epoch-seconds", "inf", words=["--epoch-seconds", "got inf"]),
    flags("estimate-seconds-nan", "estimate", "--epoch-seconds", "nan", words=["--epoch-seconds", "got nan"]),
    flags("estimate-seconds-negative", "estimate", "--epoch-seconds", "-1", words=["--epoch-seconds", "got -1.0"]),
    flags("estimate-seconds-1e308", "estimate", "--epoch-seconds", "1e308", words=["at most 1,000,000"]),
    flags("estimate-window-zero", "estimate", "--window", "0", words=["--window", "got 0"]),
    flags("estimate-epochs-huge", "estimate", "--epochs", BIG, words=["--epochs", "got 100000000000000000000"]),
    flags("estimate-dynamic-policy", "estimate", "--policy", "infobatch", words=["infobatch"]),
    flags("estimate-unknown-policy", "estimate", "--policy", "oracle", words=["--policy", "'oracle'"]),
    flags("estimate-run-missing", "estimate", "--run", "nowhere", words=["nowhere", "config.yaml is missing"]),
    with_run(
        "estimate-run-and-seconds",
        _nothing,
        ["estimate", "--run", "run", "--epoch-seconds", "1"],
        status=None,
        words=["--epoch-seconds or --run, not both"],
    ),
    with_run(
        "estimate-run-config-a-list",
        _write("config.yaml", "- 1\n"),
        ["estimate", "--run", "run"],
        status=None,
        words=["config.yaml", "corrupt"],
    ),
    with_run(
        "estimate-run-short-rows",
        _write("metrics.csv", "epoch,lr\n1\n"),
        ["estimate", "--run", "run"],
        status=None,
        words=["metrics.csv", "corrupt"],
    ),
    with_run(
        "estimate-run-wrong-types",
        _replace("metrics.csv", "\n1,", "\nx,"),
        ["estimate", "--run", "run"],
        status=None,
        words=["metrics.csv", "corrupt"],
    ),
    # -- report
    flags("report-missing", "report", "nowhere", words=["nowhere does not exist"]),
    with_run(
        "report-out-a-file",
        _write("blocker", "x"),
        ["report", "run", "--out", "run/blocker"],
        status=None,
        words=["run/blocker", "File exists"],
    ),
    with_run(
        "report-out-under-a-file",
        _write("blocker", "x"),
        ["report", "run", "--out", "run/blocker/x"],
        status=None,
        words=["run/blocker/x", "Not a directory"],
    ),
    with_run(
        "report-notes-missing",
        _nothing,
        ["report", "run", "--out", "rep", "--notes", "nope.md"],
        status=None,
        words=["--notes nope.md", "No such file"],
    ),
    # -- compare
    flags(
        "compare-unknown-policy",
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--policies",
        "regular,oracle",
        words=["--policies", "'oracle'"],
    ),
    flags(
        "compare-seeds-words",
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--seeds",
        "a",
        words=["--seeds", "got 'a'"],
    ),
    flags(
        "compare-seeds-negative",
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--seeds",
        "-1",
        words=["--seed", "got -1"],
    ),
    flags(
        "compare-looks-overflow",
        "compare",
        "-m",
        "lenet",
        "-d",
        "synthetic",
        "--until-decided",
        "--looks",
        BIG,
        words=["--looks", "100000000000000000000"],
    ),
    flags(
        "compare-looks-huge-dry",
        *("compare", "-m", "lenet", "-d", "synthetic", "--until-decided", "--looks", "2,100000000", "--dry-run"),
        words=["--looks", "100000000"],
    ),
    flags(
        "compare-seeds-too-many",
        "compare",
        "-m",
        "lenet",
        "-d",
        "synthetic",
        "--seeds",
        ",".join(map(str, range(2000))),
        words=["--seeds", "2,000 listed"],
    ),
    flags(
        "compare-frontier-above-one",
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--frontier",
        "1.5",
        words=["--frontier", "got [1.5]"],
    ),
    flags(
        "compare-frontier-word",
        "compare",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--frontier",
        "x",
        words=["--frontier", "got 'x'"],
    ),
    flags(
        "compare-unknown-model",
        "compare",
        "--model",
        "lenet,nope",
        "--dataset",
        "synthetic",
        words=["--model", "got 'nope'"],
    ),
    with_file(
        "compare-out-a-file",
        "blocker",
        "x",
        [
            "compare",
            "--model",
            "lenet",
            "--dataset",
            "synthetic",
            "--subset",
            "64",
            "--epochs",
            "1",
            "--policies",
            "regular",  # the default policies would be refused first: fine prunes no epoch of 1
            "--out",
            "blocker",
        ],
        words=["blocker", "File exists"],
    ),
    # -- scale
    flags(
        "scale-dist-mode-comma",
        "scale",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--dist-mode",
        ",",
        words=["--dist-mode names no mode"],
    ),
    with_file(
        "scale-out-a-file",
        "blocker",
        "x",
        ["scale", "--model", "lenet", "--dataset", "synthetic", "--out", "blocker"],
        words=["--out blocker", "Not a directory"],
    ),
    flags(
        "scale-nproc-zero",
        "scale",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--nproc",
        "0",
        words=["--nproc", "positive integers"],
    ),
    flags(
        "scale-nproc-word",
        "scale",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--nproc",
        "x",
        words=["--nproc", "got 'x'"],
    ),
    flags(
        "scale-target-negative",
        "scale",
        "--model",
        "lenet",
        "--dataset",
        "synthetic",
        "--target-loss",
        "-1",
        words=["--target-loss", "got -1.0"],
    ),
    # -- commands
    flags("unknown-command", "fly", words=["No such command 'fly'"]),
    flags("unknown-global-option", "--nope", words=["No such option: --nope"]),
]

"""The command line's conventions: each command's examples, --version, --dry-run and
--print-config options, and the run folder that `train --name` picks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .. import console
from ..engine.setup.config import build_config
from ..errors import ConfigError


def examples(*lines: str) -> str:
    """A command's help epilog: one example per line, kept as written (\\b: no rewrapping)."""
    return "Examples:\n\b\n" + "\n".join(f"  {line}" for line in lines) + "\n"


EXAMPLES = {
    "": examples(
        "fineprune train -m lenet -d fashion-mnist --epochs 10 --prune",
        "fineprune compare --config experiments/demo.yaml --dry-run",
        "fineprune report results/demo/runs --out results/runs/demo-report",
        "fineprune COMMAND --help    # each command's options and examples",
    ),
    "train": examples(
        "fineprune train -m lenet -d fashion-mnist --epochs 10    # regular training",
        "fineprune train -m lenet -d fashion-mnist --epochs 10 --prune --name fp",
        "fineprune train -m resnet18 -d cifar10 --data-dir data/cifar10 --dry-run",
        "fineprune train --config experiments/demo.yaml --print-config",
        "fineprune train --resume results/runs/20260101-120000-lenet-fashion-mnist",
    ),
    "compare": examples(
        "fineprune compare --config experiments/demo.yaml",
        "fineprune compare -m lenet -d fashion-mnist --epochs 30 --seeds 0,1,2 --dry-run",
        "fineprune compare -m lenet -d fashion-mnist --policies regular,fine,random,infobatch,ucb,egreedy,kakurenbo --shorter 0.3",
        "fineprune compare -m lenet -d fashion-mnist --policies regular,rs2,seta,ies,orderdp,selective-backprop --frontier 0.3",
        "fineprune compare --config experiments/paper.yaml --print-config > mine.yaml",
    ),
    "report": examples(
        "fineprune report    # the runs under results/runs",
        "fineprune report results/demo/runs --out results/runs/demo-report",
        "fineprune report results/runs/compare --margin 0.5 --no-plots --json",
    ),
    "scale": examples(
        "fineprune scale -m lenet -d fashion-mnist --epochs 5 --nproc 1,2",
        "fineprune scale -m lenet -d fashion-mnist --dist-mode sync,async --num-ps 1,2 --nproc 2,4",
    ),
    "estimate": examples(
        "fineprune estimate --epochs 200 --epoch-seconds 30",
        "fineprune estimate --epochs 30 --window 10 --start 5 --json",
        "fineprune estimate --run results/runs/compare/lenet-fashion-mnist/infobatch-seed0",
    ),
    "models": examples("fineprune models"),
    "policies": examples("fineprune policies", "fineprune policies --json"),
}


def show_version(value: bool) -> None:
    """--version; torch's version from its installed metadata: importing torch takes seconds."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from .. import __version__

        try:
            torch = f", torch {version('torch')}"
        except PackageNotFoundError:
            torch = ", torch not installed"
        console.result(f"fineprune {__version__}{torch}")
        raise typer.Exit()


VersionOpt = Annotated[
    bool,
    typer.Option(
        "--version", callback=show_version, is_eager=True, help="Print fineprune's version (and torch's) and exit."
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the resolved settings, the pruning epochs, the runs and a time estimate (the model timed on random inputs at the threads the runs will use; with --jobs the runs side by side; with --until-decided first look .. all looks; none, and why, when the timing is unsteady), then exit: trains nothing, writes nothing.",
    ),
]
PrintConfigOpt = Annotated[
    bool,
    typer.Option("--print-config", help="Print the resolved config as YAML (a file --config reads back) and exit."),
]
NameOpt = Annotated[
    Optional[str],
    typer.Option(
        help="Run folder results/runs/<YYYYmmdd-HHMMSS>-NAME instead of <time>-<model>-<dataset>; not with --out."
    ),
]
# the launch across machines, the same flags for `train --nproc-per-node` and `scale`
NnodesOpt = Annotated[
    Optional[int],
    typer.Option(
        help="Machines: run the same command on each, with its --node-rank and an --out they all see. (default 1)"
    ),
]
NodeRankOpt = Annotated[Optional[int], typer.Option(help="With --nnodes > 1: this machine's rank, 0 to nnodes - 1.")]
RdzvEndpointOpt = Annotated[
    Optional[str], typer.Option(help="With --nnodes > 1: host:port of the rendezvous, on node rank 0.")
]
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def named_folder(name: str, config: Optional[Path], settings: dict[str, Any]) -> str:
    """`--name NAME`: the run folder results/runs/<time>-NAME; a folder named twice is refused."""
    from ..engine.records.record import default_run_dir

    if not NAME.fullmatch(name):
        raise ConfigError(
            f"--name must be a folder name of letters, digits, '.', '_', '+' or '-' "
            f"(at most 100, not starting with a dot or dash), got '{name[:100]}'"
        )
    if build_config(config, settings).run.out:
        raise ConfigError("--name and --out both name the run folder: give one (or drop run.out from --config)")
    return str(default_run_dir("", "", name))


def without_name(argv: list[str], out: str) -> list[str]:
    """The launcher's argv for its processes: the folder --name chose, named once (as --out),
    not again by each process at its own start time."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg == "--name" or arg.startswith("--name="):
            skip = arg == "--name" and not skip
            continue
        kept.append(arg)
    return [*kept, "--out", out]

"""The `fineprune` command line: parse flags into settings and call a plain function.

Every settings flag is generated from its declaration (`options.with_settings`); commands
only parse and delegate, and print through the console helper.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from .. import console
from ..drivers.compare import CompareConfig
from ..engine.config import DataConfig, ModelConfig, RunConfig, TrainConfig, build_config
from ..errors import ConfigError, FinepruneError
from ..pruning.config import PruneConfig
from . import dryrun_view, views
from .conventions import EXAMPLES, DryRunOpt, NameOpt, PrintConfigOpt, VersionOpt, named_folder, without_name
from .options import SetOpt, parse_set, with_settings


class OneLineErrors(TyperGroup):
    """Bad input ends in one line on stderr and exit code 2, never a traceback or a box."""

    def main(
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            _ending()
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `fineprune`: show the help
                console.result(exc.format_message())
                sys.exit(0)
            console.error(" ".join(exc.format_message().split()))
            sys.exit(2)
        except FinepruneError as exc:
            _ending()
            (console.stopped if exc.stop else console.error)(str(exc))
            sys.exit(exc.exit_code)
        except OSError as exc:  # disk full, permissions, a folder removed meanwhile: not a bug to trace
            _ending()
            console.error(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
            sys.exit(2)
        except (typer.Abort, KeyboardInterrupt):
            _ending()
            console.stopped("interrupted")
            sys.exit(130)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


_OWN_PROCESS = {"main": False}  # set by main(): the process ends with this command


def _ending() -> None:
    """The process is about to print its one line and exit: a late Ctrl-C (a second press
    just after the first stopped a run) must not break into that with a traceback. Only where
    the command owns the process: a library caller keeps its handlers."""
    if _OWN_PROCESS["main"] and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Data fine-pruning (Li et al., 2018) and other data-pruning policies: train, compare "
    "against equal-budget controls, report, and estimate the time saved.",
    epilog=EXAMPLES[""],
)


@app.callback()
def _options(version: VersionOpt = False) -> None:
    pass


ConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--config", "-c", help="YAML file with sections model/data/train/prune/run (and compare); flags override it."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]

NOTES_LIMIT = 2**20  # --notes: a page of Markdown, not a stream
RESUME_ALONE = "--resume takes no other options: the run continues with its saved config"
SCHEDULE = ("window", "start", "attenuation", "block", "count", "prune_fraction")
TRAIN = (
    ("model", ModelConfig, ()),
    ("data", DataConfig, ()),
    ("train", TrainConfig, ()),
    ("prune", PruneConfig, ()),
    ("run", RunConfig, ()),
)
COMPARE = (
    ("compare", CompareConfig, ()),
    ("data", DataConfig, ("data_dir", "subset", "test_subset", "image_size")),
    ("train", TrainConfig, ()),
    ("prune", PruneConfig, tuple(n for n in vars(PruneConfig()) if n not in ("enabled", "policy"))),
    ("run", RunConfig, ("device", "compile", "tensorboard")),
)


def _split(settings: dict[str, Any], section: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ours = {k: v for k, v in settings.items() if k.startswith(section + ".")}
    return ours, {k: v for k, v in settings.items() if k not in ours}


@app.command("train", epilog=EXAMPLES["train"])
@with_settings(*TRAIN, required=("model.name", "data.dataset"))
def train_command(
    settings: dict[str, Any],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    name: NameOpt = None,
    dry_run: DryRunOpt = False,
    print_config: PrintConfigOpt = False,
    resume: Annotated[
        Optional[Path], typer.Option(help="Continue an interrupted run folder from its checkpoint (no other options).")
    ] = None,
    nproc_per_node: Annotated[
        Optional[int],
        typer.Option(
            help="Data-parallel: start N processes on this machine through torch.distributed's launcher (torchrun)."
        ),
    ] = None,
    nnodes: Annotated[
        Optional[int], typer.Option(help="With --nproc-per-node: number of machines. (default 1)")
    ] = None,
    node_rank: Annotated[Optional[int], typer.Option(help="With --nnodes > 1: this machine's rank.")] = None,
    rdzv_endpoint: Annotated[
        Optional[str], typer.Option(help="With --nnodes > 1: host:port of the rendezvous (node 0).")
    ] = None,
    max_restarts: Annotated[
        Optional[int],
        typer.Option(
            help="With --nproc-per-node: when a process fails, torchrun restarts them all, up to N times; they continue from the run's last checkpoint. (default 0)"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Train a model and write a run folder (config.yaml, metrics.csv, summary.json, checkpoint.pt)."""
    from .. import runner
    from ..engine.config import validate
    from ..engine.world import from_env

    settings.update(parse_set(set_))
    if resume is not None and (name is not None or dry_run or print_config):
        raise ConfigError(RESUME_ALONE)
    if name is not None:
        settings["run.out"] = named_folder(name, config, settings)
    looking = dry_run or print_config
    if not looking and max_restarts is not None and nproc_per_node is None:
        raise ConfigError("--max-restarts needs --nproc-per-node: it restarts the processes torchrun started")
    if not looking and nproc_per_node is not None:
        from ..distributed.launch import check_launch

        check_launch(nproc_per_node, nnodes, node_rank, rdzv_endpoint)
    elif resume is not None and (config is not None or any(v is not None for v in settings.values())):
        raise ConfigError(RESUME_ALONE)
    # validated once, by what it is handed to (a resumed run's config: by `resumable`)
    cfg = None if resume is not None else build_config(config, settings)
    if print_config:
        return dryrun_view.show_config(validate(cfg).to_dict(), as_json)
    if dry_run:
        from ..drivers.dryrun import dry_train

        return dryrun_view.show_dry_run(dry_train(cfg), as_json)
    if nproc_per_node is not None:
        argv = without_name(sys.argv[1:], cfg.run.out) if name is not None else sys.argv[1:]
        raise typer.Exit(runner.launch(argv, cfg, nproc_per_node, nnodes, node_rank, rdzv_endpoint, max_restarts or 0))
    if cfg is None:
        summary = runner.resume(resume, show_progress=not as_json)
    else:
        summary = runner.train(cfg, show_progress=not as_json, command=_invocation())
    if from_env().main and summary is not None:
        views.show_trained(summary, as_json)


@app.command(epilog=EXAMPLES["compare"])
@with_settings(*COMPARE, required=("compare.models", "compare.datasets"))
def compare(
    settings: dict[str, Any],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    dry_run: DryRunOpt = False,
    print_config: PrintConfigOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train every policy with identical seeds and compare them (regular, fine and random by default).

    Runs already complete in --out are reused, so an interrupted compare continues."""
    from ..analysis.runs import load_runs
    from ..analysis.numbers import summary_rows
    from ..analysis.verdict import build
    from ..drivers.compare import load_compare
    from ..drivers.matrix import run_matrix

    matrix, rest = _split(settings, "compare")
    set_matrix, set_rest = _split(parse_set(set_), "compare")  # --set compare.jobs=2 fills the matrix
    matrix.update(set_matrix)
    rest.update(set_rest)
    c = load_compare(config, matrix)
    if dry_run or print_config:
        from dataclasses import asdict

        from ..drivers.compare import plan
        from ..drivers.dryrun import dry_compare

        cfg = build_config(config, rest)
        if print_config:
            plan(cfg, c)  # the same refusals as a real compare: every job's config is valid
            return dryrun_view.show_config({**cfg.to_dict(), "compare": asdict(c)}, as_json)
        return dryrun_view.show_dry_run(dry_compare(cfg, c), as_json)
    if c.until_decided:
        from ..sequential.looks import until_decided

        dirs, _ = until_decided(build_config(config, rest), c, show_progress=not as_json, command=_invocation())
        return views.show_looks(summary_rows(load_runs(dirs)[0]), Path(c.out), as_json)
    dirs = run_matrix(build_config(config, rest), c, show_progress=not as_json, command=_invocation())
    runs = load_runs(dirs)[0]
    views.show_compare(summary_rows(runs), as_json, c.out, build(runs))


@app.command(epilog=EXAMPLES["report"])
def report(
    run_dirs: Annotated[
        Optional[list[Path]], typer.Argument(help="Run folders, or folders holding them. (default results/runs)")
    ] = None,
    out: Annotated[Path, typer.Option(help="Where the tables, plots and index.md go.")] = Path("results/report"),
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the PNG plots (needs matplotlib).")] = True,
    notes: Annotated[
        Optional[Path], typer.Option(help="Markdown file put at the top of index.md (e.g. how the runs were made).")
    ] = None,
    margin: Annotated[
        float,
        typer.Option(
            help="The margin m in accuracy points: a policy is 'worth it' only if shown not worse than regular by more than m (and better than its cheap alternative); 'not worth it' if shown worse by more than m."
        ),
    ] = 0.3,
    min_gain: Annotated[
        Optional[float],
        typer.Option(
            help="Minimum gain over the cheap alternative (points): a policy shown not to beat it by this much is 'not worth it'. (default: the margin)"
        ),
    ] = None,
    target: Annotated[
        Optional[float],
        typer.Option(
            help="Test accuracy (%) for time-to-accuracy. (default: regular's mean final accuracy − 0.5 pt, per model and dataset)"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one decision per policy (worth it / not worth it / can't tell yet, error held at 5% over the
    report), the paper's Tables 1 and 2, time-to-accuracy (CSV + Markdown), plots and an index.md, from run folders."""
    import math

    from ..analysis.report import write_report
    from ..engine.files import read_regular_text
    from ..analysis.decision import Judging

    if not (math.isfinite(margin) and 0 < margin <= 100):
        raise ConfigError(f"--margin must be a positive number of accuracy points, at most 100, got {margin:g}")
    if min_gain is not None and not (math.isfinite(min_gain) and 0 <= min_gain <= 100):
        raise ConfigError(f"--min-gain must be a number of accuracy points in [0, 100], got {min_gain:g}")
    if target is not None and not (math.isfinite(target) and 0 < target <= 100):
        raise ConfigError(f"--target must be a test accuracy in (0, 100] percent, got {target:g}")

    text = ""
    if notes is not None:
        try:
            text = read_regular_text(notes, NOTES_LIMIT)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read --notes {notes}: {getattr(exc, 'strerror', None) or exc}") from None
    with _term_as_interrupt():
        made = write_report(
            run_dirs or [Path("results/runs")],
            out,
            with_plots=plots,
            notes=text,
            judging=Judging(margin, target, min_gain),
        )
    views.show_report(made, as_json)


@contextlib.contextmanager
def _term_as_interrupt() -> Any:
    """SIGTERM ends a report as Ctrl-C does: by an exception, so the half-written staging
    folder is removed (killed outright, it stayed in --out as a hidden .report-* folder)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command(epilog=EXAMPLES["scale"])
@with_settings(
    ("model", ModelConfig, ("name",)),
    ("data", DataConfig, ("dataset", "data_dir", "subset", "test_subset")),
    ("train", TrainConfig, ("epochs", "batch_size", "batch_per_worker", "lr", "milestones")),
    ("run", RunConfig, ("device", "group_size", "dist_timeout")),
    ("prune", PruneConfig, ("enabled",)),
    required=("model.name", "data.dataset"),
)
def scale(
    settings: dict[str, Any],
    config: ConfigOpt = None,
    nproc: Annotated[
        str,
        typer.Option(
            help="Worker counts to compare, e.g. 1,2,4; async/mixed add their --num-ps servers. With --nnodes > 1: processes per node, servers among them. A 1-process sync run (the baseline) is always added."
        ),
    ] = "1,2",
    dist_mode: Annotated[
        str, typer.Option(help="Distributed modes to compare: sync (DDP), async, mixed (parameter servers).")
    ] = "sync",
    num_ps: Annotated[
        str, typer.Option(help="Parameter servers of the async/mixed runs, e.g. 1,2 (the paper's Table 1).")
    ] = "1",
    nnodes: Annotated[
        int,
        typer.Option(
            help="Machines; run the same command on each with its --node-rank (--out on a shared folder). (default 1)"
        ),
    ] = 1,
    node_rank: Annotated[
        int,
        typer.Option(help="With --nnodes > 1: this machine's rank; rank 0 runs the baseline and writes the tables."),
    ] = 0,
    rdzv_endpoint: Annotated[
        Optional[str], typer.Option(help="With --nnodes > 1: host:port of the rendezvous (node rank 0).")
    ] = None,
    target_accuracy: Annotated[
        Optional[float],
        typer.Option(
            help="Test accuracy (percent) to time (default: the lowest final accuracy of all configurations)."
        ),
    ] = None,
    target_loss: Annotated[
        Optional[float],
        typer.Option(
            help="Training loss to time (default: the highest final loss of the configurations that learned)."
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            help="Folder for scale.csv, scale.md and the run folders (default: ignored by "
            "git; results/scale holds the committed table)."
        ),
    ] = Path("results/runs/scale"),
    as_json: JsonOpt = False,
) -> None:
    """Train the same model on 1, 2, 4 ... processes (Campos et al. 2017): throughput, speedup
    and efficiency against one process, final accuracy, time to a target accuracy and loss."""
    from ..drivers.scale import Launch, plan, run_scale
    from ..drivers.scale_table import Targets
    from ..engine.config import parse_int_list

    launch = Launch(nnodes, node_rank, rdzv_endpoint)
    jobs = plan(
        parse_int_list(nproc, "--nproc") or [], _names(dist_mode), parse_int_list(num_ps, "--num-ps") or [], launch
    )
    done = run_scale(
        build_config(config, settings), jobs, out, _invocation(), Targets(target_loss, target_accuracy), launch
    )
    views.show_scale(done, node_rank, as_json)


@app.command(epilog=EXAMPLES["estimate"])
@with_settings(("train", TrainConfig, ("epochs",)), ("prune", PruneConfig, SCHEDULE + ("policy", "anneal")))
def estimate(
    settings: dict[str, Any],
    epoch_seconds: Annotated[Optional[float], typer.Option(help="Seconds per full training epoch.")] = None,
    run: Annotated[
        Optional[Path], typer.Option(help="Run folder: take its schedule, measured epoch time and overhead.")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict the pruning epochs and time saved before training (Section 4.4).

    For policies whose budget depends on the losses (infobatch, ucb, egreedy, kakurenbo) it
    reads the figures from a run of theirs (--run); kakurenbo's end-of-epoch forward pass is
    part of its epochs' measured time, so of the overhead t_0."""
    from ..analysis.runs import estimate_for

    views.show_estimate(estimate_for(settings, epoch_seconds, run, config), as_json)


@app.command("models", epilog=EXAMPLES["models"])
def list_models() -> None:
    """List the model zoo."""
    from .. import models

    for name in models.list_models():
        console.result(name)


@app.command("policies", epilog=EXAMPLES["policies"])
def list_policies(as_json: JsonOpt = False) -> None:
    """List the pruning policies (`--policy`, `compare --policies`)."""
    views.show_policies(as_json)


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _invocation() -> str:
    return shlex.join(["fineprune", *sys.argv[1:]])


def main() -> None:
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # under torchrun: a rank's uncaught error goes
        from torch.distributed.elastic.multiprocessing.errors import record  # into its failure report

        record(_main)()
    else:  # torch is imported by the commands that train, not for --help
        _main()


def _main() -> None:
    _OWN_PROCESS["main"] = True
    try:
        app()
    finally:  # called in-process (tests, a wrapper that catches SystemExit): later commands own nothing
        _OWN_PROCESS["main"] = False

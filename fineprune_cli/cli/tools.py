"""`report`, `scale`, `estimate`, `models` and `policies`: each parses its flags and calls one function."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .. import console
from ..analysis.decide.judging import Judging
from ..engine.setup.config import DataConfig, ModelConfig, RunConfig, TrainConfig, build_config
from ..errors import ConfigError
from ..pruning.config import PruneConfig
from . import views
from .app import ConfigOpt, JsonOpt, app, invocation, names, term_as_interrupt
from .conventions import EXAMPLES, NnodesOpt, NodeRankOpt, RdzvEndpointOpt
from .options import with_settings

NOTES_LIMIT = 2**20  # --notes: a page of Markdown, not a stream
SCHEDULE = ("window", "start", "attenuation", "block", "count", "prune_fraction")


@app.command(epilog=EXAMPLES["report"])
@with_settings(("judging", Judging, ()))
def report(
    settings: dict[str, Any],
    run_dirs: Annotated[
        Optional[list[Path]], typer.Argument(help="Run folders, or folders holding them. (default results/runs)")
    ] = None,
    out: Annotated[Path, typer.Option(help="Where the tables, plots and index.md go.")] = Path("results/report"),
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the PNG plots (needs matplotlib).")] = True,
    notes: Annotated[
        Optional[Path], typer.Option(help="Markdown file put at the top of index.md (e.g. how the runs were made).")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Decide per policy: worth it, not worth it or can't tell yet, by the plan recorded with the runs.

    Also writes the paper's Tables 1 and 2, time-to-accuracy (CSV + Markdown), plots and an
    index.md, from run folders. Judging flags (or a --config's judging section) that differ
    from the recorded plan make the decisions post hoc, and the report says so."""
    from ..analysis.decide import plan
    from ..analysis.decide.judging import load_judging
    from ..analysis.render.report import write_report
    from ..engine.records.files import read_regular_text

    folders = run_dirs or [Path("results/runs")]
    agreed = plan.agreed(plan.find(folders))
    judging = load_judging(config, settings, base=agreed.judging if agreed else None)
    text = ""
    if notes is not None:
        try:
            text = read_regular_text(notes, NOTES_LIMIT)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read --notes {notes}: {getattr(exc, 'strerror', None) or exc}") from None
    with term_as_interrupt():
        made = write_report(folders, out, with_plots=plots, notes=text, judging=judging)
    views.show_report(made, as_json)


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
    nnodes: NnodesOpt = None,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
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
    """Train the same model on 1, 2, 4 ... processes (Campos et al. 2017) and tabulate the scaling.

    Throughput, speedup and efficiency against one process, final accuracy, time to a target
    accuracy and loss. Across machines, node rank 0 runs the baseline and writes the tables."""
    from ..drivers.scale import Launch, plan, run_scale
    from ..drivers.scale_table import Targets
    from ..engine.setup.config import parse_int_list

    launch = Launch(1 if nnodes is None else nnodes, node_rank or 0, rdzv_endpoint)
    jobs = plan(
        parse_int_list(nproc, "--nproc") or [], names(dist_mode), parse_int_list(num_ps, "--num-ps") or [], launch
    )
    done = run_scale(
        build_config(config, settings), jobs, out, invocation(), Targets(target_loss, target_accuracy), launch
    )
    views.show_scale(done, launch.node_rank, as_json)


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
    from ..drivers.estimate import estimate_for

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

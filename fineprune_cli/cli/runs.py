"""`train` and `compare`: flags and YAML into one config, handed to the runner or the matrix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..analysis.decide.judging import Judging
from ..drivers.compare import CompareConfig
from ..drivers.executors import registry
from ..engine.setup.config import DataConfig, ModelConfig, RunConfig, TrainConfig, build_config
from ..engine.setup.scriptconfig import ScriptConfig
from ..errors import ConfigError
from ..pruning.config import PruneConfig
from . import dryrun_view, views
from .app import ConfigOpt, Interrupted, JsonOpt, app, invocation, term_as_interrupt
from .conventions import (
    EXAMPLES,
    DryRunOpt,
    NameOpt,
    NnodesOpt,
    NodeRankOpt,
    PrintConfigOpt,
    RdzvEndpointOpt,
    named_folder,
    without_name,
)
from .options import SetOpt, parse_set, with_settings

RESUME_ALONE = "--resume takes no other options: the run continues with its saved config"
TRAIN = (
    ("model", ModelConfig, ()),
    ("data", DataConfig, ()),
    ("train", TrainConfig, ()),
    ("prune", PruneConfig, ()),
    ("run", RunConfig, ()),
)
COMPARE = (
    ("compare", CompareConfig, ()),
    *((f"compare.{kind.name}", kind.settings, ()) for kind in registry.with_settings()),
    ("judging", Judging, ()),
    ("data", DataConfig, ("data_dir", "subset", "test_subset", "image_size")),
    ("train", TrainConfig, ()),
    ("prune", PruneConfig, tuple(n for n in vars(PruneConfig()) if n not in ("enabled", "policy"))),
    ("run", RunConfig, ("device", "compile", "tensorboard")),
    ("script", ScriptConfig, ()),
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
    nnodes: NnodesOpt = None,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
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
    from ..engine.setup.config import validate
    from ..engine.training.world import from_env

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
        summary = runner.train(cfg, show_progress=not as_json, command=invocation())
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
    from ..analysis.decide.judging import load_judging
    from ..analysis.decide.plan import recorded_judging
    from ..analysis.decide.sequence import record
    from ..analysis.render.load import lines
    from ..analysis.render.summary import summary_rows
    from ..analysis.render.verdict import build
    from ..drivers.compare import load_compare
    from ..drivers.matrix import judged_matrix
    from ..sequential.looks import until_decided

    matrix, rest = _split(settings, "compare")
    set_matrix, set_rest = _split(parse_set(set_), "compare")  # --set compare.jobs=2 fills the matrix
    matrix.update(set_matrix)
    rest.update(set_rest)
    judged, rest = _split(rest, "judging")
    c = load_compare(config, matrix)
    judging = load_judging(config, judged, base=recorded_judging(Path(c.out)))
    if dry_run or print_config:
        from dataclasses import asdict

        from ..drivers.compare import plan
        from ..drivers.dryrun import dry_compare
        from ..engine.setup.scriptconfig import used_by_script

        cfg = build_config(config, rest, drop_idle=False)  # each arm keeps what acts in it
        if print_config:
            plan(cfg, c)  # the same refusals as a real compare: every job's config is valid
            tree = used_by_script(cfg.to_dict())
            return dryrun_view.show_config({**tree, "compare": c.to_dict(), "judging": asdict(judging)}, as_json)
        return dryrun_view.show_dry_run(dry_compare(cfg, c), as_json)
    run = until_decided if c.until_decided else judged_matrix
    try:
        with term_as_interrupt():
            found = run(
                build_config(config, rest, drop_idle=False), c, judging, show_progress=not as_json, command=invocation()
            )
    except KeyboardInterrupt:  # between runs: the finished ones are kept, the next compare goes on
        raise Interrupted("interrupted; compare again to continue") from None
    looks = record(found.looks, found.replayed, found.decisions, judging) if found.looks else None
    views.show_compare(
        summary_rows(found), as_json, c.out, build(found), looks, found.collapsed, found.compression, lines(found)
    )

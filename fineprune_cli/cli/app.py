"""The `fineprune` command line: parse flags into one Config and call a plain function."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from . import console
from .config import Config, apply_mapping, build_config, check_epochs, load_yaml, parse_int_list
from .errors import ConfigError, FinepruneError


class OneLineErrors(TyperGroup):
    """Bad input ends in one line on stderr and exit code 2, never a traceback or a box."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `fineprune`: show the help
                console.result(exc.format_message())
                sys.exit(0)
            console.error(" ".join(exc.format_message().split()))
            sys.exit(2)
        except FinepruneError as exc:
            console.error(str(exc))
            sys.exit(exc.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            console.error("interrupted")
            sys.exit(130)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


app = typer.Typer(
    cls=OneLineErrors, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Data fine-pruning (Li et al., 2018): train, compare and estimate time saved by "
         "leaving hard samples out of some epochs.")

# Options shared by several commands; each fills one Config field (None = not given).
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML file with sections model/data/train/prune/run; flags override it.")]
EpochsOpt = Annotated[Optional[int], typer.Option(help="Training epochs n. (default 200)")]
WindowOpt = Annotated[Optional[int], typer.Option(help="DroppingCount window w in epochs. (default 60)")]
StartOpt = Annotated[Optional[int], typer.Option(help="Starting point a_0: first pruning position in a window. (default 30)")]
AttenOpt = Annotated[Optional[float], typer.Option(help="a_k = int(a_{k-1}/attenuation) per new window. (default 2)")]
BlockOpt = Annotated[Optional[int], typer.Option(help="PruningBlock: epochs per block. (default 2)")]
CountOpt = Annotated[Optional[int], typer.Option(help="PruningCount: pruning epochs per block. (default 1)")]
FracOpt = Annotated[Optional[float], typer.Option(help="Share of samples left out of a pruning epoch. (default 0.3)")]
TolOpt = Annotated[Optional[float], typer.Option(help="Count a sample when loss > batch mean x (1 + tolerance). (default 0)")]
ModelOpt = Annotated[Optional[str], typer.Option("--model", "-m", help="Model name (see `fineprune models`).")]
DatasetOpt = Annotated[Optional[str], typer.Option("--dataset", "-d", help="fashion-mnist, cifar10, cifar100, folder or synthetic.")]
BatchOpt = Annotated[Optional[int], typer.Option(help="Batch size. (default 128)")]
LrOpt = Annotated[Optional[float], typer.Option(help="Initial learning rate. (default 0.1)")]
MilestonesOpt = Annotated[Optional[str], typer.Option(help="Epochs where lr is multiplied by gamma (0.2), e.g. 60,120,160.")]
TestSubsetOpt = Annotated[Optional[int], typer.Option(help="Evaluate on a fixed class-balanced subset of N test samples (quick checks).")]
SubsetOpt = Annotated[Optional[int], typer.Option(help="Train on a fixed, seeded, class-balanced subset of N samples.")]
DataDirOpt = Annotated[Optional[str], typer.Option(help="Dataset folder (cifar10/100, folder, fashion-mnist elsewhere than Debian's).")]
DeviceOpt = Annotated[Optional[str], typer.Option(help="auto, cpu, cuda or cuda:N. (default auto)")]
CompileOpt = Annotated[Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile the model.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def _schedule_overrides(epochs, window, start, attenuation, block, count, prune_fraction,
                        tolerance=None) -> dict[str, Any]:
    return {"train.epochs": epochs, "prune.window": window, "prune.start": start,
            "prune.attenuation": attenuation, "prune.block": block, "prune.count": count,
            "prune.prune_fraction": prune_fraction, "prune.tolerance": tolerance}


@app.command()
def train(
    model: ModelOpt = None, dataset: DatasetOpt = None, epochs: EpochsOpt = None,
    batch_size: BatchOpt = None, lr: LrOpt = None, milestones: MilestonesOpt = None,
    seed: Annotated[Optional[int], typer.Option(help="Random seed. (default 0)")] = None,
    subset: SubsetOpt = None, test_subset: TestSubsetOpt = None, data_dir: DataDirOpt = None,
    download: Annotated[Optional[bool], typer.Option("--download", help="Fetch cifar10/100 or fashion-mnist into --data-dir (needs internet).")] = None,
    widen: Annotated[Optional[int], typer.Option(help="WRN widen factor k. (default 8)")] = None,
    device: DeviceOpt = None, compile: CompileOpt = None,
    out: Annotated[Optional[str], typer.Option(help="Run folder. (default results/runs/<time>-<model>-<dataset>)")] = None,
    config: ConfigOpt = None,
    prune: Annotated[Optional[bool], typer.Option("--prune/--no-prune", help="Turn data fine-pruning on.")] = None,
    policy: Annotated[Optional[str], typer.Option(help="fine (DroppingCount) or random (equal-budget control).")] = None,
    window: WindowOpt = None, start: StartOpt = None, attenuation: AttenOpt = None,
    block: BlockOpt = None, count: CountOpt = None, prune_fraction: FracOpt = None,
    tolerance: TolOpt = None,
    checkpoint_every: Annotated[Optional[int], typer.Option(help="Epochs between checkpoints; 0: only at the end. (default 1)")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue an interrupted run folder from its checkpoint (no other options).")] = None,
    dist_mode: Annotated[Optional[str], typer.Option(help="With several processes: sync (DDP), async or mixed (parameter server on rank 0). (default sync)")] = None,
    group_size: Annotated[Optional[int], typer.Option(help="Mixed mode: workers that average gradients before one push. (default 2)")] = None,
    nproc_per_node: Annotated[Optional[int], typer.Option(help="Data-parallel: start N processes on this machine through torch.distributed's launcher (torchrun).")] = None,
    nnodes: Annotated[Optional[int], typer.Option(help="With --nproc-per-node: number of machines. (default 1)")] = None,
    node_rank: Annotated[Optional[int], typer.Option(help="With --nnodes > 1: this machine's rank.")] = None,
    rdzv_endpoint: Annotated[Optional[str], typer.Option(help="With --nnodes > 1: host:port of the rendezvous (node 0).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Train a model and write a run folder (config.yaml, metrics.csv, summary.json, checkpoint.pt)."""
    from .distributed import from_env, relaunch
    from .runner import resume as resume_training, train as run_training

    if nproc_per_node is not None:
        raise typer.Exit(relaunch(sys.argv[1:], nproc_per_node, nnodes, node_rank, rdzv_endpoint))

    overrides = {
        "model.name": model, "model.widen": widen, "data.dataset": dataset, "data.data_dir": data_dir,
        "data.download": download, "data.subset": subset, "data.test_subset": test_subset,
        "train.batch_size": batch_size,
        "train.lr": lr, "train.milestones": parse_int_list(milestones, "--milestones"),
        "run.seed": seed, "run.device": device, "run.compile": compile, "run.out": out,
        "prune.enabled": prune, "prune.policy": policy, "run.checkpoint_every": checkpoint_every,
        "run.dist_mode": dist_mode, "run.group_size": group_size,
        **_schedule_overrides(epochs, window, start, attenuation, block, count, prune_fraction, tolerance),
    }
    if resume is not None:
        if config is not None or any(v is not None for v in overrides.values()):
            raise ConfigError("--resume takes no other options: the run continues with its saved config")
        summary = resume_training(resume, show_progress=not as_json)
    else:
        summary = run_training(build_config(config, overrides), show_progress=not as_json,
                               command=_invocation())
    if not from_env().main:
        return
    if as_json:
        console.print_json(summary)
        return
    console.result(
        f"{summary['model']} on {summary['dataset']}: test accuracy {summary['final_accuracy']:.2f}% "
        f"(best-3 {summary['best3_accuracy']:.2f}%), training {summary['train_seconds']:.1f}s "
        f"over {summary['epochs']} epochs, {summary['samples_skipped']} samples skipped")
    console.result(f"run folder: {summary['run_dir']}")


@app.command()
def compare(
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model name(s), comma-separated.")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", "-d", help="Dataset name(s), comma-separated.")] = None,
    seeds: Annotated[Optional[str], typer.Option(help="Seeds, e.g. 0,1,2. (default 0)")] = None,
    policies: Annotated[Optional[str], typer.Option(help="Any of regular,fine,random. (default all three)")] = None,
    epochs: EpochsOpt = None, batch_size: BatchOpt = None, lr: LrOpt = None,
    milestones: MilestonesOpt = None, subset: SubsetOpt = None, test_subset: TestSubsetOpt = None,
    data_dir: DataDirOpt = None,
    device: DeviceOpt = None, compile: CompileOpt = None,
    out: Annotated[Optional[str], typer.Option(help="Folder for the run folders. (default results/runs/compare)")] = None,
    config: ConfigOpt = None, window: WindowOpt = None, start: StartOpt = None,
    attenuation: AttenOpt = None, block: BlockOpt = None, count: CountOpt = None,
    prune_fraction: FracOpt = None, tolerance: TolOpt = None, as_json: JsonOpt = False,
) -> None:
    """Train regular, fine-pruned and random-control runs with identical seeds and compare them.

    Runs already complete in --out are reused, so an interrupted compare continues."""
    from .compare import run_matrix
    from .runs import load_runs
    from .tables import summary_rows
    from .views import show_compare

    overrides = {
        "compare.models": _names(model), "compare.datasets": _names(dataset),
        "compare.seeds": parse_int_list(seeds, "--seeds"), "compare.policies": _names(policies),
        "compare.out": out, "data.data_dir": data_dir, "data.subset": subset,
        "data.test_subset": test_subset,
        "train.batch_size": batch_size, "train.lr": lr,
        "train.milestones": parse_int_list(milestones, "--milestones"),
        "run.device": device, "run.compile": compile,
        **_schedule_overrides(epochs, window, start, attenuation, block, count, prune_fraction, tolerance),
    }
    cfg = build_config(config, overrides)
    dirs = run_matrix(cfg, show_progress=not as_json, command=_invocation())
    runs, _ = load_runs(dirs)
    rows = summary_rows(runs)
    if as_json:
        console.print_json(rows)
        return
    show_compare(rows)
    console.result(f"run folders: {cfg.compare.out}  (tables and plots: fineprune report {cfg.compare.out})")


@app.command()
def report(
    run_dirs: Annotated[Optional[list[Path]], typer.Argument(help="Run folders, or folders holding them. (default results/runs)")] = None,
    out: Annotated[Path, typer.Option(help="Where the tables, plots and index.md go.")] = Path("results/report"),
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the PNG plots (needs matplotlib).")] = True,
    notes: Annotated[Optional[Path], typer.Option(help="Markdown file put at the top of index.md (e.g. how the runs were made).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the paper's Tables 1 and 2 (CSV + Markdown), plots and an index.md from run folders."""
    from .report import write_report
    from .views import show_report

    text = ""
    if notes is not None:
        try:
            text = notes.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read --notes {notes}: {getattr(exc, 'strerror', None) or exc}") from None
    rep = write_report(run_dirs or [Path("results/runs")], out, with_plots=plots, notes=text)
    if as_json:
        console.print_json({
            "out": str(rep.out), "runs": [str(r.path) for r in rep.runs],
            "problems": [{"path": str(p.path), "status": p.status, "reason": p.reason} for p in rep.problems],
            "files": [str(f) for f in rep.files]})
        return
    show_report(rep)


@app.command()
def scale(
    model: ModelOpt = None, dataset: DatasetOpt = None,
    nproc: Annotated[str, typer.Option(help="Worker counts to compare, e.g. 1,2,4 (async/mixed add a server process).")] = "1,2",
    dist_mode: Annotated[str, typer.Option(help="Distributed modes to compare: sync (DDP), async, mixed (parameter server).")] = "sync",
    epochs: EpochsOpt = None, batch_size: BatchOpt = None, lr: LrOpt = None,
    milestones: MilestonesOpt = None, subset: SubsetOpt = None, test_subset: TestSubsetOpt = None,
    data_dir: DataDirOpt = None, device: DeviceOpt = None, config: ConfigOpt = None,
    prune: Annotated[Optional[bool], typer.Option("--prune/--no-prune", help="Fine-pruning on in every configuration.")] = None,
    target_loss: Annotated[Optional[float], typer.Option(help="Training loss to time (default: the highest final loss of all configurations).")] = None,
    out: Annotated[Path, typer.Option(help="Folder for scale.csv, scale.md and the run folders.")] = Path("results/scale"),
    as_json: JsonOpt = False,
) -> None:
    """Train the same model on 1, 2, 4 ... processes: throughput, speedup, efficiency, accuracy."""
    from .scale import run_scale, write_tables
    from .views import show_rows

    overrides = {
        "model.name": model, "data.dataset": dataset, "data.data_dir": data_dir, "data.subset": subset,
        "data.test_subset": test_subset, "train.epochs": epochs, "train.batch_size": batch_size,
        "train.lr": lr, "train.milestones": parse_int_list(milestones, "--milestones"),
        "run.device": device, "prune.enabled": prune}
    cfg = build_config(config, overrides)
    rows = run_scale(cfg, parse_int_list(nproc, "--nproc") or [], _names(dist_mode) or [], out, target_loss)
    path = write_tables(rows, out, _invocation())
    if as_json:
        console.print_json(rows)
        return
    show_rows(rows, "Scaling (one thread per process)")
    console.result(f"tables: {path} and {path.with_suffix('.csv')}")


@app.command()
def estimate(
    epochs: EpochsOpt = None, window: WindowOpt = None, start: StartOpt = None,
    attenuation: AttenOpt = None, block: BlockOpt = None, count: CountOpt = None,
    prune_fraction: FracOpt = None,
    epoch_seconds: Annotated[Optional[float], typer.Option(help="Seconds per full training epoch.")] = None,
    run: Annotated[Optional[Path], typer.Option(help="Run folder: take its schedule, measured epoch time and overhead.")] = None,
    config: ConfigOpt = None, as_json: JsonOpt = False,
) -> None:
    """Predict the pruning epochs and time saved before training (Section 4.4)."""
    from .estimate import estimate as predict, times_from_run
    from .views import show_estimate

    if epoch_seconds is not None and run is not None:
        raise ConfigError("give --epoch-seconds or --run, not both")
    if epoch_seconds is not None and not epoch_seconds > 0:
        raise ConfigError(f"--epoch-seconds must be positive, got {epoch_seconds}")
    base = Config()
    if run is not None:
        saved = load_yaml(run / "config.yaml")
        apply_mapping(base, {k: saved[k] for k in ("train", "prune") if k in saved}, f"{run}/config.yaml")
    cfg = build_config(config, _schedule_overrides(
        epochs, window, start, attenuation, block, count, prune_fraction), base)
    schedule = cfg.prune.schedule()  # validates the schedule flags
    check_epochs(cfg.train.epochs)
    if not 0 <= cfg.prune.prune_fraction < 1:
        raise ConfigError(f"--prune-fraction must be in [0, 1), got {cfg.prune.prune_fraction}")
    overhead = 0.0
    if run is not None:
        epoch_seconds, overhead = times_from_run(run)
    est = predict(schedule, cfg.train.epochs, cfg.prune.prune_fraction, epoch_seconds, overhead)
    if as_json:
        console.print_json(est.to_dict())
    else:
        show_estimate(est, schedule)


@app.command("models")
def list_models() -> None:
    """List the model zoo."""
    import models

    for name in models.list_models():
        console.result(name)


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def _invocation() -> str:
    return shlex.join(["fineprune", *sys.argv[1:]])


def main() -> None:
    app()

"""The `fineprune` command line: parse flags into one Config and call a plain function."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from . import console
from .config import Config, apply_mapping, build_config, load_yaml, parse_int_list
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def _schedule_overrides(epochs, window, start, attenuation, block, count, prune_fraction,
                        tolerance=None) -> dict[str, Any]:
    return {"train.epochs": epochs, "prune.window": window, "prune.start": start,
            "prune.attenuation": attenuation, "prune.block": block, "prune.count": count,
            "prune.prune_fraction": prune_fraction, "prune.tolerance": tolerance}


@app.command()
def train(
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model name (see `fineprune models`).")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", "-d", help="fashion-mnist, cifar10, cifar100, folder or synthetic.")] = None,
    epochs: EpochsOpt = None,
    batch_size: Annotated[Optional[int], typer.Option(help="[default: 128]")] = None,
    lr: Annotated[Optional[float], typer.Option(help="Initial learning rate. (default 0.1)")] = None,
    milestones: Annotated[Optional[str], typer.Option(help="Epochs where lr is multiplied by gamma (0.2), e.g. 60,120,160.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="[default: 0]")] = None,
    subset: Annotated[Optional[int], typer.Option(help="Train on a fixed, seeded, class-balanced subset of N samples.")] = None,
    data_dir: Annotated[Optional[str], typer.Option(help="Dataset folder (cifar10/100, folder, fashion-mnist elsewhere than Debian's).")] = None,
    download: Annotated[Optional[bool], typer.Option("--download", help="Fetch cifar10/100 or fashion-mnist into --data-dir (needs internet).")] = None,
    widen: Annotated[Optional[int], typer.Option(help="WRN widen factor k. (default 8)")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda or cuda:N. (default auto)")] = None,
    compile: Annotated[Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile the model.")] = None,
    out: Annotated[Optional[str], typer.Option(help="Run folder. (default results/runs/<time>-<model>-<dataset>)")] = None,
    config: ConfigOpt = None,
    prune: Annotated[Optional[bool], typer.Option("--prune/--no-prune", help="Turn data fine-pruning on.")] = None,
    policy: Annotated[Optional[str], typer.Option(help="fine (DroppingCount) or random (equal-budget control).")] = None,
    window: WindowOpt = None, start: StartOpt = None, attenuation: AttenOpt = None,
    block: BlockOpt = None, count: CountOpt = None, prune_fraction: FracOpt = None,
    tolerance: TolOpt = None, as_json: JsonOpt = False,
) -> None:
    """Train a model and write a run folder (config.yaml, metrics.csv, summary.json)."""
    from .runner import train as run_training

    overrides = {
        "model.name": model, "model.widen": widen, "data.dataset": dataset, "data.data_dir": data_dir,
        "data.download": download, "data.subset": subset, "train.batch_size": batch_size,
        "train.lr": lr, "train.milestones": parse_int_list(milestones, "--milestones"),
        "run.seed": seed, "run.device": device, "run.compile": compile, "run.out": out,
        "prune.enabled": prune, "prune.policy": policy,
        **_schedule_overrides(epochs, window, start, attenuation, block, count, prune_fraction, tolerance),
    }
    summary = run_training(build_config(config, overrides), show_progress=not as_json)
    if as_json:
        console.print_json(summary)
        return
    console.result(
        f"{summary['model']} on {summary['dataset']}: test accuracy {summary['final_accuracy']:.2f}% "
        f"(best-3 {summary['best3_accuracy']:.2f}%), training {summary['train_seconds']:.1f}s "
        f"over {summary['epochs']} epochs, {summary['samples_skipped']} samples skipped")
    console.result(f"run folder: {summary['run_dir']}")


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
    if cfg.train.epochs < 1:
        raise ConfigError(f"--epochs must be a positive integer, got {cfg.train.epochs}")
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


def main() -> None:
    app()

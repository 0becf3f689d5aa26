"""The trainer axis (drivers/trainers/): fineprune's trainer and the user's script as two
implementations of one contract, chosen from the config in one place."""

import ast
from pathlib import Path

import pytest

from conftest import tiny_config
from fineprune_cli.drivers import dryrun
from fineprune_cli.drivers.compare import CompareConfig, plan
from fineprune_cli.drivers.trainers import contract
from fineprune_cli.drivers.trainers.registry import TRAINERS, trainer_for
from fineprune_cli.errors import ConfigError

PACKAGE = Path(__file__).resolve().parents[1] / "fineprune_cli"
# where the script's command itself is used: the one read of which trainer, the script
# trainer's own modules (which run the command) and the library side that sets it
OWNERS = {
    "engine/setup/scriptconfig.py",
    "drivers/trainers/kinds/script.py",
    "drivers/trainers/scriptjob.py",
    "harness/job.py",
}


def test_which_trainer_is_asked_in_one_place():
    """`cfg.script.command` was asked in 6 functions across 5 files (issue 51); now only the
    modules that own the script read it."""
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "command":
                if isinstance(node.value, ast.Attribute) and node.value.attr == "script":
                    readers.add(str(path.relative_to(PACKAGE)))
    assert readers and readers <= OWNERS, sorted(readers - OWNERS)


def test_every_trainer_keeps_the_contract_and_has_its_dry_run():
    methods = {n for n in vars(contract.Trainer) if not n.startswith("_")} - {"name"}
    assert methods >= {"names", "refuse", "data_identity", "recorded_data", "schedule_check", "train"}
    for name, trainer in TRAINERS.items():
        assert trainer.name == name and all(callable(getattr(trainer, m)) for m in methods), name
    assert set(dryrun.DRY_PLANS) == set(TRAINERS)


@pytest.mark.parametrize(
    "settings, trainer, names",
    [
        ({}, "builtin", ("lenet", "synthetic")),
        (
            {"script.command": "python my_train.py --seed {seed}", "model.name": "", "data.dataset": ""},
            "script",
            ("my_train", "data"),
        ),
    ],
)
def test_the_config_chooses_the_trainer_and_it_names_the_runs(settings, trainer, names):
    cfg = tiny_config(**settings)
    assert trainer_for(cfg).name == trainer
    jobs = plan(cfg, CompareConfig(policies=["regular"], seeds=[0]))
    assert (jobs[0].model, jobs[0].dataset) == names


def test_a_trainer_added_by_a_test_is_chosen_by_its_own_answer(monkeypatch):
    """The choice asks each trainer whether a config is its own (a registry, not a two-way
    switch on the script): a third trainer that takes a config gets it; others stay as they were."""

    class Notebook:
        name = "notebook"
        help = "a test's trainer: takes configs whose model is named 'notebook'"

        def takes(self, cfg):
            return cfg.model.name == "notebook"

    monkeypatch.setitem(TRAINERS, "notebook", Notebook())
    assert trainer_for(tiny_config(**{"model.name": "notebook"})).name == "notebook"
    assert trainer_for(tiny_config()).name == "builtin"
    assert trainer_for(tiny_config(**{"script.command": "python t.py"})).name == "script"


def test_the_script_trainer_refuses_two_models_and_the_builtin_does_not():
    cfg = tiny_config(**{"script.command": "python t.py"})
    with pytest.raises(ConfigError, match="one model on one dataset"):
        TRAINERS["script"].names(cfg, ["a", "b"], ["data"])
    assert TRAINERS["builtin"].names(cfg, ["a", "b"], ["data"]) == (["a", "b"], ["data"])


def test_only_the_script_trainer_checks_the_schedule_and_reads_its_data_from_the_run():
    jobs = plan(tiny_config(), CompareConfig(policies=["regular"], seeds=[0]))
    assert TRAINERS["builtin"].schedule_check(jobs, "out") is None
    assert TRAINERS["script"].schedule_check(jobs, "out") is not None
    recorded = {"train": "abc"}
    assert TRAINERS["script"].recorded_data(tiny_config(), {"train": "other"}, recorded) is recorded
    assert TRAINERS["builtin"].recorded_data(tiny_config(), {"train": "now"}, recorded) == {"train": "now"}


def test_the_matrix_goes_on_past_any_trainers_failed_run_and_knows_no_trainers_own_module(tmp_path, monkeypatch):
    """A run that fails as the contract's `RunFailed` says (any trainer's, not only the script's
    exception) is named and the others still train; the matrix then fails naming the count. It
    imports the trainers' contract and registry, never one trainer's own module."""
    from fineprune_cli.drivers import matrix
    from fineprune_cli.drivers.parallel import RunsFailed

    trained = []

    def train_job(job_cfg, state, command, bar):
        trained.append(job_cfg.run.seed)
        if job_cfg.run.seed == 0:
            raise contract.RunFailed("seed 0: this trainer's run failed")

    monkeypatch.setattr(matrix, "train_job", train_job)
    cfg = tiny_config(tmp_path / "out")
    c = CompareConfig(policies=["regular"], seeds=[0, 1], out=str(tmp_path / "out"))
    with pytest.raises(RunsFailed, match="1 of 2"):
        matrix.run_matrix(cfg, c, show_progress=False)
    assert trained == [0, 1]
    imported = {
        node.module
        for node in ast.walk(ast.parse(Path(matrix.__file__).read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainers")
    }
    assert imported == {"trainers.contract", "trainers.registry"}

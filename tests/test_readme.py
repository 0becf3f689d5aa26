"""The README's library examples run as written (on toy data)."""

import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(section: str) -> list[str]:
    text = README.read_text()
    start = text.index(f"## {section}")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


@pytest.mark.parametrize("index", [0, 1])
def test_own_loop_examples_train(index):
    block = _blocks("Pruning in your own loop")[index]
    torch.manual_seed(0)
    x, y = torch.randn(300, 8), torch.randint(0, 3, (300,))
    model = torch.nn.Linear(8, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scope = {"x": x, "y": y, "model": model, "opt": opt, "epochs": 8}
    before = torch.nn.functional.cross_entropy(model(x), y).item()
    exec(block, scope)
    after = torch.nn.functional.cross_entropy(model(x), y).item()
    assert after < before
    trained = scope.get("plan") or scope.get("keep")
    assert trained is not None
    if "pruner" in scope:  # window 60, start 30: 8 epochs never prune
        assert scope["keep"].numel() == 300
    else:                  # infobatch prunes below-mean samples up to 0.875 x 8 = epoch 7
        assert scope["plan"].samples == 300 and scope["policy"].plan(5).samples < 300


def _toy_scope():
    torch.manual_seed(0)
    x, y = torch.randn(300, 8), torch.randint(0, 3, (300,))
    return {"x": x, "y": y, "model": torch.nn.Linear(8, 3), "epochs": 8}


def _fit_loss(scope):
    return torch.nn.functional.cross_entropy(scope["model"](scope["x"]), scope["y"]).item()


def test_pipeline_sampler_example_trains_and_prunes():
    """The DataLoader example: it trains, reaches the last epoch, and the policy counted."""
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    before = _fit_loss(scope)
    exec(_blocks("Pruning in any pipeline")[0], scope)
    assert _fit_loss(scope) < before
    sampler = scope["sampler"]
    assert sampler.epoch == scope["epochs"] - 1
    sampler.sync()
    assert int(scope["policy"].scores.sum()) > 0


def test_pipeline_lightning_example_trains():
    """The Lightning example, run after the sampler example as the README reads."""
    pytest.importorskip("lightning", reason="the lightning extra is not installed")
    import warnings
    scope = _toy_scope()
    scope["opt"] = torch.optim.SGD(scope["model"].parameters(), lr=0.1)
    first, second = _blocks("Pruning in any pipeline")[:2]
    exec(first, scope)
    scope["model"] = torch.nn.Linear(8, 3)
    before = _fit_loss(scope)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging intervals
        exec(second, scope)
    assert _fit_loss(scope) < before
    sampler = scope["sampler"]
    assert sampler.epoch == scope["epochs"] - 1 and int(sampler.policy.scores.sum()) > 0


def _readme_commands() -> list[list[str]]:
    """Every `fineprune ...` line of the README's shell blocks, continuation lines joined."""
    import shlex

    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("fineprune "):
                commands.append(shlex.split(line)[1:])
    return commands


def test_every_readme_command_parses():
    """Each flag the README shows exists on its command (nothing runs)."""
    import typer

    from fineprune_cli.cli import app

    group = typer.main.get_command(app)
    commands = _readme_commands()
    assert len(commands) >= 10
    for argv in commands:
        command = group.commands[argv[0]]
        args = [a.replace("<run>", "x") for a in argv[1:]]
        try:
            command.make_context(argv[0], args)
        except typer.TyperException as exc:
            pytest.fail(f"README: fineprune {' '.join(argv)}: {exc.format_message()}")

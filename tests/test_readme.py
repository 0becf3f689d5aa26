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

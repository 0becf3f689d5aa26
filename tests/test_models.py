"""Model zoo: shapes, gradients, parameter counts and registry errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from fineprune_cli import models
from fineprune_cli.models import count_parameters, create, list_models
from fineprune_cli.models.wrn import wide_resnet

EXPECTED_ORDER = ["lenet", "vgg13", "vgg16", "vgg19", "resnet18", "resnet34", "resnet50", "wrn10", "wrn16", "wrn22"]

# 3 input channels, 10 classes; values of the standard CIFAR implementations.
KNOWN_COUNTS = {
    "lenet": 62_006,
    "vgg13": 9_416_010,
    "vgg16": 14_728_266,
    "vgg19": 20_040_522,
    "resnet18": 11_173_962,
    "resnet34": 21_282_122,
    "resnet50": 23_520_842,
}


def _first_weight(model: nn.Module) -> torch.Tensor:
    return next(m.weight for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear)))


def _check_forward_backward(model: nn.Module, x: torch.Tensor, num_classes: int) -> None:
    model.train()
    out = model(x)
    assert out.shape == (x.shape[0], num_classes)
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    grad = _first_weight(model).grad
    assert grad is not None
    assert torch.isfinite(grad).all()
    assert grad.abs().sum() > 0


def test_registry_order():
    assert list_models() == EXPECTED_ORDER


# the deepest models take seconds for one step on a CPU: `slow`, out of the inner loop
BIG = {"resnet34", "resnet50", "wrn22"}
MODELS = [pytest.param(n, marks=pytest.mark.slow) if n in BIG else n for n in list_models()]


# every size (Fashion-MNIST's 28, CIFAR's 32) with every channel count, each memory format twice:
# four shapes, not eight (the deep models take seconds a step on a CPU)
SHAPES = [(28, 1, False), (32, 3, False), (28, 3, True), (32, 1, True)]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("size, in_channels, channels_last", SHAPES)
def test_forward_backward(name, size, in_channels, channels_last):
    torch.manual_seed(0)
    num_classes = 7 if in_channels == 1 else 10  # also exercise a non-default head
    model = create(name, in_channels=in_channels, num_classes=num_classes)
    x = torch.randn(2, in_channels, size, size)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    _check_forward_backward(model, x, num_classes)


@pytest.mark.parametrize("name", list(KNOWN_COUNTS))
def test_known_parameter_counts(name):
    assert count_parameters(create(name)) == KNOWN_COUNTS[name]


def test_wrn_28_10_parameter_count():
    assert count_parameters(wide_resnet(28, 10)) == 36_479_194


def test_wrn_widen_override():
    default = create("wrn16")
    narrow = create("wrn16", widen=4)
    assert count_parameters(narrow) == count_parameters(wide_resnet(16, 4))
    assert count_parameters(narrow) < count_parameters(default)
    assert count_parameters(default) == count_parameters(wide_resnet(16, 8))
    _check_forward_backward(narrow, torch.randn(2, 3, 32, 32), 10)


def test_wrn_dropout_runs():
    model = wide_resnet(10, 1, in_channels=1, num_classes=10, dropout=0.3)
    _check_forward_backward(model, torch.randn(2, 1, 28, 28), 10)


def test_count_parameters_small():
    assert count_parameters(nn.Linear(3, 2)) == 8


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError) as exc:
        create("alexnet")
    msg = str(exc.value)
    assert "'alexnet'" in msg
    assert "\n" not in msg
    assert msg.endswith(", ".join(EXPECTED_ORDER))


@pytest.mark.parametrize("depth", [12, 27, 4, 0])
def test_wrn_bad_depth(depth):
    with pytest.raises(ValueError, match="depth"):
        wide_resnet(depth, 2)


def test_register_duplicate_rejected():
    with pytest.raises(ValueError):
        models.register("lenet")(lambda **kw: nn.Identity())
    assert list_models() == EXPECTED_ORDER


def test_lenet_takes_images_larger_than_32():
    """--image-size 64 with LeNet: the 13x13 feature map is pooled to the classifier's 5x5."""
    net = create("lenet", 3, 7)
    assert net(torch.zeros(2, 3, 64, 64)).shape == (2, 7) and net(torch.zeros(2, 3, 40, 48)).shape == (2, 7)


FACTORY = """
import torch.nn as nn


def build(in_channels, num_classes, width=8):
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 32 * 32, width), nn.ReLU(), nn.Linear(width, num_classes))


def wide():
    return build(3, 10, width=16)


def not_a_model():
    return 3
"""


def test_your_own_model_by_its_factory_is_trained_and_recorded_by_its_shapes(tmp_path, monkeypatch):
    from conftest import invoke, summary_of
    from fineprune_cli.analysis.group.groups import settings
    from fineprune_cli.analysis.read.runs import Run
    from fineprune_cli.engine.records.record import read_summary

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mynet.py").write_text(FACTORY)
    common = ["--dataset", "synthetic", "--subset", "64", "--test-subset", "50", "--epochs", "1", "--device", "cpu"]
    for name, out in (("mynet:build", "a"), ("mynet:wide", "b")):
        done = invoke(["train", "--model", name, *common, "--out", out])
        assert done.exit_code == 0, done.output
    a, b = summary_of(tmp_path / "a"), summary_of(tmp_path / "b")
    assert a["model"] == "mynet:build" and a["model_shapes"] != b["model_shapes"]  # width 8 vs 16
    run = Run(tmp_path / "a", read_summary(tmp_path / "a"), {"model": {"name": "mynet:build"}}, [])
    assert settings(run)["model.shapes"] == a["model_shapes"]  # so one name with other shapes never pairs


def test_a_model_factory_that_cannot_be_used_is_one_line(tmp_path, monkeypatch):
    """...and writes nothing: not even the __pycache__ Python writes beside a module it imports
    (unless PYTHONDONTWRITEBYTECODE, which hid it: set where the suite first ran)."""
    import sys

    from conftest import invoke

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delitem(sys.modules, "mynet", raising=False)  # imported here, not found loaded
    (tmp_path / "mynet.py").write_text(FACTORY)
    common = ["--dataset", "synthetic", "--subset", "64", "--epochs", "1", "--device", "cpu"]
    for name, said in [
        ("nomodule:build", "names no factory that loads (ModuleNotFoundError"),
        ("mynet:missing", "names no factory that loads (AttributeError"),
        ("os:sep", "names a factory that is not callable"),
        ("mynet:", "is not package.module:factory"),
        ("mynet:not_a_model", "returned a int, not a torch.nn.Module"),
    ]:
        done = invoke(["train", "--model", name, *common, "--out", "r"])
        assert done.exit_code == 2 and said in done.output and "Traceback" not in done.output, (name, done.output)
    assert [p.name for p in tmp_path.iterdir()] == ["mynet.py"]
    assert sys.dont_write_bytecode is False  # as it found it


def test_a_factory_is_called_with_what_it_names_and_nothing_else():
    """factory(in_channels, num_classes) by keyword, by position where it takes them only so, or
    with none; a factory needing anything more is refused before it is called."""
    from fineprune_cli.errors import ConfigError
    from fineprune_cli.models.registry import arguments

    def by_position(in_channels, num_classes, /):
        pass

    def some(num_classes, width=8, **extra):
        pass

    def needs(in_channels, depth, *rest):
        pass

    assert arguments(by_position, 3, 10) == ([3, 10], {})
    assert arguments(some, 3, 10) == ([], {"num_classes": 10})
    assert arguments(lambda: None, 3, 10) == ([], {})
    with pytest.raises(ConfigError, match=r"needs depth, which it cannot be given: it is called as factory\("):
        arguments(needs, 3, 10)


def test_the_check_of_a_factorys_outputs_leaves_the_model_and_the_rng_as_they_were():
    """One forward before training: no running statistics moved, no random number drawn, the
    model's mode kept; a wrong shape or a failing forward is one line."""
    from fineprune_cli.errors import ConfigError
    from fineprune_cli.models.registry import check_outputs

    class Noisy(nn.Module):
        def __init__(self, classes):
            super().__init__()
            self.bn, self.fc = nn.BatchNorm2d(3), nn.Linear(3, classes)

        def forward(self, x):
            return self.fc(self.bn(x + torch.rand_like(x)).mean(dim=(2, 3)))

    model, images = Noisy(10), torch.randn(2, 3, 8, 8) * 5
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    check_outputs(model, "m:noisy", images, 10)
    assert torch.equal(torch.rand(1), expected) and model.training
    assert torch.equal(model.bn.running_mean, torch.zeros(3)) and int(model.bn.num_batches_tracked) == 0
    with pytest.raises(ConfigError, match=r"gives \(2, 7\) for a batch of 2 images; the data has 10 classes"):
        check_outputs(Noisy(7), "m:seven", images, 10)
    with pytest.raises(ConfigError, match=r"raised RuntimeError on a batch of 2 images of 4 x 8 x 8"):
        check_outputs(Noisy(10), "m:noisy", torch.zeros(2, 4, 8, 8), 10)

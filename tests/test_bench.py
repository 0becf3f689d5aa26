"""experiments/bench/bench_trainer.py's bare loop on data stored as the CUDA path stores it (bf16):
an H200 found that the old loop fed those tensors to an fp32 model; this reproduces it on a CPU by
construction and checks the loop a GPU user writes (bf16 autocast, fp32 weights) trains on them."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

BENCH = Path(__file__).resolve().parents[1] / "experiments" / "bench"


def _script(name):
    sys.path.insert(0, str(BENCH))  # the script imports its folder's `common`, as when run
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def bench_trainer():
    return _script("bench_trainer")


@pytest.fixture
def compiled(monkeypatch):
    """torch.compile replaced by a recorder that returns the module as it is: what was compiled."""
    seen = []

    def record(module, **kwargs):
        seen.append((type(module).__name__, kwargs.get("mode")))
        return module

    monkeypatch.setattr(torch, "compile", record)
    return seen


def _bf16_data(n=64):
    """CIFAR-shaped inputs in bf16, as `DeviceData.build` keeps them on CUDA."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, 32, 32, generator=g).to(torch.bfloat16), torch.randint(0, 10, (n,), generator=g)


def _old_bare_epoch(model, opt, x, y, batch_size, gen):
    """The loop as it was at d26b633: no autocast."""
    for idx in torch.randperm(len(y), generator=gen).split(batch_size):
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def test_the_old_bare_loop_fails_on_bf16_data_and_the_new_one_trains(bench_trainer):
    x, y = _bf16_data()
    torch.manual_seed(0)
    model = bench_trainer.bare_model("lenet", 3, 10, torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with pytest.raises(RuntimeError, match="should be the same"):
        _old_bare_epoch(model, opt, x, y, 16, torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in model.parameters()]
    bench_trainer.bare_epoch(model, opt, x, y, 16, torch.Generator().manual_seed(0))
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay fp32
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # and they trained


def test_the_bare_model_stays_nchw_on_a_cpu(bench_trainer):
    """channels_last is for CUDA only: a bare model converted on a CPU too would fail here."""
    cpu = bench_trainer.bare_model("resnet18", 3, 10, torch.device("cpu"))
    conv = next(m for m in cpu.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous()  # NCHW, as the trainer keeps it on a CPU
    assert not conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_on_a_gpu_the_bench_compiles_as_training_does():
    """An H100 ran the bench eager while `train` compiles there (ResNet-18 at 4% of the peak):
    on CUDA the default is compiled, and a table made otherwise is named so."""
    bench = _script("bench")
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert bench.compiles("auto", cuda) and not bench.compiles("auto", cpu)
    assert bench.compiles("on", cpu) and not bench.compiles("off", cuda)
    assert (bench.variant(True, cuda), bench.variant(False, cuda)) == ("", "eager")
    assert (bench.variant(False, cpu), bench.variant(True, cpu)) == ("", "compiled")


def test_compiled_bench_compiles_ours_and_the_bare_loop(bench_trainer, compiled):
    row = bench_trainer.bench("lenet", "synthetic", 1, 256, torch.device("cpu"), compile=True)
    assert [name for name, _ in compiled] == ["LeNet", "LeNet"]  # the trainer's model, then the bare one
    assert row["compiled"] is True


def test_compiled_bench_times_compiled_pruned_epochs(compiled):
    ratio = _script("bench_prune").run("lenet", 0.5, 3, 256, "cpu", compile=True)
    assert compiled and ratio["pruned_over_full"] > 0


def test_a_pruned_run_that_diverges_raises_as_lenet_did_in_bf16_on_an_h200():
    """The failure, rebuilt on a CPU by construction: an lr that sends the loss to NaN stops the
    run with Diverged (an H200 met it in bf16 at the recipe's lr; the bench now times at a lower one)."""
    from fineprune_cli.engine.training.checkpoint import Diverged

    prune = _script("bench_prune")
    with pytest.raises(Diverged):
        prune.run("lenet", 0.5, 3, 256, "cpu", lr=1e6)
    assert prune.LR < 0.1  # below the recipe's, which diverged


def test_a_model_that_fails_leaves_the_others_measured_and_is_named(monkeypatch, tmp_path):
    """At 7b85df8 one diverged LeNet run ended the bench before any model was measured."""
    from fineprune_cli.engine.training.checkpoint import Diverged

    bench = _script("bench")

    def model(name, *args):
        if name == "lenet":
            raise Diverged("training diverged at epoch 3: train loss nan")
        return {"model": name, "ours_img_s": 1}

    monkeypatch.setattr(bench, "bench_model", model)
    monkeypatch.setattr(bench, "peak_tflops", lambda device, size: (1.0, "test"))
    argv = ["bench.py", "--models", "lenet,vgg13", "--device", "cpu", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 1
    (table,) = tmp_path.glob("*.md")
    text = table.read_text()
    assert "| vgg13 |" in text and "not measured: lenet (Diverged: training diverged at epoch 3" in text

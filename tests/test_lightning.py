"""The Lightning callback (issue 14): a tiny model trains 2 epochs on CPU with pruning, and its
policy ends where a hand-written loop over the same batches ends; under Lightning's DDP
strategy our sampler stays and each rank trains its own shard."""

import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from conftest import free_port, spawn_ranks
from fineprune_cli import DistributedPruningSampler, IndexedDataset, PruneConfig, PruningSampler, create_policy

L = pytest.importorskip("lightning", reason="the lightning extra is not installed: pip install 'fineprune[lightning]'")
from fineprune_cli.integrations.lightning import PruningCallback  # noqa: E402

N, BATCH, EPOCHS, LR = 96, 16, 2, 0.3
# fine prunes both epochs; infobatch prunes epoch 2 (anneal 1: no full-data epochs at the end)
CFG = PruneConfig(window=2, start=1, block=1, count=1, prune_fraction=0.25, anneal=1.0)
UCB = PruneConfig(prune_fraction=0.25, anneal=0.5)  # epoch 1 pruned, epoch 2 longer (all samples)
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated"),  # Lightning's own
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no"),
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]  # 1 core


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 5, generator=g)
    return x, (x[:, 0] - x[:, 1] > 0).long()


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(5, 2)


def _policy(name):
    cfg = UCB if name == "ucb" else CFG
    return create_policy(name, N, cfg, seed=2, epochs=EPOCHS)


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = _model()
        self.batches = []  # the sample indices of every step, in order
        self.validations = 0

    def training_step(self, batch, batch_idx):
        idx, x, y = batch
        self.batches.append(idx.clone())
        return F.cross_entropy(self.net(x), y, reduction="none")  # per-sample losses

    def validation_step(self, batch, batch_idx):
        self.validations += batch_idx == 0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


def _trainer(**kwargs):
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*log_every_n_steps.*")
    return L.Trainer(
        max_epochs=kwargs.pop("max_epochs", EPOCHS),
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **kwargs,
    )


def _hand_loop(name):
    """The protocol loop written out: the plan, the sampler's order (randperm seeded by the
    0-based epoch), the plan's weighted loss, observe, sync."""
    x, y = _data()
    model, policy = _model(), _policy(name)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    batches = []
    for epoch in range(1, EPOCHS + 1):
        plan = policy.plan(epoch)
        order = plan.indices[torch.randperm(plan.samples, generator=torch.Generator().manual_seed(epoch - 1))]
        for idx in order.split(BATCH):
            losses = F.cross_entropy(model(x[idx]), y[idx], reduction="none")
            opt.zero_grad()
            plan.loss(idx, losses).backward()
            opt.step()
            policy.observe(idx, losses.detach())
            batches.append(idx)
        policy.sync()
    return policy, model, batches


@pytest.mark.parametrize("name, workers", [("fine", 0), ("infobatch", 0), ("ucb", 0), ("ucb", 2)])
def test_callback_trains_as_the_hand_written_loop(name, workers):
    """Same batches, same weights, same scores: a callback that observed the wrong indices,
    backpropagated the plain mean of a weighted plan, synced at the wrong edge or let Lightning
    cut a longer epoch at the first epoch's batch count would differ. Validation still runs
    once per epoch although the epochs' batch counts differ. With persistent workers Lightning
    draws the first epoch's indices before it calls set_epoch(0): the same plans all the same."""
    x, y = _data()
    sampler = PruningSampler(_policy(name))
    module = Tiny()
    loader = DataLoader(
        IndexedDataset(TensorDataset(x, y)),
        batch_size=BATCH,
        sampler=sampler,
        num_workers=workers,
        persistent_workers=workers > 0,
    )
    val = DataLoader(TensorDataset(x, y), batch_size=N)
    _trainer(callbacks=[PruningCallback(sampler)]).fit(module, loader, val)

    policy, model, batches = _hand_loop(name)
    assert len(module.batches) == len(batches) and module.validations == EPOCHS
    assert all(torch.equal(a, b) for a, b in zip(module.batches, batches))
    assert sum(b.numel() for b in batches) < EPOCHS * N  # it pruned
    torch.testing.assert_close(sampler.policy.scores, policy.scores, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(module.net.weight, model.weight)
    assert "training_step" not in vars(module)  # the wrapper is gone after fit


def test_checkpoint_resumes_the_plans(tmp_path):
    """Fit 1 epoch, save, resume to epoch 2 from the checkpoint in a fresh sampler: the policy
    and its second plan (ucb: longer than the first) are those of an uninterrupted fit."""
    x, y = _data()

    def fit(sampler, epochs, **kwargs):
        module = Tiny()
        loader = DataLoader(IndexedDataset(TensorDataset(x, y)), batch_size=BATCH, sampler=sampler)
        trainer = _trainer(callbacks=[PruningCallback(sampler)])
        trainer.fit_loop.max_epochs = epochs
        trainer.fit(module, loader, **kwargs)
        return trainer, module

    whole = PruningSampler(_policy("ucb"))
    _, straight = fit(whole, 2)
    first, _ = fit(PruningSampler(_policy("ucb")), 1)
    first.save_checkpoint(tmp_path / "one.ckpt")
    again = PruningSampler(_policy("ucb"))
    _, resumed = fit(again, 2, ckpt_path=tmp_path / "one.ckpt")
    assert again.epoch == 1
    second = straight.batches[-len(resumed.batches) :]
    assert sum(b.numel() for b in resumed.batches) == N > sum(b.numel() for b in straight.batches) - N
    assert all(torch.equal(a, b) for a, b in zip(resumed.batches, second))
    torch.testing.assert_close(again.policy.scores, whole.policy.scores, rtol=0, atol=0)


def test_a_plain_sampler_under_several_processes_is_refused():
    class FakeTrainer:
        world_size = 2

    with pytest.raises(ValueError, match="DistributedPruningSampler"):
        PruningCallback(PruningSampler(_policy("fine"))).setup(FakeTrainer(), Tiny(), "fit")


def _rank_main(rank, size, init_file, out_dir):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(size), NODE_RANK="0")
    x, y = _data()
    sampler = DistributedPruningSampler(_policy("fine"))
    module = Tiny()
    loader = DataLoader(IndexedDataset(TensorDataset(x, y)), batch_size=BATCH // size, sampler=sampler)
    trainer = _trainer(callbacks=[PruningCallback(sampler)], devices=size, strategy="ddp")
    trainer.fit(module, loader)
    torch.save(
        {
            "kept": trainer.train_dataloader.sampler is sampler,
            "scores": sampler.policy.scores,
            "batches": module.batches,
            "plan": sampler.plan.indices,
            "weight": module.net.weight.detach(),
        },
        os.path.join(out_dir, f"rank{rank}.pt"),
    )


@pytest.mark.slow
def test_ddp_strategy_keeps_our_sampler_and_ranks_agree(tmp_path, monkeypatch):
    """Lightning's DDP strategy (default use_distributed_sampler=True) on 2 CPU processes: the
    loader keeps our sampler (a replaced one would hand each rank a shard of all N samples),
    the last epoch's shards are disjoint halves of the plan, and both ranks end with the
    same scores and weights."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    ranks = spawn_ranks(_rank_main, 2, tmp_path, seconds=180)
    assert all(r["kept"] for r in ranks)
    plan = ranks[0]["plan"]
    steps = -(-plan.numel() // BATCH)
    last = [torch.cat(r["batches"][-steps:]).tolist() for r in ranks]
    assert plan.numel() < N and not set(last[0]) & set(last[1])
    assert sorted(last[0] + last[1]) == sorted(plan.tolist())
    torch.testing.assert_close(ranks[0]["scores"], ranks[1]["scores"], rtol=0, atol=0)
    torch.testing.assert_close(ranks[0]["weight"], ranks[1]["weight"])


@pytest.mark.slow
def test_importing_the_package_does_not_import_lightning():
    """The extra stays optional: the public API, engine and CLI load without it."""
    code = "import sys, fineprune_cli, fineprune_cli.cli; print('lightning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class Scripted(Tiny):
    """Per-sample losses fixed by index and epoch (a zero-weighted model term keeps a gradient):
    samples 0-14 flat, so IES leaves them out from epoch 7; sample 0 steps up in epoch 9."""

    def training_step(self, batch, batch_idx):
        idx, x, y = batch
        flat = torch.where(idx < 15, 1.0, 0.1 * idx.float() + self.current_epoch % 2)
        fixed = flat + ((idx == 0) & (self.current_epoch >= 8)).float() * 5.0
        self.log("seen", float(idx.numel()))  # skipped in the forward-only pass
        return fixed + 0.0 * F.cross_entropy(self.net(x), y, reduction="none")


@pytest.mark.slow  # 12 Lightning epochs
def test_ies_gets_its_forward_only_pass_at_each_epochs_end():
    """The callback ran no forward-only pass: IES's left-out samples kept their last losses and
    never came back. Sample 0 sits out from epoch 7 and returns once its loss moves."""
    x, y = _data()
    policy = create_policy("ies", N, PruneConfig(anneal=1.0), seed=0, epochs=12)
    sampler = PruningSampler(policy)
    loader = DataLoader(IndexedDataset(TensorDataset(x, y)), batch_size=BATCH, sampler=sampler)
    module, plans = Scripted(), []

    class Watch(L.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            plans.append(set(sampler.plan.indices.tolist()))

    trainer = _trainer(max_epochs=12, callbacks=[PruningCallback(sampler), Watch()])
    trainer.fit(module, loader)
    zero_out = [0 not in p for p in plans]
    assert len(plans) == 12 and not any(zero_out[:6]) and zero_out[6] and not all(zero_out[7:]), zero_out
    assert "log" not in vars(module)  # the module's own log again

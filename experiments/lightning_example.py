"""Fine-pruning in a PyTorch Lightning fit: a small MLP on synthetic data, on the CPU, in seconds.

    pip install 'fineprune[lightning]'
    python experiments/lightning_example.py                       # one process, policy fine
    python experiments/lightning_example.py --policy infobatch --epochs 8
    python experiments/lightning_example.py --devices 2           # Lightning's DDP, 2 CPU processes

The LightningModule's training_step returns per-sample losses; PruningCallback makes Lightning
backpropagate the policy's (weighted) mean and feeds the losses to the policy. Each epoch prints
how many samples trained and the validation accuracy.
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
import torch.nn.functional as F
from fineprune import DistributedPruningSampler, IndexedDataset, PruneConfig, create_policy
from fineprune.integrations.lightning import PruningCallback
from torch.utils.data import DataLoader, TensorDataset


def blobs(n: int, seed: int) -> TensorDataset:
    """Four Gaussian classes in 16 dimensions, some overlapping: easy and hard samples both."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 0.5
    y = torch.randint(0, 4, (n,), generator=g)
    return TensorDataset(centres[y] + torch.randn(n, 16, generator=g), y)


class Classifier(L.LightningModule):
    def __init__(self, lr: float = 0.1):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        self.lr = lr

    def training_step(self, batch, batch_idx):
        idx, x, y = batch  # IndexedDataset puts the index first
        return F.cross_entropy(self.net(x), y, reduction="none")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean(), sync_dist=True)

    def on_train_epoch_end(self):
        sampler = self.trainer.train_dataloader.sampler
        if self.trainer.is_global_zero:
            acc = self.trainer.callback_metrics.get("val_acc", torch.tensor(float("nan")))
            print(
                f"epoch {self.current_epoch + 1}: {sampler.plan.samples} of "
                f"{sampler.policy.num_samples} samples trained, val accuracy {100 * acc:.1f}%"
            )

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="fine")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()

    train = blobs(args.samples, seed=1)
    # fine: windows of 3 epochs whose third epoch leaves out the 30% highest DroppingCounts
    cfg = PruneConfig(window=3, start=2, attenuation=1, block=1, count=1, prune_fraction=0.3)
    policy = create_policy(args.policy, len(train), cfg, seed=0, epochs=args.epochs)
    sampler = DistributedPruningSampler(policy)  # one process: the whole plan; DDP: a shard
    loader = DataLoader(IndexedDataset(train), batch_size=64, sampler=sampler)
    val = DataLoader(blobs(1000, seed=2), batch_size=500)

    torch.manual_seed(0)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        callbacks=[PruningCallback(sampler)],
    )
    trainer.fit(Classifier(), loader, val)


if __name__ == "__main__":
    main()

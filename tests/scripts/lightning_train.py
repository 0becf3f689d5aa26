"""A PyTorch Lightning `Trainer` script under `fineprune compare --script`: fineprune's
PruningCallback (docs/howto/lightning.md) plugs the run's sampler into the fit, a callback of the
script's own records each epoch, and the schedule is a linear warm-up held at --warmup-epochs
then a cosine over the rest of --epochs (torch's SequentialLR, stepped by Lightning each epoch).
tests/test_real_scripts.py runs it:

    fineprune compare --script 'python tests/scripts/lightning_train.py --seed {seed} --epochs {epochs}' \
        --epochs 8 --milestones '' --policies regular,fine --shorter 0.1,0.2 --seeds 0,1"""

import argparse
import time

import fineprune
import lightning as L
import torch
import torch.nn.functional as F
from fineprune.integrations.lightning import PruningCallback
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--epochs", type=int, default=8)
ap.add_argument("--warmup-epochs", type=int, default=1)
ap.add_argument("--lr", type=float, default=0.05)
args = ap.parse_args()

g = torch.Generator().manual_seed(1234)  # the data is the same whatever the run's seed
centres = torch.randn(4, 32, generator=g)
labels = torch.randint(0, 4, (1000,), generator=g)
inputs = centres[labels] + 2.0 * torch.randn(1000, 32, generator=g)
x, y, x_test, y_test = inputs[:800], labels[:800], inputs[800:], labels[800:]


class Module(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        idx, xb, yb = batch
        return F.cross_entropy(self.net(xb), yb, reduction="none")  # one loss per sample: the callback's

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=args.lr, momentum=0.9)
        warm = LinearLR(opt, start_factor=0.1, total_iters=args.warmup_epochs)
        cosine = CosineAnnealingLR(opt, T_max=args.epochs - args.warmup_epochs)  # the rest of {epochs}
        return [opt], [SequentialLR(opt, [warm, cosine], milestones=[args.warmup_epochs])]


class Record(L.Callback):
    """run.log() at each epoch's end: the lr it trained at, its training time, the test accuracy."""

    def on_train_epoch_start(self, trainer, module):
        self.lr, self.started, self.losses = trainer.optimizers[0].param_groups[0]["lr"], time.perf_counter(), []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))

    def on_train_epoch_end(self, trainer, module):
        seconds = time.perf_counter() - self.started
        with torch.no_grad():
            accuracy = (module.net(x_test).argmax(1) == y_test).sum().item() * 100 / len(y_test)
        run.log(train_loss=sum(self.losses) / len(self.losses), test_accuracy=accuracy, lr=self.lr,
                train_seconds=seconds)  # fmt: skip


run = fineprune.start(
    num_train=len(y), seed=args.seed, epochs=args.epochs, milestones=[],
    data=fineprune.tensor_identity(x, y, x_test, y_test), recipe={"model": "mlp-64", "lr": args.lr}, classes=4,
    num_test=len(y_test),
)  # fmt: skip
L.seed_everything(args.seed, verbose=False)
module = Module()
sampler = run.sampler()
loader = DataLoader(fineprune.IndexedDataset(TensorDataset(x, y)), batch_size=64, sampler=sampler)
trainer = L.Trainer(
    max_epochs=run.epochs, callbacks=[PruningCallback(sampler), Record()], accelerator="cpu", logger=False,
    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
)  # fmt: skip
trainer.fit(module, loader)
run.finish()

"""A plain PyTorch loop that `fineprune compare --script` can run (docs/howto/own-script.md):
    fineprune compare --script 'python examples/own_script.py --seed {seed} --epochs {epochs} --milestones {milestones}' \
        --epochs 12 --milestones 6,9 --policies regular,fine,random --shorter 0.1 --seeds 0,1,2
On its own (`python examples/own_script.py`) it is a regular run of its flags."""

import argparse

import fineprune
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--epochs", type=int, default=12)
ap.add_argument("--milestones", default="6,9")
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--out", default=None)
args = ap.parse_args()
milestones = [int(m) for m in args.milestones.split(",") if m]

g = torch.Generator().manual_seed(1234)  # the data is the same whatever the run's seed
centres = torch.randn(4, 32, generator=g)
labels = torch.randint(0, 4, (2000,), generator=g)
inputs = centres[labels] + 2.0 * torch.randn(2000, 32, generator=g)
x, y, x_test, y_test = inputs[:1600], labels[:1600], inputs[1600:], labels[1600:]

torch.manual_seed(args.seed)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma=0.2)

run = fineprune.start(
    num_train=len(y), seed=args.seed, epochs=args.epochs, milestones=milestones, out=args.out,
    data=fineprune.tensor_identity(x, y, x_test, y_test), recipe={"model": "mlp-64", "lr": args.lr},
    classes=4, num_test=len(y_test),
)  # fmt: skip
sampler = run.sampler()  # the run's policy: every sample for regular and shorter arms
loader = DataLoader(fineprune.IndexedDataset(TensorDataset(x, y)), batch_size=64, sampler=sampler)
for epoch in range(run.epochs):
    sampler.set_epoch(epoch)
    total = 0.0
    for idx, xb, yb in loader:
        losses = F.cross_entropy(model(xb), yb, reduction="none")
        opt.zero_grad()
        sampler.loss(idx, losses).backward()
        opt.step()
        total += losses.sum().item()
    sampler.refresh(lambda idx: F.cross_entropy(model(x[idx]), y[idx], reduction="none"))  # ies re-scores its left-out
    lr = sched.get_last_lr()[0]
    sched.step()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).sum().item() * 100 / len(y_test)
    run.log(train_loss=total / len(sampler), test_accuracy=accuracy, lr=lr)
run.finish()

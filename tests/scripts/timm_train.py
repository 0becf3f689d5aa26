"""A training script built from timm's own parts, as timm's train.py is: its transforms and loader
(create_loader), model (create_model), optimizer (create_optimizer_v2), scheduler factory
(create_scheduler_v2: warm-up, cosine, cool-down), and its label-smoothing and mixup losses;
harnessed for `fineprune compare --script` as docs/howto/timm.md says. tests/test_real_scripts.py
runs it. Written for the tests: no line of it is timm's train.py.

    fineprune compare --script 'python tests/scripts/timm_train.py --seed {seed} --epochs {epochs}
        --warmup-epochs 2 --cooldown-epochs 1' --epochs 8 --milestones '' --shorter 0.1,0.2 ...

The cool-down is folded into --epochs (the cosine runs epochs - cool-down, then the cool-down);
`--cooldown-as-timm` trains --epochs and then the cool-down, as timm's train.py does, and
`--length` gives the cosine a length of its own instead of --epochs: both are what compare refuses."""

import argparse
import time

import fineprune
import torch
import torch.nn.functional as F
from PIL import Image
from timm import create_model
from timm.data import Mixup, create_loader
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from torch.utils.data import DataLoader, Dataset

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--epochs", type=int, default=8)
ap.add_argument("--warmup-epochs", type=int, default=2)
ap.add_argument("--cooldown-epochs", type=int, default=1)
ap.add_argument("--cooldown-as-timm", action="store_true")
ap.add_argument("--length", type=int, default=0, help="the cosine's own length (0: --epochs)")
ap.add_argument("--mixup", type=float, default=0.2, help="mixup alpha (0: off)")
ap.add_argument("--smoothing", type=float, default=0.1)
ap.add_argument("--lr", type=float, default=3e-3)
ap.add_argument("--batch-size", type=int, default=32)
args = ap.parse_args()


class Squares(Dataset):
    """32x32 RGB images of noise with a square in the colour of its class (red, green, blue or
    white: 4 classes, unchanged by a flip or a crop), as PIL images, as an image folder gives
    them; create_loader sets `transform`."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        self.pixels = (torch.rand(n, 32, 32, 3, generator=g) * 100).to(torch.uint8)
        colours = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=torch.uint8) * 50
        for i, c in enumerate(self.labels.tolist()):
            r, col = torch.randint(4, 16, (2,), generator=g).tolist()
            self.pixels[i, r : r + 12, col : col + 12] += colours[c]
        self.transform = None

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = Image.fromarray(self.pixels[i].numpy())
        return (self.transform(image) if self.transform else image), int(self.labels[i])


train_set, test_set = Squares(250, 1234), Squares(96, 4321)  # the same data whatever the run's seed
torch.manual_seed(args.seed)
model = create_model("test_efficientnet_gn", pretrained=False, num_classes=4)  # timm's tiny EfficientNet
optimizer = create_optimizer_v2(model, "adamw", lr=args.lr, weight_decay=0.05)
folded = 0 if args.cooldown_as_timm else args.cooldown_epochs  # the cool-down inside --epochs
scheduler, epochs = create_scheduler_v2(
    optimizer, "cosine", num_epochs=(args.length or args.epochs) - folded, warmup_epochs=args.warmup_epochs,
    cooldown_epochs=args.cooldown_epochs, warmup_lr=1e-4, min_lr=1e-5,
)  # fmt: skip
epochs = epochs if args.cooldown_as_timm else args.epochs  # with --length the run still trains --epochs

run = fineprune.start(
    num_train=len(train_set), seed=args.seed, epochs=args.epochs, milestones=[],
    data=fineprune.tensor_identity(train_set.pixels, train_set.labels, test_set.pixels, test_set.labels),
    recipe={"model": "test_efficientnet_gn", "lr": args.lr, "batch": args.batch_size, "mixup": args.mixup}, classes=4,
    num_test=len(test_set),
)  # fmt: skip
# timm's loader sets its transforms on the dataset; it takes no sampler, so the train loader is built
# again around the run's (timm's prefetcher is off: it would need uint8 batches of two fields)
size = dict(input_size=(3, 32, 32), num_workers=0, use_prefetcher=False, device=torch.device("cpu"), crop_pct=1.0)
create_loader(train_set, batch_size=args.batch_size, is_training=True, scale=(0.8, 1.0), color_jitter=0.0, **size)
sampler = run.sampler()
loader_train = DataLoader(
    fineprune.IndexedDataset(train_set), batch_size=args.batch_size, sampler=sampler, drop_last=True
)  # fmt: skip  (as timm's train loader: mixup needs even batches)
loader_eval = create_loader(test_set, batch_size=96, **size)

mixup = Mixup(mixup_alpha=args.mixup, label_smoothing=args.smoothing, num_classes=4) if args.mixup else None
train_loss_fn = SoftTargetCrossEntropy() if mixup else LabelSmoothingCrossEntropy(args.smoothing)


def per_sample(output, target):
    """train_loss_fn's loss of each sample (timm's losses give the batch's mean); under mixup, the
    loss of the mixed pair each sample was drawn into"""
    if mixup:
        return torch.sum(-target * F.log_softmax(output, dim=-1), dim=-1)
    return F.cross_entropy(output, target, reduction="none", label_smoothing=args.smoothing)


for epoch in range(epochs):
    sampler.set_epoch(epoch)
    model.train()
    started, total, seen = time.perf_counter(), 0.0, 0
    for idx, input, target in loader_train:
        if mixup:
            input, target = mixup(input, target)
        output = model(input)
        losses = per_sample(output, target)
        if seen == 0:  # the per-sample form is timm's loss, sample by sample
            assert torch.allclose(losses.mean(), train_loss_fn(output, target), atol=1e-5)
        optimizer.zero_grad()
        sampler.loss(idx, losses).backward()
        optimizer.step()
        total, seen = total + losses.sum().item(), seen + len(idx)
    seconds = time.perf_counter() - started
    lr = optimizer.param_groups[0]["lr"]
    scheduler.step(epoch + 1)
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader_eval)
    run.log(train_loss=total / seen, test_accuracy=100 * correct / len(test_set), lr=lr, train_seconds=seconds)
run.finish()

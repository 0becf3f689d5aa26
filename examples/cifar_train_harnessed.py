"""examples/cifar_train.py, harnessed for `fineprune compare --script` (docs/howto/own-script.md):
    fineprune compare --script 'python examples/cifar_train_harnessed.py --data D --seed {seed} \\
        --epochs {epochs} --milestones {milestones}' --epochs 30 --milestones 15,25"""

import argparse
import time

import fineprune
import torch
import torch.nn as nn
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

parser = argparse.ArgumentParser(description="CIFAR-style training")
parser.add_argument("--data", default="data/cifar10", help="image folder with train/ and test/")
parser.add_argument("--lr", default=0.05, type=float, help="learning rate")
parser.add_argument("--epochs", default=30, type=int)
parser.add_argument("--milestones", default="15,25", help="epochs after which lr x0.1")
parser.add_argument("--batch-size", default=64, type=int)
parser.add_argument("--seed", default=0, type=int)
args = parser.parse_args()
milestones = [int(m) for m in args.milestones.split(",") if m]
torch.manual_seed(args.seed)

transform_train = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor()])
transform_test = T.ToTensor()
trainset = ImageFolder(f"{args.data}/train", transform_train)
testset = ImageFolder(f"{args.data}/test", transform_test)
run = fineprune.start(num_train=len(trainset), seed=args.seed, epochs=args.epochs, milestones=milestones,
                      data=fineprune.folder_identity(args.data), recipe={"lr": args.lr, "batch": args.batch_size})  # fmt: skip
trainloader = DataLoader(fineprune.IndexedDataset(trainset), batch_size=args.batch_size, sampler=run.sampler())
testloader = DataLoader(testset, batch_size=200, shuffle=False)

net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    nn.Linear(32, len(trainset.classes)),
)  # fmt: skip
criterion = nn.CrossEntropyLoss()
per_sample = nn.CrossEntropyLoss(reduction="none")  # the sampler's: test() keeps criterion
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=0.1)


def train(epoch):
    net.train()
    train_loss, total = 0.0, 0
    trainloader.sampler.set_epoch(epoch)
    for idx, inputs, targets in trainloader:
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = trainloader.sampler.loss(idx, per_sample(outputs, targets))
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * targets.size(0)
        total += targets.size(0)
    return train_loss / total


def test(epoch):
    net.eval()
    test_loss, correct, total = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            outputs = net(inputs)
            test_loss += criterion(outputs, targets).item() * targets.size(0)
            correct += outputs.argmax(1).eq(targets).sum().item()
            total += targets.size(0)
    acc = 100.0 * correct / total
    print(f"epoch {epoch}: test loss {test_loss / total:.3f}, accuracy {acc:.2f}%")
    return acc


for epoch in range(args.epochs):
    started = time.perf_counter()
    loss = train(epoch)
    seconds = time.perf_counter() - started  # the test pass is not training time
    acc = test(epoch)
    run.log(train_loss=loss, test_accuracy=acc, lr=scheduler.get_last_lr()[0], train_seconds=seconds)
    scheduler.step()
run.finish()

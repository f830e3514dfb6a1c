#!/usr/bin/python3
"""Your PyTorch model, trained by murmur: a CNN with BatchNorm (or a small ResNet) on Fashion-MNIST.

    tools/murmur-launch -n 4 --config configs/ring.yaml -- /usr/bin/python3 examples/pytorch/train.py
    tools/murmur-launch -n 4 --config configs/sgp.yaml -- /usr/bin/python3 examples/pytorch/train.py --model resnet
    /usr/bin/python3 examples/pytorch/train.py          # one process, no launcher: the same, alone

A plain PyTorch training loop; the lines marked "murmur" are all that murmur adds: init, the
optimizer wrapper, and the end (the exact average of every peer's model). Any config of
configs/ works (the algorithm, topology and transport are murmur's; the model, data and recipe
are this script's). Each peer trains on its shard of the training set, as DistributedSampler
would give it. Ctrl-C in the launcher: every peer writes rank<r>/checkpoint.pt and stops; the
same command resumes. Needs Debian's python3-torch and dataset-fashion-mnist (/usr/bin/python3).
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import murmur
except ImportError:  # run from murmur's checkout without the launcher: the build's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import murmur

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw[16:], dtype=np.uint8).reshape(count, 1, rows, cols)
    if magic == 0x801:
        return np.frombuffer(raw[8:], dtype=np.uint8)
    raise ValueError(f"{path}: not an IDX file (magic {magic:#x})")


def load_fashion_mnist(directory=DATA):
    """(train_x, train_y, test_x, test_y) as tensors, images normalized."""
    def images(name):
        x = torch.from_numpy(read_idx(os.path.join(directory, name)).astype(np.float32) / 255.0)
        return (x - MEAN) / STD

    def labels(name):
        return torch.from_numpy(read_idx(os.path.join(directory, name)).astype(np.int64))
    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


class Cnn(nn.Module):
    """Two conv + BatchNorm + pool stages, then two linear layers: 0.42 M parameters."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.fc1, self.fc2 = nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Block(nn.Module):
    """ResNet's basic block (He et al. 2016): two 3x3 convs with BatchNorm, and the shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """A small ResNet for 28x28 images: 16-32-64 channels, one block per stage: 0.08 M parameters."""

    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.stages = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.stages(F.relu(self.bn(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"cnn": Cnn, "resnet": ResNet}


@torch.no_grad()
def evaluate(model, x, y, batch=200):
    """(accuracy, mean cross-entropy) on (x, y), in eval mode (BatchNorm's running statistics).
    Batches of 200: on the CPU, batches of 1000 ran 8x slower here (their activations leave the
    caches)."""
    was = model.training
    model.eval()
    right, loss = 0, 0.0
    for i in range(0, len(y), batch):
        out = model(x[i:i + batch])
        loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
        right += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train(was)
    return right / len(y), loss / len(y)


def shard(n, rank, world, seed, epoch):
    """This peer's indices for `epoch`: a permutation shared by every peer, every world-th one."""
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    return torch.randperm(n, generator=g)[rank::world]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="cnn")
    ap.add_argument("--epochs", type=float, default=2, help="epochs over the whole data, all peers together")
    ap.add_argument("--batch-size", type=int, default=64, help="per peer")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--buffers", choices=murmur.optimizer.BUFFERS, default="average",
                    help="BatchNorm's running statistics: averaged with the parameters, or each peer's own")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: the epochs')")
    ap.add_argument("--eval-every", type=int, default=0, help="evaluate every this many steps (0: each epoch)")
    ap.add_argument("--eval-subset", type=int, default=0,
                    help="evaluate on the first this many test images, but at the end (0: all)")
    ap.add_argument("--report", help="rank 0 writes its timings and evaluations here, as JSON "
                                     "(experiments/pytorch_compare.py reads it)")
    ap.add_argument("--data", default=DATA, help="the Fashion-MNIST directory")
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    comm = murmur.init()  # murmur: rank, world and config from the launcher; torch's threads sized
    rank, world = comm.rank, comm.world_size
    torch.manual_seed(args.seed)
    train_x, train_y, test_x, test_y = load_fashion_mnist(args.data)
    model = MODELS[args.model]()
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    opt = murmur.DecentralizedOptimizer(sgd, model, buffers=args.buffers)  # murmur

    # Every peer takes as many steps: an epoch is the whole training set over the peers.
    per_epoch = len(train_y) // world // args.batch_size
    total = int(args.epochs * per_epoch)
    if args.max_steps:
        total = min(total, args.max_steps)
    step = opt.step_count  # 0, or where a resumed run goes on
    every = args.eval_every or per_epoch
    subset = args.eval_subset or len(test_y)
    evals = []
    start = time.time()
    while step < total:
        epoch = step // per_epoch
        mine = shard(len(train_y), rank, world, args.seed, epoch)
        for b in range(step % per_epoch, per_epoch):
            idx = mine[b * args.batch_size:(b + 1) * args.batch_size]
            sgd.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step(loss=loss, samples=len(idx))  # murmur: the local step, then the averaging
            step += 1
            if step % every == 0 or step >= total:
                opt.flush()
                n = len(test_y) if step >= total else subset
                accuracy, test_loss = evaluate(model, test_x[:n], test_y[:n])
                murmur.log_eval(accuracy, test_loss, epoch=step / per_epoch)  # murmur: metrics
                evals.append({"step": step, "time_s": time.time() - start, "accuracy": accuracy})
                if rank == 0:
                    print(f"step {step}/{total} ({step / per_epoch:.2f} epochs, {time.time() - start:.1f} s): "
                          f"rank 0 test accuracy {100 * accuracy:.2f}%", flush=True)
            if step >= total:
                break
    train_s = time.time() - start
    result = opt.finish(evaluate=lambda: evaluate(model, test_x, test_y))  # murmur: the average
    if "accuracy" in result:
        print(f"average model: test accuracy {100 * result['accuracy']:.2f}% over ranks {result['ranks']}, "
              f"consensus distance {result['consensus_distance']:.4g}", flush=True)
    if args.report and rank == 0:
        with open(args.report, "w") as f:
            json.dump({"steps": step, "samples": step * args.batch_size * world, "train_s": train_s,
                       "evals": evals, "final_accuracy": result.get("accuracy"),
                       "bytes_sent": opt.comm.stats()["bytes_sent"]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""One peer of tests/api/pytorch_test.py, started by murmur-launch: a small model with BatchNorm
on synthetic data, wrapped in murmur.DecentralizedOptimizer, in one of the modes the test asks
for. Each peer prints one line "RESULT {json}" for the test to compare across peers.

    torch_peer.py train [--steps N] [--buffers average|local] [--other-model-on RANK]
    torch_peer.py primitives
    torch_peer.py endless                        # steps until it is stopped (Ctrl-C test)
"""
import argparse
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import murmur


def model(other=False):
    torch.manual_seed(0)
    width = 24 if other else 16
    return nn.Sequential(nn.Linear(8, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Linear(width, 3))


def batch(rank, step):
    g = torch.Generator().manual_seed(rank * 100000 + step)
    x = torch.randn(32, 8, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def train(args):
    comm = murmur.init()
    net = model(other=comm.rank == args.other_model_on)
    torch.manual_seed(comm.rank + 1)  # different starts on purpose: same_start must align them
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p))
    opt = murmur.DecentralizedOptimizer(torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), net,
                                        buffers=args.buffers)
    flat = opt.flat
    views = all(flat.data_ptr() <= p.data_ptr() < flat.data_ptr() + 4 * flat.numel() for p in net.parameters())
    start = [p.detach().clone() for p in net.parameters()]
    step = opt.step_count
    while step < args.steps:
        x, y = batch(comm.rank, step)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step(loss=loss, samples=len(y))
        step += 1
        if args.endless and step == 50:
            print(f"STEP {step}", flush=True)
    if args.endless:
        return 0
    murmur.log_eval(0.5, 1.0, epoch=1)
    result = opt.finish(evaluate=lambda: (0.9, 0.3))
    out = {"rank": comm.rank, "views": views, "ranks": result["ranks"],
           "params": [round(float(p.detach().double().sum()), 6) for p in net.parameters()],
           "running_mean": round(float(net[1].running_mean.double().sum()), 6),
           "start": [round(float(t.double().sum()), 6) for t in start],
           "stats": opt.comm.stats()}
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def primitives(args):
    comm = murmur.init()
    r, n = comm.rank, comm.world_size
    x = torch.tensor([float(r), float(r * r)])
    murmur.neighbor_average(x)
    y = torch.tensor([float(r)])
    murmur.allreduce(y, op="sum")
    z = torch.full((3,), float(r + 10))
    murmur.broadcast(z, root=n - 1)
    murmur.barrier()
    a = __import__("numpy").array([float(r)], dtype="float32")
    murmur.allreduce(a)
    print("RESULT " + json.dumps({"rank": r, "neighbor": x.tolist(), "sum": y.item(), "bcast": z.tolist(),
                                  "numpy_mean": float(a[0]), "nbrs": murmur.neighbors(0)}), flush=True)
    murmur.finish()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["train", "primitives", "endless"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--buffers", default="average")
    ap.add_argument("--other-model-on", type=int, default=-1)
    args = ap.parse_args()
    args.endless = args.mode == "endless"
    if args.endless:
        args.steps = 10 ** 9
    return primitives(args) if args.mode == "primitives" else train(args)


if __name__ == "__main__":
    sys.exit(main())

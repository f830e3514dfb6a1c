#!/usr/bin/python3
"""examples/pytorch/train.py's training, by PyTorch DDP over gloo instead of murmur: the baseline
of experiments/pytorch_compare.py. The same model, data, shards, recipe, evaluation cadence and
report; DDP averages the gradients of every step (bucketed allreduce, overlapped with backward)
where murmur averages parameters. One process of the run: RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT in the environment (torch.distributed's env://), as torchrun sets them.
Needs Debian's python3-torch (/usr/bin/python3).
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pytorch"))
import train  # noqa: E402  (examples/pytorch/train.py: its model, data, shards, evaluation and flags)


def main():
    args = train.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # This peer's share of the cores, for torch's pool and OpenBLAS's (which the driver sizes by
    # OPENBLAS_NUM_THREADS before torch loads it), as murmur sizes its peers.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    torch.manual_seed(args.seed)
    train_x, train_y, test_x, test_y = train.load_fashion_mnist(args.data)
    model = DistributedDataParallel(train.MODELS[args.model]())  # broadcasts rank 0's parameters
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    per_epoch = len(train_y) // world // args.batch_size
    total = int(args.epochs * per_epoch)
    if args.max_steps:
        total = min(total, args.max_steps)
    every = args.eval_every or per_epoch
    subset = args.eval_subset or len(test_y)
    evals, step = [], 0
    start = time.time()
    while step < total:
        mine = train.shard(len(train_y), rank, world, args.seed, step // per_epoch)
        for b in range(per_epoch):
            idx = mine[b * args.batch_size:(b + 1) * args.batch_size]
            sgd.zero_grad()
            F.cross_entropy(model(train_x[idx]), train_y[idx]).backward()  # the allreduce of gradients
            sgd.step()
            step += 1
            if step % every == 0 or step >= total:
                n = len(test_y) if step >= total else subset
                accuracy, _ = train.evaluate(model.module, test_x[:n], test_y[:n])
                evals.append({"step": step, "time_s": time.time() - start, "accuracy": accuracy})
            if step >= total:
                break
    train_s = time.time() - start
    if rank == 0 and args.report:
        with open(args.report, "w") as f:
            json.dump({"steps": step, "samples": step * args.batch_size * world, "train_s": train_s,
                       "evals": evals, "final_accuracy": evals[-1]["accuracy"]}, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

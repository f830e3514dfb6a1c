#!/usr/bin/python3
"""Training samples/s of PyTorch on the GPU, for tools/gpu-check's table next to murmur's.

The same models as murmur (mlp 784-512-256-10, cnn conv5-32/pool/conv5-64/pool/fc512/fc10),
the same step as murmur's GPU path does it: a batch handed over from host memory, forward,
cross-entropy, backward, SGD(lr=0.05, momentum=0.9), and the loss read back (murmur reads it
every step too). TF32 is off on both sides (murmur asks cuBLAS/cuDNN for plain FP32 math).
Prints one JSON line: {"model", "batch", "samples_per_s", "device"}; samples_per_s is null
with a "reason" where torch has no CUDA (the table then says so).

  tools/gpu_bench_torch.py --model cnn --batch 64 --steps 1500
"""
import argparse
import json
import sys
import time


def build(torch, name):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1024, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()
    out = {"model": args.model, "batch": args.batch, "samples_per_s": None}
    try:
        import torch
    except ImportError as e:
        out["reason"] = f"no torch ({e})"
        print(json.dumps(out))
        return 0
    if not torch.cuda.is_available():
        out["reason"] = f"torch {torch.__version__} has no CUDA device"
        print(json.dumps(out))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True  # murmur measures cuDNN's algorithms once, too
    dev = torch.device("cuda")
    model = build(torch, args.model).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    # A pool of host batches, pinned as murmur's staging buffer is.
    pool = [(torch.randn(args.batch, 1, 28, 28, generator=g).pin_memory(),
             torch.randint(0, 10, (args.batch,), generator=g).pin_memory()) for _ in range(16)]

    def step(i):
        x, y = pool[i % len(pool)]
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(args.steps):
        step(i)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    out["samples_per_s"] = args.steps * args.batch / seconds
    out["device"] = torch.cuda.get_device_name(0)
    out["torch"] = torch.__version__
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

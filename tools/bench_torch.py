#!/usr/bin/python3
"""Training throughput of PyTorch (CPU) next to murmur's, same models, batch and threads.

Each (model, threads) row runs PyTorch in a child process (so OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS are set before torch loads; Debian's torch does its GEMMs in the same
OpenBLAS as murmur) and then `murmur-bench train --json` with the same environment, and prints
samples/s of both and the ratio murmur/PyTorch. Protocol as murmur-bench: warm-up steps, then
timed repeats of a time budget each, median repeat; a step is zero_grad, forward,
cross-entropy, backward and SGD(lr=0.01, momentum=0.9) on random 1x28x28 data, 10 classes.
With --rounds N the pair is measured N times, alternating, and the median of each is kept:
on a shared machine the load changes between runs.

  tools/bench_torch.py                         # mlp and cnn, 1 and 2 threads, batch 64
  tools/bench_torch.py --models mlp --threads 1 --seconds 5 --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_model(torch, name):
    nn = torch.nn

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 512)
            self.fc2 = nn.Linear(512, 256)
            self.fc3 = nn.Linear(256, 10)

        def forward(self, x):
            x = torch.flatten(x, 1)
            x = torch.relu(self.fc1(x))
            x = torch.relu(self.fc2(x))
            return self.fc3(x)

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 5)
            self.conv2 = nn.Conv2d(32, 64, 5)
            self.fc1 = nn.Linear(1024, 512)
            self.fc2 = nn.Linear(512, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)
            return self.fc2(torch.relu(self.fc1(x)))

    return {"mlp": Mlp, "cnn": Cnn}[name]()


def torch_worker(args):
    """Runs in the child: measures one (model, batch, threads) row, prints one JSON line."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    model = build_model(torch, args.models)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = 8
    xs = torch.randn(batches, args.batch, 1, 28, 28)
    ys = torch.randint(0, 10, (batches, args.batch))
    step = [0]

    def train_step():
        b = step[0] % batches
        step[0] += 1
        opt.zero_grad()
        loss = F.cross_entropy(model(xs[b]), ys[b])
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        train_step()
    rates = []
    budget = args.seconds / args.repeats
    for _ in range(args.repeats):
        start = time.perf_counter()
        done = 0
        while True:
            train_step()
            done += 1
            elapsed = time.perf_counter() - start
            if elapsed >= budget:
                break
        rates.append(done * args.batch / elapsed)
    print(json.dumps({"model": args.models, "batch": args.batch, "threads": args.threads,
                      "samples_per_s": statistics.median(rates)}))


def thread_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"no result from {' '.join(cmd)}: {out.stderr.strip()}")
    return rows[0]["samples_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per row")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--rounds", type=int, default=1, help="alternating torch/murmur runs per row")
    p.add_argument("--murmur-bench", default=os.path.join(ROOT, "build", "bin", "murmur-bench"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        torch_worker(args)
        return 0

    common = ["--batch", str(args.batch), "--seconds", str(args.seconds),
              "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    print(f"{'model':<6} {'batch':>5} {'threads':>7} {'torch/s':>10} {'murmur/s':>10} {'ratio':>7}")
    for model in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            env = thread_env(threads)
            torch_rates, murmur_rates = [], []
            try:
                for _ in range(args.rounds):
                    torch_rates.append(run_json(
                        [sys.executable, os.path.abspath(__file__), "--worker", "--models", model,
                         "--threads", str(threads)] + common, env))
                    murmur_rates.append(run_json(
                        [args.murmur_bench, "train", "--json", "--model", model,
                         "--threads", str(threads)] + common, env))
            except (subprocess.CalledProcessError, RuntimeError) as e:
                err = getattr(e, "stderr", None) or str(e)
                print(f"{model:<6} {args.batch:>5} {threads:>7}  skipped: {err.strip()}")
                continue
            t, m = statistics.median(torch_rates), statistics.median(murmur_rates)
            print(f"{model:<6} {args.batch:>5} {threads:>7} {t:>10.0f} {m:>10.0f} {m / t:>7.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""murmur against PyTorch DDP (gloo) and one process, on the same PyTorch program, in one run.

The program is examples/pytorch/train.py (the CNN with BatchNorm on Fashion-MNIST, batch 64 per
peer, SGD lr 0.05 momentum 0.9); DDP runs it as experiments/pytorch_ddp.py (the same model, data,
shards, recipe and evaluations, gradients averaged by DDP). 4 peers on this machine, each in its
own network namespace (tools/murmur_netem) so that every system's bytes are counted alike, at
the bridge, headers and all:

- one process (2 threads, no network), the baseline of accuracy;
- murmur D-PSGD on a ring (configs/ring.yaml), the same with algorithm.overlap (the exchange on
  murmur's communication thread during the next step), and murmur allreduce (configs/allreduce.yaml);
- PyTorch DDP over gloo;
each over an unshaped link, then over 1 Gbit/s + 5 ms per link. Figures: the final model's test
accuracy (murmur: the average model), samples per second over all peers (the training loop's
wall time, evaluations included, the same for every system), bytes per peer over its link, and
the time until rank 0's model first reaches --target on the evaluation subset.

Then the binding's own cost: the time a DecentralizedOptimizer step adds to the optimizer's step
with nothing to average (one process), against the time of a whole step of the CNN.

    experiments/pytorch_compare.py [--epochs 2] [--out experiments/results/pytorch]   (as root)

Writes summary.csv, report.md and accuracy_over_time.png into --out; the runs' directories go
to a temporary directory and are removed. Needs Debian's python3-torch and python3-matplotlib
(/usr/bin/python3), the build (build/bin/murmur-peer, build/python), and root (namespaces).
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from murmur_netem import Network  # noqa: E402

PY = "/usr/bin/python3"
TRAIN = os.path.join(ROOT, "examples", "pytorch", "train.py")
DDP = os.path.join(HERE, "pytorch_ddp.py")
LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")
PEERS = 4
NETWORKS = [("unshaped", {}), ("1 Gbit/s + 5 ms", {"bandwidth": "1gbit", "latency": "5ms"})]
SYSTEMS = [("murmur D-PSGD ring", "configs/ring.yaml", []),
           ("murmur D-PSGD ring, overlap", "configs/ring.yaml", ["algorithm.overlap=true"]),
           ("murmur allreduce", "configs/allreduce.yaml", []),
           ("DDP gloo", None, [])]


def slug(name):
    """A file name for a run's name ("murmur D-PSGD ring 1 Gbit/s + 5 ms")."""
    return "".join(c if c.isalnum() else "_" for c in name)


def train_args(args, report, seed):
    return ["--epochs", str(args.epochs), "--eval-every", str(args.eval_every), "--eval-subset",
            str(args.eval_subset), "--seed", str(seed), "--report", report]


def read(path):
    with open(path) as f:
        return json.load(f)


def reached(evals, target):
    """Seconds until the first evaluation at or above target, or None."""
    return next((e["time_s"] for e in evals if e["accuracy"] >= target), None)


def run_murmur(args, runs, name, config, sets, shape, seed):
    out = os.path.join(runs, slug(name))
    report = out + ".report.json"
    cmd = [LAUNCH, "-n", str(PEERS), "--config", os.path.join(ROOT, config), "--out", out, "--quiet",
           "--network"]
    for key, value in shape.items():
        cmd += ["--set", f"network.{key}={value}"]
    for o in sets:
        cmd += ["--set", o]
    r = subprocess.run(cmd + ["--", PY, TRAIN] + train_args(args, report, seed), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"pytorch_compare: {name} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    summary, rep, net = read(os.path.join(out, "summary.json")), read(report), read(os.path.join(out, "network.json"))
    accs = [p["test_accuracy"] for p in summary["peers"]]
    return {"accuracy": summary["average_model"]["test_accuracy"], "peer_accuracy": f"{min(accs):.4f}-{max(accs):.4f}",
            "train_s": rep["train_s"], "samples": rep["samples"], "evals": rep["evals"],
            "link_bytes_per_peer": statistics.mean(p["link_bytes_sent"] for p in net["peers"]),
            "murmur_bytes_per_peer": statistics.mean(p["bytes_sent"] for p in summary["peers"]),
            "consensus_distance": summary["consensus_distance"]}


def run_ddp(args, runs, name, shape, seed):
    report = os.path.join(runs, slug(name) + ".report.json")
    net = Network(PEERS, **shape).up()
    try:
        share = str(max(1, (os.cpu_count() or 1) // PEERS))  # each peer's cores, as murmur's take them
        env = dict(os.environ, MASTER_ADDR=net.addresses[0], MASTER_PORT="29512", WORLD_SIZE=str(PEERS),
                   LOCAL_WORLD_SIZE=str(PEERS), GLOO_SOCKET_IFNAME="eth0", OPENBLAS_NUM_THREADS=share)
        procs = [subprocess.Popen(net.exec_prefix(r) + [PY, DDP] + train_args(args, report, seed),
                                  env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for r in range(PEERS)]
        outputs = [p.communicate()[0] for p in procs]
        if any(p.returncode != 0 for p in procs):
            raise SystemExit(f"pytorch_compare: {name} failed:\n" + "\n".join(o[-2000:] for o in outputs))
        sent = [s for s, _ in net.link_bytes()]
    finally:
        net.down()
    rep = read(report)
    return {"accuracy": rep["final_accuracy"], "peer_accuracy": "", "train_s": rep["train_s"],
            "samples": rep["samples"], "evals": rep["evals"], "link_bytes_per_peer": statistics.mean(sent),
            "murmur_bytes_per_peer": "", "consensus_distance": ""}


def run_single(args, runs, seed):
    report = os.path.join(runs, f"single{seed}.report.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
    r = subprocess.run([PY, TRAIN] + train_args(args, report, seed), capture_output=True, text=True, env=env, cwd=runs)
    if r.returncode != 0:
        raise SystemExit(f"pytorch_compare: one process failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    rep = read(report)
    return {"accuracy": rep["final_accuracy"], "peer_accuracy": "", "train_s": rep["train_s"],
            "samples": rep["samples"], "evals": rep["evals"], "link_bytes_per_peer": 0,
            "murmur_bytes_per_peer": 0, "consensus_distance": ""}


BINDING = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[1])
import murmur, train
murmur.init(out=sys.argv[2])
model = train.Cnn()
sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
opt = murmur.DecentralizedOptimizer(sgd, model)
inner = []
plain_step = sgd.step
def timed_step(*a, **k):
    t = time.perf_counter(); r = plain_step(*a, **k); inner.append(time.perf_counter() - t); return r
sgd.step = timed_step
x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
whole, wrapped = [], []
for i in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    sgd.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    t1 = time.perf_counter()
    opt.step(loss=loss, samples=64)
    t2 = time.perf_counter()
    whole.append(t2 - t0)
    wrapped.append(t2 - t1)
added = [w - s for w, s in zip(wrapped, inner)]
print(json.dumps({"step_ms": 1e3 * sorted(whole)[len(whole) // 2], "added_us": 1e6 * sorted(added)[len(added) // 2]}))
"""


def binding_cost(runs, steps=300):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
    r = subprocess.run([PY, "-c", BINDING, os.path.dirname(TRAIN), os.path.join(runs, "binding"), str(steps)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"pytorch_compare: the binding's cost:\n{r.stdout}\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def write(args, rows, binding):
    os.makedirs(args.out, exist_ok=True)
    fields = ["system", "network", "seed", "accuracy", "peer_accuracy", "samples_per_s", "link_bytes_per_peer",
              "murmur_bytes_per_peer", "time_to_target_s", "train_s", "consensus_distance"]
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    seeds = ", ".join(map(str, args.seeds))
    lines = [f"# murmur against PyTorch DDP (gloo) and one process, on one PyTorch program\n",
             f"`{' '.join(sys.argv)}` on {os.uname().nodename} ({os.cpu_count()} cores), "
             f"{time.strftime('%Y-%m-%d')}: examples/pytorch/train.py (CNN with BatchNorm, Fashion-MNIST), "
             f"{args.epochs} epochs, {PEERS} peers (one process: 2 threads), evaluation every "
             f"{args.eval_every} steps on the first {args.eval_subset} test images (the last on all "
             f"10000); target {100 * args.target:.0f}% (rank 0's model). Each figure is the mean over "
             f"the seeds {seeds}; the accuracy column lists each seed's too.\n",
             "| system | network | accuracy (each seed) | samples/s (all peers) | bytes per peer (link) | "
             f"time to {100 * args.target:.0f}% |", "|---|---|---|---|---|---|"]
    points = []
    for r in rows:
        if (r["system"], r["network"]) not in points:
            points.append((r["system"], r["network"]))
    for system, network in points:
        mine = [r for r in rows if (r["system"], r["network"]) == (system, network)]
        accs = [r["accuracy"] for r in mine]
        times = [r["time_to_target_s"] for r in mine if r["time_to_target_s"] is not None]
        when = f"{statistics.mean(times):.1f} s" if times else "not reached"
        if times and len(times) < len(mine):
            when += f" ({len(mine) - len(times)} of {len(mine)} not reached)"
        lines.append(f"| {system} | {network} | {100 * statistics.mean(accs):.2f}% "
                     f"({', '.join(f'{100 * a:.2f}' for a in accs)}) | "
                     f"{statistics.mean(r['samples_per_s'] for r in mine):.0f} | "
                     f"{statistics.mean(r['link_bytes_per_peer'] for r in mine) / 1e6:.0f} MB | {when} |")
    lines += ["", f"The binding's own cost per step (one process, nothing to average, median of the "
                  f"steps): {binding['added_us']:.0f} us on a CNN step of {binding['step_ms']:.1f} ms, "
                  f"{100 * binding['added_us'] / 1e3 / binding['step_ms']:.2f}%."]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(args, rows)


def plot(args, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(NETWORKS), figsize=(12, 4.5), sharey=True)
    for ax, (network, _) in zip(axes, NETWORKS):
        for r in rows:
            if r["network"] in (network, "-") and r["seed"] == args.seeds[0]:
                ax.plot([e["time_s"] for e in r["evals"]], [100 * e["accuracy"] for e in r["evals"]],
                        marker=".", label=r["system"])
        ax.axhline(100 * args.target, color="gray", lw=0.8, ls="--")
        ax.set_title(network)
        ax.set_xlabel("training time (s)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"rank 0's test accuracy (%), seed {args.seeds[0]}")
    axes[0].set_ylim(70, 95)
    axes[-1].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "accuracy_over_time.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--eval-every", type=int, default=40)
    ap.add_argument("--eval-subset", type=int, default=2000)
    ap.add_argument("--target", type=float, default=0.87)
    ap.add_argument("--seeds", default="1,2", help="the runs' seeds (model, shards), each point once per seed")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "pytorch"))
    args = ap.parse_args()
    args.seeds = [int(x) for x in args.seeds.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="murmur-pytorch-compare-") as runs:
        def add(system, network, seed, fig):
            fig.update(system=system, network=network, seed=seed, samples_per_s=fig["samples"] / fig["train_s"],
                       time_to_target_s=reached(fig["evals"], args.target))
            rows.append(fig)
            t = fig["time_to_target_s"]
            print(f"pytorch_compare: {system}, {network}, seed {seed}: {100 * fig['accuracy']:.2f}%, "
                  f"{fig['samples_per_s']:.0f} samples/s, {fig['link_bytes_per_peer'] / 1e6:.0f} MB per peer, "
                  f"{args.target:.2f} at {t if t is None else round(t, 1)} s", flush=True)
        for seed in args.seeds:
            add("one process", "-", seed, run_single(args, runs, seed))
            for network, shape in NETWORKS:
                for system, config, sets in SYSTEMS:
                    name = f"{system} {network} {seed}"
                    add(system, network, seed, run_ddp(args, runs, name, shape, seed) if config is None
                        else run_murmur(args, runs, name, config, sets, shape, seed))
        binding = binding_cost(runs)
        print(f"pytorch_compare: binding: {binding}", flush=True)
    write(args, rows, binding)
    return 0


if __name__ == "__main__":
    sys.exit(main())

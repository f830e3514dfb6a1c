#!/usr/bin/python3
"""Where a run's communication time goes, step by step, from its peers' metrics.jsonl.

    tools/murmur-launch -n 2 configs/allreduce.yaml --set world.size=2 --set train.epochs=1 \\
        --set run.log_every=1 --out runs/steps
    experiments/step_waits.py runs/steps [--global]

Needs a run with run.log_every: 1 (a line per step) launched on one machine, so the peers'
clocks agree. Prints each step's comm_s over all peers (quantiles and mean), and with --global,
for algorithms in which every peer averages with every other at each step (allreduce of
parameters), its two parts: the wait for the last peer to finish computing, and the time from
then to the step's end, which is what the cost model prices (summary.json's comm_prediction,
per step, is printed beside it).
"""
import argparse
import json
import os
import statistics
import sys


def read_peer(path):
    """{step: record} of the step lines, and the offset from the peer's clock to the Unix time."""
    steps, offset = {}, None
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if o.get("kind") == "step":
                steps[o["step"]] = o
            elif o.get("kind") == "eval" and "unix_s" in o:
                offset = o["unix_s"] - o["time_s"]
    return steps, offset


def quantiles(values):
    v = sorted(values)
    return " / ".join(f"{v[int(q * (len(v) - 1))] * 1e3:.2f}" for q in (0.1, 0.5, 0.9))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a murmur-launch run directory")
    ap.add_argument("--global", dest="all_peers", action="store_true",
                    help="every peer averages with every other each step: split the wait from the transfer")
    args = ap.parse_args()
    with open(os.path.join(args.run, "summary.json")) as f:
        summary = json.load(f)
    peers = [read_peer(os.path.join(args.run, f"rank{p['rank']}", "metrics.jsonl")) for p in summary["peers"]]
    common = set.intersection(*(set(steps) for steps, _ in peers))
    # Step s's record and step s-1's must both be there: log_every 1.
    steps = sorted(s for s in common if s - 1 in common)
    if len(steps) < 10:
        sys.exit(f"step_waits: {args.run}: fewer than 10 consecutive steps logged (run with run.log_every: 1)")
    if args.all_peers and any(offset is None for _, offset in peers):
        sys.exit(f"step_waits: {args.run}: a peer has no eval line with unix_s to align the clocks")
    comm, wait, after = [], [], []
    for s in steps:
        durations = [p[s]["comm_s"] - p[s - 1]["comm_s"] for p, _ in peers]
        comm += durations
        if args.all_peers:
            ends = [offset + p[s]["time_s"] for p, offset in peers]
            ready = [e - d for e, d in zip(ends, durations)]
            wait += [max(ready) - r for r in ready]
            after += [e - max(ready) for e in ends]
    print(f"{args.run}: {len(peers)} peers, {len(steps)} steps; ms per step (10% / median / 90%, mean)")
    print(f"  comm_s:                          {quantiles(comm)}  mean {statistics.mean(comm) * 1e3:.2f}")
    if args.all_peers:
        print(f"  waiting for the last to compute: {quantiles(wait)}  mean {statistics.mean(wait) * 1e3:.2f}")
        print(f"  from then to the step's end:     {quantiles(after)}  mean {statistics.mean(after) * 1e3:.2f}")
    prediction = summary.get("comm_prediction") or {}
    if prediction.get("predicted_comm_s"):
        n = max(p.get("steps", 0) for p in summary["peers"]) or 1
        print(f"  predicted (comm_prediction):     {prediction['predicted_comm_s'] / n * 1e3:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

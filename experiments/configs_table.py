#!/usr/bin/python3
"""Runs every ready-made config with murmur-launch and prints the table of
docs/configuration.md ("What they give").

    experiments/configs_table.py [--peers 4] [--out runs/configs] [--backends tcp] [configs ...]

One run per config (and per backend given); each row: accuracy of each peer (min-max), of the
average model, consensus distance, bytes sent per peer, wall time, and the mean comm_s per peer
beside the alpha-beta model's prediction (summary.json's comm_prediction: run
`build/bin/murmur-bench fit` first, else "-"). Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ["single", "allreduce", "ring", "torus", "exponential", "one_peer_exponential",
           "gossip_random", "gossipgrad", "sgp", "adpsgd", "ssp", "local_sgd", "diloco",
           "easgd", "choco_topk", "choco_bf16", "large_batch", "batch_ramp",
           "wait_free", "dgc", "bf16_wire", "gossipgrad_shuffle"]


def run(config, peers, backend, out):
    if config == "single":
        cmd = [os.path.join(ROOT, "build/bin/murmur-peer"), "--config", f"{ROOT}/configs/single.yaml", "--out", out]
    else:
        cmd = [f"{ROOT}/tools/murmur-launch", "-n", str(peers), f"{ROOT}/configs/{config}.yaml",
               "--set", f"transport.backend={backend}", "--out", out, "--quiet"]
    env = dict(os.environ, UCX_TLS=os.environ.get("UCX_TLS", "sm,self"), FI_TCP_IFACE="lo")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return f"| {config} | {backend} | failed: {(r.stderr or r.stdout).strip().splitlines()[-1][:80]} |"
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    accs = [p["test_accuracy"] * 100 for p in s["peers"]]
    avg = s.get("average_model", {}).get("test_accuracy")
    sent = max(p.get("bytes_sent", 0) for p in s["peers"])
    n = s["world_size"]
    comm = sum(p.get("comm_s", 0) for p in s["peers"]) / len(s["peers"])
    pred = (s.get("comm_prediction") or {}).get("predicted_comm_s")
    return (f"| {config} | {n} | {backend if n > 1 else '-'} | {min(accs):.2f}-{max(accs):.2f}% | "
            f"{'-' if avg is None else f'{100 * avg:.2f}%'} | "
            f"{s.get('consensus_distance', 0):.2g} | {sent / 1e9:.2f} GB | {s['wall_time_s']:.0f} s | "
            f"{comm:.1f} s | {'-' if not pred else f'{pred:.1f} s ({comm / pred:.2f}x)'} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*", default=CONFIGS)
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--backends", default="tcp")
    ap.add_argument("--out", default="runs/configs")
    args = ap.parse_args()
    print("| config | peers | backend | peer accuracy | average model | consensus distance | "
          "bytes sent per peer | wall time | comm_s | predicted (measured / predicted) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config in args.configs:
        for backend in args.backends.split(","):
            peers = 9 if config == "torus" else args.peers
            out = os.path.join(args.out, f"{config}-{backend}")
            subprocess.run(["rm", "-rf", out])
            print(run(config, peers, backend, out), flush=True)
            if config == "single":
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())

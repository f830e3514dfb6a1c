#!/usr/bin/python3
"""tools/murmur-sweep end to end on a tiny sweep: 2 points (D-PSGD on a ring and local SGD with
H = 3, 4 peers each, synthetic data, a narrow MLP), run through murmur-launch; then checks that
summary.csv and report.md hold exactly those rows with sane figures, that the plots are PNGs,
that the consensus series was read from the checkpoints (and the checkpoints removed), that the
points' summary.json got the sweep's target (time_to_accuracy, from murmur-peer --summarize), that
a second run skips both points, and that --report rebuilds the same CSV from the results alone.
Exits 77 (CTest: skipped) without Debian's python3-yaml, -numpy or -matplotlib.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SWEEP = os.path.join(ROOT, "tools", "murmur-sweep")

TINY = """\
name: tiny
config:
  run: {name: tiny, log_every: 4, threads: 1}
  model: {name: mlp, hidden: [16]}
  data: {name: synthetic, synthetic: {train_size: 1024, test_size: 256, noise: 3.0}}
  train: {epochs: 2, batch_size: 16, schedule: {name: constant}}
  eval: {every_steps: 8}
  checkpoint: {every_steps: 4, keep: 1000}
peers: 4
target_accuracy: 0.3
grid:
  algorithm:
    ring: {algorithm.name: dpsgd, topology.graph: ring}
    local_H3: {algorithm.name: local_sgd, algorithm.local_steps: 3}
"""


def fail(msg):
    print(f"sweep_test: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--topo", default="")
    args = ap.parse_args()
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        print(f"sweep_test: skipped: {e}")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="murmur-sweep-test-")
    try:
        spec = os.path.join(tmp, "tiny.yaml")
        with open(spec, "w") as f:
            f.write(TINY)
        out = os.path.join(tmp, "out")
        cmd = [SWEEP, spec, "--out", out, "--peer", args.peer, "--topo", args.topo or "/nonexistent"]
        first = run(cmd)
        check("0 already done" in first, f"first run: {first}")

        with open(os.path.join(out, "summary.csv")) as f:
            rows = list(csv.DictReader(f))
        check([r["point"] for r in rows] == ["ring", "local_H3"], f"rows: {[r['point'] for r in rows]}")
        for r in rows:
            check(r["peers"] == "4", f"{r['point']}: peers {r['peers']}")
            for key in ("peer_acc_mean", "peer_acc_min", "avg_model_acc"):
                check(0.2 < float(r[key]) <= 1.0, f"{r['point']}: {key} = {r[key]}")
            check(float(r["peer_acc_min"]) <= float(r["peer_acc_mean"]), f"{r['point']}: min > mean")
            check(float(r["bytes_per_peer"]) > 0, f"{r['point']}: no bytes sent")
            check(float(r["consensus_distance"]) >= 0, f"{r['point']}: consensus distance")
            check(r["time_to_target_s"] != "" and float(r["bytes_to_target"]) > 0,
                  f"{r['point']}: target 30% not reached: {r}")
            summary = json.load(open(os.path.join(out, r["point"], "summary.json")))
            accs = [p["test_accuracy"] for p in summary["peers"]]
            check(abs(float(r["peer_acc_mean"]) - sum(accs) / len(accs)) < 1e-9, "mean accuracy differs from summary.json")
            # The config sets no eval.target_accuracy: the report had murmur-peer --summarize add
            # the sweep's target to summary.json, keeping the launcher's wall time.
            tta = summary.get("time_to_accuracy") or {}
            check(tta.get("target") == 0.3 and tta.get("time_s") is not None,
                  f"{r['point']}: summary.json time_to_accuracy {tta}")
            check(float(r["slowest_to_target_s"]) == tta["time_s"] and float(r["bytes_total_to_target"]) > 0,
                  f"{r['point']}: slowest_to_target_s {r['slowest_to_target_s']}, summary.json {tta}")
            check(summary["wall_time_s"] > 0, f"{r['point']}: wall time {summary['wall_time_s']}")
        check(rows[0]["spectral_gap"] != "" or not args.topo, "ring: no spectral gap")

        report = open(os.path.join(out, "report.md")).read()
        for pid in ("ring", "local_H3"):
            check(f"| {pid} |" in report, f"report.md has no row for {pid}")
        pngs = ["accuracy_vs_epoch.png", "accuracy_vs_bytes.png", "consensus_vs_step.png"]
        if args.topo and shutil.which("dot"):
            pngs.append("graph_ring_n4.png")
        for png in pngs:
            path = os.path.join(out, png)
            check(os.path.exists(path) and is_png(path), f"{png} missing or not a PNG")
            check(f"({png})" in report or f'src="{png}"' in report, f"report.md does not show {png}")

        for pid in ("ring", "local_H3"):
            series = json.load(open(os.path.join(out, pid, "consensus.json")))["series"]
            check(len(series) >= 5 and series[0] == [0, 0.0], f"{pid}: consensus series {series[:3]}")
            check(any(d > 0 for _, d in series), f"{pid}: consensus distance always 0")
            left = [f for d in os.listdir(os.path.join(out, pid)) if d.startswith("rank")
                    for f in os.listdir(os.path.join(out, pid, d)) if f.endswith(".safetensors")]
            check(not left, f"{pid}: checkpoints left: {left}")

        second = run(cmd)
        check("2 already done" in second, f"second run did not skip: {second}")

        before = open(os.path.join(out, "summary.csv")).read()
        for f in ["summary.csv", "report.md"] + pngs:
            os.remove(os.path.join(out, f))
        run([SWEEP, "--report", out, "--topo", args.topo or "/nonexistent"])
        check(open(os.path.join(out, "summary.csv")).read() == before, "--report wrote another summary.csv")
        for png in pngs:
            check(is_png(os.path.join(out, png)), f"--report did not redraw {png}")

        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write(TINY + "grdi: {}\n")
        r = subprocess.run([SWEEP, bad, "--list"], capture_output=True, text=True)
        check(r.returncode == 2 and "grdi" in r.stderr, f"unknown key not reported: {r.stderr}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("sweep_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

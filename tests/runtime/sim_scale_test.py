#!/usr/bin/python3
"""Large worlds, as murmur-sim runs them (threads over the inproc transport): every averaging
algorithm and the final average must work with 1024 ranks.

1. 1024 peers, D-PSGD on the exponential graph (logistic regression, 2 steps of synthetic data):
   the run ends, and every one of the 1024 ranks is in the final average. With the ring's 2046
   steps for the final average, or with inproc waking every thread for each message, it does
   not end within its bound.
2. Every algorithm with 200 peers (128 + 72: ranks that fold in and take the result back), 3
   steps: each run ends with all 200 in the final average; the exact ones (allreduce, local_sgd,
   diloco) with the same model on every peer.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from launch_util import Checks  # noqa: E402

check = Checks("sim_scale_test")
ALGORITHMS = ("dpsgd", "sgp", "adpsgd", "pairwise", "choco", "easgd", "allreduce", "local_sgd",
              "diloco")
EXACT = ("allreduce", "local_sgd", "diloco")


def simulate(sim, d, n, algorithm, steps, limit_s):
    out = os.path.join(d, f"{algorithm}-{n}")
    cmd = [sim, "-n", str(n), "-c", os.path.join(ROOT, "configs", "exponential.yaml"),
           "--set", f"algorithm.name={algorithm}", "--set", "data.name=synthetic",
           "--set", "model.name=logreg", "--set", f"train.max_steps={steps}", "-o", out]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        check(False, f"{algorithm} with {n} peers: not done within {limit_s} s")
        return None
    last = p.stdout.strip().splitlines()[-2:] if p.stdout.strip() else []
    print(f"{algorithm} x {n}: exit {p.returncode}: {' | '.join(last)}", flush=True)
    if not check(p.returncode == 0, f"{algorithm} with {n} peers exited {p.returncode}: "
                                    f"{p.stderr[-2000:]}"):
        return None
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def check_summary(summary, n, algorithm):
    what = f"{algorithm} with {n} peers"
    check(summary["world_size"] == n, f"{what}: world_size {summary['world_size']}")
    check(len(summary["peers"]) == n, f"{what}: {len(summary['peers'])} peers in summary.json")
    check(summary["average_model"]["ranks"] == list(range(n)),
          f"{what}: the final average holds {len(summary['average_model']['ranks'])} ranks")
    distance = summary["consensus_distance"]
    check(math.isfinite(distance), f"{what}: consensus distance {distance}")
    if algorithm in EXACT:
        # The same model on every peer; the final mean of 200 equal floats only rounds.
        losses = {p["test_loss"] for p in summary["peers"]}
        check(len(losses) == 1, f"{what}: the peers' models differ: test losses {sorted(losses)[:4]}")
        check(distance < 1e-5, f"{what}: an exact average left a distance of {distance}")
    else:
        check(distance > 0, f"{what}: gossip left no distance at all ({distance})")
    # Synthetic data: 10 classes, so 10% is chance.
    accuracy = summary["average_model"]["test_accuracy"]
    check(accuracy > 0.15, f"{what}: average model at {accuracy:.1%}")


def main():
    sim = sys.argv[sys.argv.index("--sim") + 1]
    scale = float(sys.argv[sys.argv.index("--time-scale") + 1]) if "--time-scale" in sys.argv else 1
    with tempfile.TemporaryDirectory(prefix="murmur-sim-scale-") as d:
        # About 26 s here idle, both cores.
        summary = simulate(sim, d, 1024, "dpsgd", 2, 150 * scale)
        if summary is not None:
            check_summary(summary, 1024, "dpsgd")
        for algorithm in ALGORITHMS:
            summary = simulate(sim, d, 200, algorithm, 3, 60 * scale)
            if summary is not None:
                check_summary(summary, 200, algorithm)
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The cost model's figure: measured against predicted comm_s per peer, one point per sweep
point of experiments/cost_model.yaml, from the sweep's summary.csv (Debian's python3-matplotlib).

    experiments/cost_model_plot.py runs/sweeps/cost_model    # writes predicted_vs_measured.png there
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "runs/sweeps/cost_model"
    with open(os.path.join(out, "summary.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r.get("predicted_comm_s") and r.get("mean_comm_s")]
    if not rows:
        sys.exit(f"{out}/summary.csv: no point has a prediction (run build/bin/murmur-bench fit first)")
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    for network, marker in (("loopback", "o"), ("1gbit_5ms", "s")):
        pts = [r for r in rows if r["network"] == network]
        ax.scatter([float(r["predicted_comm_s"]) for r in pts], [float(r["mean_comm_s"]) for r in pts],
                   marker=marker, label=network)
        for r in pts:
            ax.annotate(r["algorithm"], (float(r["predicted_comm_s"]), float(r["mean_comm_s"])),
                        fontsize=6, xytext=(3, 2), textcoords="offset points")
    lo = min(min(float(r["predicted_comm_s"]), float(r["mean_comm_s"])) for r in rows) / 1.5
    hi = max(max(float(r["predicted_comm_s"]), float(r["mean_comm_s"])) for r in rows) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="measured = predicted")
    ax.fill_between([lo, hi], [lo * 0.75, hi * 0.75], [lo * 1.25, hi * 1.25], color="grey", alpha=0.15,
                    label="within 25%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted comm_s per peer (alpha-beta model)")
    ax.set_ylabel("measured comm_s per peer")
    ax.set_title("4 peers over tcp, 470 steps", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, "predicted_vs_measured.png")
    fig.savefig(path, dpi=120)
    print(path)


if __name__ == "__main__":
    main()

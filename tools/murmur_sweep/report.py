"""The report of a sweep, from its run directories alone: summary.csv, report.md and the plots.

Per point: final test accuracy of the peers (mean, min) and of the average model, consensus
distance, bytes sent per peer, wall time, and the time, bytes and epochs to the target
accuracy (by the mean over peers, and by the slowest peer: summary.json's time_to_accuracy).
"To target" is the first evaluation at which the MEAN test accuracy over the peers reaches the
target; its time is the slowest peer's time_s at that evaluation (when all had got there) and
its bytes the mean over peers of bytes_sent, interpolated from the step lines. A point whose
summary.json has no time_to_accuracy for the sweep's target gets it from
`murmur-peer --summarize DIR --target X` (runtime/summary.cc), which rewrites that summary.json.
The sweep's definition is copied into the directory as sweep.yaml, so --report DIR needs nothing else.
"""
import csv
import json
import os
import subprocess
import sys

from . import checkpoints, plots, spec

COLUMNS = ["point", "peers", "peer_acc_mean", "peer_acc_min", "avg_model_acc", "consensus_distance",
           "bytes_per_peer", "wall_time_s", "time_to_target_s", "bytes_to_target", "epochs_to_target",
           "slowest_to_target_s", "bytes_total_to_target", "spectral_gap", "mean_wait_s",
           "mean_comm_s", "predicted_comm_s", "comm_ratio", "staleness_p50", "staleness_max"]


def read_metrics(path):
    """(eval lines by step, step lines by step) of one rank; a resumed run's repeats: last wins."""
    evals, steps = {}, {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # a line cut by a kill
                (evals if obj.get("kind") == "eval" else steps)[obj.get("step")] = obj
    except OSError:
        pass
    return evals, steps


def bytes_at(steps, step):
    """bytes_sent at `step`, linear between the step lines around it (0 at step 0)."""
    known = sorted((s, l.get("bytes_sent", 0)) for s, l in steps.items() if s is not None)
    prev = (0, 0)
    for s, b in known:
        if s >= step:
            if s == prev[0]:
                return b
            return prev[1] + (b - prev[1]) * (step - prev[0]) / (s - prev[0])
        prev = (s, b)
    return prev[1]


def curves(run_dir, world_size):
    """Evaluations present on every rank: [{step, epoch, acc_mean, acc_min, acc_max, time_s, bytes}]."""
    ranks = [read_metrics(os.path.join(run_dir, f"rank{r}", "metrics.jsonl")) for r in range(world_size)]
    if not ranks or not all(e for e, _ in ranks):
        return []
    common = set.intersection(*(set(e) for e, _ in ranks))
    out = []
    for step in sorted(s for s in common if s is not None):
        accs = [e[step]["test_accuracy"] for e, _ in ranks]
        out.append({"step": step, "epoch": ranks[0][0][step]["epoch"],
                    "acc_mean": sum(accs) / len(accs), "acc_min": min(accs), "acc_max": max(accs),
                    "time_s": max(e[step]["time_s"] for e, _ in ranks),
                    "bytes": sum(bytes_at(s, step) for _, s in ranks) / len(ranks)})
    return out


def read_summary(run_dir):
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) else None


def with_target(run_dir, s, target, peer):
    """The summary `s` of run_dir, rewritten by murmur-peer with time_to_accuracy for `target`
    where it has none for it (the wall time and exit codes it records are kept); `s` itself
    when it has, or when it cannot be rewritten (a warning says why)."""
    if target is None or (s.get("time_to_accuracy") or {}).get("target") == target:
        return s
    gone = [p.get("rank") for p in s.get("peers", []) if isinstance(p, dict) and not p.get("failed") and
            not os.path.exists(os.path.join(run_dir, f"rank{p.get('rank')}", "result.json"))]
    if not peer or not os.path.exists(peer):
        why = "no murmur-peer (--peer)"
    elif gone:  # rewritten now, those peers would read as failed
        why = f"the result.json of rank {', '.join(map(str, gone))} is gone"
    else:
        r = subprocess.run([peer, "--summarize", run_dir, "--target", repr(float(target))],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return read_summary(run_dir) or s
        why = (r.stderr or r.stdout).strip()
    print(f"murmur-sweep: {run_dir}: no time to {target} in summary.json: {why}", file=sys.stderr)
    return s


def point_row(sweep, point, run_dir, topo, peer=None):
    row = {"point": point.id, **point.axes}
    s = read_summary(run_dir)
    if s is None:
        return row, [], []
    s = with_target(run_dir, s, sweep.target, peer)
    peers = [p for p in s.get("peers", []) if "test_accuracy" in p]
    n = s.get("world_size", len(peers))
    row["peers"] = n
    if peers:
        accs = [p["test_accuracy"] for p in peers]
        waits = [p["wait_s"] for p in peers if p.get("wait_s") is not None]
        if waits:
            row["mean_wait_s"] = sum(waits) / len(waits)  # blocked on neighbors, per peer
        comms = [p["comm_s"] for p in peers if p.get("comm_s") is not None]
        if comms:
            row["mean_comm_s"] = sum(comms) / len(comms)
        row.update(peer_acc_mean=sum(accs) / len(accs), peer_acc_min=min(accs),
                   bytes_per_peer=sum(p.get("bytes_sent", 0) for p in peers) / len(peers),
                   steps=max(p.get("steps", 0) for p in peers))  # for the plots, not the table
    if "average_model" in s:
        row["avg_model_acc"] = s["average_model"]["test_accuracy"]
        row["consensus_distance"] = s.get("consensus_distance")
    row["wall_time_s"] = s.get("wall_time_s")
    # The alpha-beta model's comm_s (runtime/comm_prediction.h), where a cost model was fitted,
    # and measured / predicted.
    pred = s.get("comm_prediction") or {}
    if pred.get("predicted_comm_s"):
        row["predicted_comm_s"] = pred["predicted_comm_s"]
        if pred.get("ratio") is not None:
            row["comm_ratio"] = pred["ratio"]
    # The ages of the models averaged (adpsgd, dpsgd with max_staleness), in local steps.
    ex = s.get("exchanges") or {}
    row.update({k: ex[k] for k in ("staleness_p50", "staleness_max") if ex.get(k) is not None})
    cv = curves(run_dir, n)
    if sweep.target is not None:
        hit = next((c for c in cv if c["acc_mean"] >= sweep.target), None)
        if hit:
            row.update(time_to_target_s=hit["time_s"], bytes_to_target=hit["bytes"],
                       epochs_to_target=hit["epoch"])
    # Time to accuracy (runtime/summary.h): the slowest peer's accuracy decides, bytes summed over peers.
    t = s.get("time_to_accuracy") or {}
    if sweep.target is not None and t.get("target") != sweep.target:
        t = {}  # another target's figures: not this sweep's
    if t.get("time_s") is not None:
        row.update(slowest_to_target_s=t["time_s"], bytes_total_to_target=t["bytes_sent"])
    cfg = s.get("config", {})
    if topo and topo.uses_graph(cfg.get("algorithm", {}).get("name")):
        gap = topo.spectral_gap(cfg["topology"]["graph"], n, cfg["topology"].get("weights", "uniform"))
        if gap is not None:
            row["spectral_gap"] = gap
    return row, cv, checkpoints.consensus_series(run_dir, write=True)


def fmt(key, v):
    if v is None or v == "":
        return "-"
    if key.endswith("acc") or "acc_" in key:
        return f"{100 * v:.2f}%"
    if key.startswith("bytes"):
        for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if v >= div:
                return f"{v / div:.2f} {unit}"
        return f"{v:.0f} B"
    if key == "comm_ratio":
        return f"{v:.2f}x"
    if key == "consensus_distance":
        return f"{v:.3g}"
    if isinstance(v, float):
        return f"{v:.1f}" if key.endswith("_s") or key.startswith("epochs") else f"{v:.4g}"
    return str(v)


def write_markdown(path, sweep, rows, figures, missing):
    cols = [c for c in ["point"] + [a for a in sweep.axes if a not in ("point", "world.size")] + COLUMNS[1:]
            if any(r.get(c) not in (None, "") for r in rows)]
    lines = [f"# Sweep `{sweep.name}`", "",
             f"{len(rows)} points from `{os.path.basename(sweep.path)}`"
             f" (runner: {sweep.runner}). Accuracies are final test accuracies; "
             "bytes are sent per peer; the consensus distance is mean_i ||x_i - mean x||_2 at the end."]
    if sweep.target is not None:
        lines.append(f"Target accuracy {100 * sweep.target:.1f}%: the first evaluation where the mean over "
                     "peers reaches it; its time is the slowest peer's, its bytes the mean per peer. "
                     "`slowest_to_target_s` and `bytes_total_to_target` (summary.json's time_to_accuracy): "
                     "the first evaluation where every peer has reached it, from the run's start on one "
                     "clock, and the bytes sent by all peers until then.")
    if missing:
        lines.append(f"Not done (no complete summary.json): {', '.join(missing)}.")
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c, r.get(c)) for c in cols) + " |")
    lines.append("")
    graphs = [(t, png) for t, png in figures if png.startswith("graph_")]
    for title, png in figures:
        if (title, png) not in graphs:
            lines += [f"## {title}", "", f"![{title}]({png})", ""]
    if graphs:  # small drawings, side by side
        lines += ["## Topologies (murmur-topo --dot)", "",
                  " ".join(f'<img src="{png}" alt="{t}" title="{t}" height="220">' for t, png in graphs), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def build(out, sweep=None, topo=None, peer=None):
    """Writes summary.csv, report.md and the PNGs into `out`; returns the rows. `peer`: murmur-peer,
    to give the points' summaries the sweep's target (without it, the figures they have)."""
    if sweep is None:
        sweep = spec.load(os.path.join(out, "sweep.yaml"))
    rows, data, missing = [], {}, []
    for p in sweep.points:
        run_dir = os.path.join(out, p.id)
        row, cv, cons = point_row(sweep, p, run_dir, topo, peer)
        if "peers" not in row:
            missing.append(p.id)
            continue
        rows.append(row)
        data[p.id] = (p, row, cv, cons)
    cols = ["point"] + [a for a in sweep.axes if a not in ("point", "world.size")] + COLUMNS[1:]
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in cols})
    figures = plots.draw_all(out, sweep, data, topo)
    write_markdown(os.path.join(out, "report.md"), sweep, rows, figures, missing)
    if getattr(sweep, "report", None) == "network":
        from . import network_report
        network_report.write(out, sweep, rows)
    return rows

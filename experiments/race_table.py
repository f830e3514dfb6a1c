#!/usr/bin/env python3
"""The table of the race (experiments/race.yaml): per straggler (none; x1: every peer capped at
its share of the cores as in the straggler runs, none slower; x2; x4) and algorithm, the final
accuracy of the average model, the seconds until every peer reached 87% and 86% of test
accuracy, the same for every peer but the straggler, the run's wall time, the mean time a peer
spent blocked on its neighbors, and the staleness of the models averaged (adpsgd, dpsgd with
max_staleness); then each algorithm's time with a straggler over its time at x1.

Times are on one clock from the first peer's start of training (each eval line's unix_s), as
summary.json's time_to_accuracy counts them; a target never reached is '-'. Reads the per-rank
metrics.jsonl of the sweep's run directories, so it runs before the sweep's raw files are dropped:

    experiments/race_table.py runs/sweeps/race > experiments/results/race/race_table.md

Standard library only (any python3).
"""
import json
import os
import sys

TARGETS = (0.87, 0.86)
STRAGGLERS = ("none", "x1", "x2", "x4")


def evals(run_dir, rank):
    out = []
    try:
        with open(os.path.join(run_dir, f"rank{rank}", "metrics.jsonl")) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if j.get("kind") == "eval" and j.get("unix_s"):
                    out.append(j)
    except OSError:
        pass
    return out


def time_to(per_rank, ranks, start, target):
    """Seconds from `start` until every rank of `ranks` has reached `target`, or None."""
    last = 0.0
    for r in ranks:
        hit = next((e for e in per_rank[r] if e["test_accuracy"] >= target), None)
        if hit is None:
            return None
        last = max(last, hit["unix_s"] - start)
    return last


def row(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    n = s["world_size"]
    per_rank = [evals(run_dir, r) for r in range(n)]
    if not all(per_rank):
        return None
    start = min(e["unix_s"] - e["time_s"] for es in per_rank for e in es)
    slow = {int(r) for r in (s["config"].get("network", {}).get("stragglers") or {})}
    others = [r for r in range(n) if r not in slow]
    out = {"acc": s.get("average_model", {}).get("test_accuracy"), "wall": s.get("wall_time_s")}
    for t in TARGETS:
        out[f"all{t}"] = time_to(per_rank, range(n), start, t)
        out[f"others{t}"] = time_to(per_rank, others, start, t)
    # From the moment every peer but the straggler had trained 20 steps: a slow peer is slow to
    # start too (its data and model load at its share of the cores), and the peers wait for each
    # other before the first step.
    first = [next((e["unix_s"] - start for e in per_rank[r] if e["step"] >= 20), None) for r in others]
    if None not in first and out["others0.86"] is not None:
        out["trained0.86"] = out["others0.86"] - max(first)
    else:
        out["trained0.86"] = None
    waits = [p.get("wait_s", 0) for p in s["peers"]]
    out["wait"] = sum(waits) / len(waits)
    ex = s.get("exchanges") or {}
    out["staleness"] = (f"{ex['staleness_p50']} / {ex['staleness_max']}"
                        if ex.get("staleness_p50") is not None else "-")
    return out


def fmt(v, unit=" s"):
    return "-" if v is None else f"{v:.0f}{unit}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    runs = {}
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(os.path.join(d, "summary.json")):
            continue
        # Point ids: n8_1gbit_native_<straggler>_<algorithm>.
        parts = name.split("_", 4)
        if len(parts) == 5 and parts[3] in STRAGGLERS:
            r = row(d)
            if r:
                runs[(parts[3], parts[4])] = r
    algorithms = list(dict.fromkeys(a for _, a in sorted(runs, key=lambda k: k[1])))
    head = ["straggler", "algorithm", "average model", "all to 87%", "all but the straggler to 87%",
            "all to 86%", "all but the straggler to 86%", "the same from their step 20", "wall time", "mean wait", "staleness p50 / max"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for st in STRAGGLERS:
        for a in algorithms:
            r = runs.get((st, a))
            if r is None:
                continue
            acc = "-" if r["acc"] is None else f"{100 * r['acc']:.2f}%"
            print(f"| {st} | {a} | {acc} | {fmt(r['all0.87'])} | {fmt(r['others0.87'])} | "
                  f"{fmt(r['all0.86'])} | {fmt(r['others0.86'])} | {fmt(r['trained0.86'])} | {fmt(r['wall'])} | "
                  f"{fmt(r['wait'])} | {r['staleness']} |")
    # Each algorithm's time with a straggler over its time with none, every peer but the
    # straggler, against x1: every peer capped at its share as in the straggler runs.
    print()
    print("| algorithm | x2 / x1, to 86% | x4 / x1, to 86% | x2 / x1, to 86% from step 20 | "
          "x4 / x1, to 86% from step 20 | x2 / x1, to 87% | x4 / x1, to 87% |")
    print("|---|---|---|---|---|---|---|")
    for a in algorithms:
        cells = []
        for key in ("others0.86", "trained0.86", "others0.87"):
            free = (runs.get(("x1", a)) or {}).get(key)
            for st in ("x2", "x4"):
                v = (runs.get((st, a)) or {}).get(key)
                cells.append("-" if not free or v is None else f"{v / free:.2f}x")
        print("| " + " | ".join([a] + cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time to accuracy: where the slowest peer first reaches a target test accuracy.

The same rule as runtime/summary.cc (time_to_accuracy): at the first evaluation step present
on every rank whose MIN test accuracy over the ranks reaches the target, the wall time from the
earliest peer's training start to the last peer's evaluation there (the eval lines' unix_s, one
clock for all peers; the slowest peer's own time_s where unix_s is absent) and the bytes sent,
summed over the ranks. Used by tools/murmur-launch (summary.json) and the sweep report.
"""
import json
import math
import os


def read_evals(path):
    """{step: eval line} of one metrics.jsonl; a resumed run's repeats: the last wins."""
    evals = {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # a line cut by a kill
                if isinstance(obj, dict) and obj.get("kind") == "eval" and obj.get("step") is not None:
                    evals[obj["step"]] = obj
    except OSError:
        pass
    return evals


def compute(per_rank, target):
    """per_rank: [{step: eval line}]. Returns {"target", "step", "time_s", "bytes_sent",
    "accuracy"}, the last four None when the target is never reached."""
    out = {"target": target, "step": None, "time_s": None, "bytes_sent": None, "accuracy": None}
    if not per_rank or not target or target <= 0 or not all(per_rank):
        return out
    lines = [e for r in per_rank for e in r.values()]
    shared_clock = all(isinstance(e.get("unix_s"), (int, float)) and e["unix_s"] > 0 for e in lines)
    start = min(e["unix_s"] - e.get("time_s", 0) for e in lines) if shared_clock else 0
    for step in sorted(set.intersection(*(set(r) for r in per_rank))):
        accs = [r[step].get("test_accuracy") for r in per_rank]
        if any(a is None or (isinstance(a, float) and math.isnan(a)) for a in accs):
            continue  # a diverged peer reaches nothing
        if min(accs) < target:
            continue
        t = max((r[step]["unix_s"] - start) if shared_clock else r[step].get("time_s", 0) for r in per_rank)
        out.update(step=step, time_s=t, bytes_sent=sum(r[step].get("bytes_sent", 0) for r in per_rank),
                   accuracy=min(accs))
        return out
    return out


def of_run(run_dir, world_size, target):
    """compute() over run_dir/rank<r>/metrics.jsonl for every rank."""
    return compute([read_evals(os.path.join(run_dir, f"rank{r}", "metrics.jsonl")) for r in range(world_size)],
                   target)

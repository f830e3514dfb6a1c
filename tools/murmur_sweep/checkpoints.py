"""Consensus distance over training, measured after the fact from the peers' checkpoints.

The peers log no consensus figure per step (that would cost an allreduce), but each writes
rank<r>/ckpt-<step>.safetensors every checkpoint.every_steps steps. At a step where every rank
has one, the distance is mean_i ||x_i - mean_j x_j||_2 over the model's parameters: the same
figure the runtime reports at the end. The series goes to <run dir>/consensus.json, so the
report needs only that file once the checkpoints are gone. numpy only (safetensors parsed by hand).
"""
import json
import os
import re
import struct

CKPT = re.compile(r"ckpt-(\d+)\.safetensors$")
# Buffers (batch-norm statistics) are not parameters: the runtime's arena does not hold them.
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


def read_params(path):
    """The model's parameters of one checkpoint as one flat float64 vector, in header order."""
    import numpy as np
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    parts = []
    for name in sorted(k for k in header if k != "__metadata__"):
        if name.startswith("murmur.") or name.endswith(BUFFER_SUFFIXES):
            continue
        info = header[name]
        if info["dtype"] != "F32":
            continue
        b, e = info["data_offsets"]
        parts.append(np.frombuffer(data[b:e], dtype=np.float32).astype(np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


def rank_dirs(run_dir):
    dirs = [d for d in os.listdir(run_dir) if re.fullmatch(r"rank\d+", d)]
    return [os.path.join(run_dir, d) for d in sorted(dirs, key=lambda d: int(d[4:]))]


def consensus_series(run_dir, write=False):
    """[(step, distance)] from the checkpoints (step 0: identical initial models, distance 0),
    read from consensus.json when the checkpoints are gone; [] when neither is there."""
    cached = os.path.join(run_dir, "consensus.json")
    ranks = rank_dirs(run_dir) if os.path.isdir(run_dir) else []
    steps = None
    for d in ranks:
        mine = {int(m.group(1)) for f in os.listdir(d) if (m := CKPT.search(f))}
        steps = mine if steps is None else steps & mine
    if len(ranks) < 2 or not steps:
        try:
            with open(cached) as f:
                return [tuple(x) for x in json.load(f)["series"]]
        except (OSError, ValueError, KeyError):
            return []
    import numpy as np
    series = [(0, 0.0)]
    for step in sorted(steps):
        xs = np.stack([read_params(os.path.join(d, f"ckpt-{step:010d}.safetensors")) for d in ranks])
        mean = xs.mean(axis=0)
        series.append((step, float(np.linalg.norm(xs - mean, axis=1).mean())))
    if write:
        tmp = cached + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"definition": "mean over peers of ||x_i - mean x||_2, from rank<r>/ckpt-<step>",
                       "series": series}, f)
            f.write("\n")
        os.replace(tmp, cached)
    return series


def remove(run_dir):
    """Deletes the checkpoints of a finished point (they are large and the report is done)."""
    for d in rank_dirs(run_dir):
        for f in os.listdir(d):
            if f.endswith(".safetensors"):
                os.remove(os.path.join(d, f))

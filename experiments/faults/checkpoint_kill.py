#!/usr/bin/python3
"""checkpoint_kill.py: a checkpoint writer killed with SIGKILL at random moments; the last good
checkpoint must always load.

    experiments/faults/checkpoint_kill.py [--trials 100]

Each trial starts one murmur-peer that writes a checkpoint after every step (a 16 MB model, so
that a kill often lands mid-write), kills it with SIGKILL after a random delay, then checks that
(1) the newest checkpoint file there loads (murmur-peer --eval-checkpoint) and (2) resuming
(the same command again, stopped once it has loaded) starts from a checkpoint, not from scratch. Prints the
count of trials where either failed, and how many kills left a temp file behind (a write that was
cut short: it must never be mistaken for a checkpoint). Exits nonzero on any failure.
"""
import argparse
import glob
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = """run: {threads: 1, log_every: 1000}
data:
  name: synthetic
  synthetic: {train_size: 4096, test_size: 256, height: 8, width: 8}
model: {hidden: [2048, 2048]}
train: {epochs: 1000, batch_size: 16}
eval: {every_steps: 1000000}
checkpoint: {every_steps: 1, keep: 2}
"""


def resumes(cmd):
    """True iff the same command starts from a checkpoint (it is stopped once it says so)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = False
    deadline = time.time() + 60
    for line in p.stdout:
        if "resumed from" in line:
            seen = True
            break
        if "error" in line or time.time() > deadline:
            break
    p.kill()
    p.wait()
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--peer", default=os.path.join(ROOT, "build/bin/murmur-peer"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bad, torn, steps_seen = 0, 0, []
    with tempfile.TemporaryDirectory(prefix="murmur-ckill-") as tmp:
        config = os.path.join(tmp, "config.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        for trial in range(args.trials):
            out = os.path.join(tmp, f"t{trial}")
            cmd = [args.peer, "--config", config, "--world-size", "1", "--out", out]
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Wait for the first checkpoint, then kill at a random moment of the writes after it.
            deadline = time.time() + 60
            while not glob.glob(os.path.join(out, "rank0", "ckpt-*.safetensors")) and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.5))
            p.kill()
            p.wait()
            rank_dir = os.path.join(out, "rank0")
            torn += any(".tmp" in n for n in os.listdir(rank_dir))
            ckpts = sorted(glob.glob(os.path.join(rank_dir, "ckpt-*.safetensors")),
                           key=lambda f: int(re.search(r"ckpt-(\d+)", f).group(1)))
            ok = bool(ckpts)
            if ok:
                newest = ckpts[-1]
                steps_seen.append(int(re.search(r"ckpt-(\d+)", newest).group(1)))
                e = subprocess.run([args.peer, "--config", config, "--eval-checkpoint", newest],
                                   capture_output=True, text=True)
                ok = e.returncode == 0
                ok = ok and resumes(cmd)
            if not ok:
                bad += 1
                print(f"trial {trial}: FAILED (checkpoints: {ckpts})", flush=True)
            subprocess.run(["rm", "-rf", out])
    print(f"{args.trials} trials: {bad} failed to load the last good checkpoint; {torn} kills "
          f"left a partial temp file (ignored by resume); killed after step "
          f"{min(steps_seen) if steps_seen else '-'}..{max(steps_seen) if steps_seen else '-'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Ctrl-C on a local run: tools/murmur-launch, 4 peers (D-PSGD on a ring, steps of about a
millisecond), SIGINT once they train. Every peer writes a checkpoint and stops (result.json:
stopped_early), the launcher says so and exits 130, not "failed peers"; run again, the same
command resumes every peer from its checkpoint's step. Twice, since the race it guards against
is one of timing.

Before: the peer that got the signal first stopped at a step boundary and closed its
connections while its neighbors were still in that step's exchange; they failed with "closed the
connection" and wrote no checkpoint, so about half the peers of a run lost their state (3 runs
of 3 on this machine). Python standard library only.
"""
import glob
import os
import re
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from launch_util import ENDLESS, Checks, Launched, ring_config, result, wait_gone, wait_training  # noqa: E402

CONFIG = ring_config("interrupt", steps=ENDLESS)

check = Checks("interrupt_test")


def interrupt(cmd, out):
    """Starts cmd, SIGINTs it once every peer trains; returns (exit code, output)."""
    p = Launched(cmd)
    if not wait_training(out):
        text = p.kill()
        wait_gone(out, 0)
        return None, text
    p.proc.send_signal(signal.SIGINT)
    text = p.finish(60)
    check(wait_gone(out, 10), "peers left running after the launcher exited")
    return p.returncode, text


def stopped_steps(out, what):
    """Each rank's step at its stop, checked to be a stop with a checkpoint."""
    steps = []
    for r in range(4):
        res = result(out, r)
        ckpts = sorted(glob.glob(os.path.join(out, f"rank{r}", "ckpt-*.safetensors")))
        if check(res and res["stopped_early"] and ckpts, f"{what}: rank {r}: result {res}, {len(ckpts)} checkpoints"):
            steps.append(int(re.search(r"ckpt-(\d+)", ckpts[-1]).group(1)))
    return steps


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    with tempfile.TemporaryDirectory(prefix="murmur-interrupt-") as d:
        config = os.path.join(d, "c.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        for attempt in (1, 2):
            out = os.path.join(d, f"run{attempt}")
            cmd = [os.path.join(ROOT, "tools", "murmur-launch"), config, "-n", "4", "--out", out, "--peer", peer]
            rc, text = interrupt(cmd, out)
            what = f"run {attempt}"
            check(rc == 128 + signal.SIGINT and "every peer wrote a checkpoint" in text and "failed peers" not in text,
                  f"{what}: launcher exited {rc}:\n{text[-3000:]}")
            steps = stopped_steps(out, what)
            if attempt == 2 or len(steps) != 4:
                continue
            # The same command again resumes every peer where it stopped. (Its metrics files are
            # moved aside first, so that the wait is for the new run's steps.)
            for r in range(4):
                m = os.path.join(out, f"rank{r}", "metrics.jsonl")
                os.replace(m, m + ".first")
            rc, text = interrupt(cmd, out)
            resumed = {int(m.group(1)): int(m.group(2)) for m in
                       re.finditer(r"rank (\d+): resumed from \S+ at step (\d+)", text)}
            check(resumed == dict(enumerate(steps)), f"resumed at {resumed}, want {dict(enumerate(steps))}")
            check(rc == 128 + signal.SIGINT, f"resumed run: launcher exited {rc}:\n{text[-3000:]}")
            stopped_steps(out, "resumed run")
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

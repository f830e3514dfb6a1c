#!/usr/bin/python3
"""Stragglers that are really slow: network.stragglers in quota mode, end to end (needs root and a
cgroup hierarchy with the cpu controller, v1 or v2; exits 77, CTest's skip, otherwise):
1. murmur-launch runs 2 peers (D-PSGD, synthetic data), rank 1 a 4x straggler: while they run,
   each peer's process is in its own cgroup; cpu_quota.json gives rank 0 its share of the cores
   (cores / 2) and rank 1 a quarter of it, and the kernel held rank 1 back (throttled periods);
   after the run no cgroup of the launcher's is left;
2. a straggler that comes and goes (straggler_steps [5, 15]), the peers in network namespaces:
   rank 1 starts at its share, drops to a quarter at step 5 and is back at step 15, as its log
   says, through the launcher's bind mount of the cgroups (ip netns exec hides /sys/fs/cgroup);
3. sleep mode makes no cgroup;
4. refusals: a program (-- PROGRAM) with a window of steps, which only murmur-peer switches;
   murmur-peer started by hand as a quota straggler (no launcher, no cgroup);
5. `murmur-netem cleanup` removes the cgroups of a launcher that died without (SIGKILL), nested
   ones too, and its bind mount, which is never taken for the hierarchy itself.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)

from launch_util import Checks, excerpt  # noqa: E402
from murmur_netem import cpu_quota  # noqa: E402

check = Checks("straggler_quota_test")
LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")

CONFIG = """\
run: {name: quota, log_every: 10, threads: 1}
world: {size: 2}
model: {name: mlp, hidden: [64]}
data: {name: synthetic, synthetic: {train_size: 2048, test_size: 256, noise: 2.5}}
train: {epochs: 1000, batch_size: 32, max_steps: 300, schedule: {name: constant}}
eval: {every_steps: 0}
algorithm: {name: dpsgd}
topology: {graph: ring}
network: {stragglers: {1: 4}}
"""


def ours(root, pid):
    return [d for d in os.listdir(root) if d.startswith(f"murmur-{pid}-")]


def whole_run(peer, cfg, tmp, root):
    out = os.path.join(tmp, "whole")
    p = subprocess.Popen([LAUNCH, "-n", "2", cfg, "--peer", peer, "--out", out],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    placed = {}
    deadline = time.time() + 60
    while p.poll() is None and len(placed) < 2 and time.time() < deadline:
        for base in ours(root, p.pid):
            for rank in range(2):
                try:
                    pids = open(os.path.join(root, base, f"rank{rank}", "cgroup.procs")).read().split()
                    for pid in pids:
                        argv = open(f"/proc/{pid}/cmdline").read().split("\0")
                        if "murmur-peer" in argv[0] and argv[argv.index("--rank") + 1] == str(rank):
                            placed[rank] = pid
                except (OSError, ValueError, IndexError):
                    pass
        time.sleep(0.02)
    text, _ = p.communicate(timeout=300)
    if not check(p.returncode == 0, f"2 peers, rank 1 a 4x quota straggler: exit {p.returncode}:\n{excerpt(text)}"):
        return
    check(sorted(placed) == [0, 1], f"each murmur-peer ran in its own rank's cgroup (seen: {placed})")
    check("CPU quotas: every peer" in text, "murmur-launch says it set CPU quotas")
    try:
        with open(os.path.join(out, "cpu_quota.json")) as f:
            peers = {p["rank"]: p for p in json.load(f)["peers"]}
    except (OSError, ValueError, KeyError) as e:
        check(False, f"cpu_quota.json: {e}")
        return
    share = len(os.sched_getaffinity(0)) / 2
    check(abs(peers[0]["cores"] - share) < 1e-3 and abs(peers[1]["cores"] - share / 4) < 1e-3,
          f"rank 0 has its share ({share} cores), rank 1 a quarter of it: {peers}")
    check(peers[1]["throttled_periods"] > 0 and peers[1]["throttled_s"] > 0,
          f"the kernel held the straggler back: {peers[1]}")
    print(f"straggler_quota_test: rank 1 throttled {peers[1]['throttled_s']} s in "
          f"{peers[1]['throttled_periods']} periods, rank 0 {peers[0]['throttled_s']} s")
    check(not ours(root, p.pid), "no cgroup of the run is left")
    summary = json.load(open(os.path.join(out, "summary.json")))
    check(all(r["steps"] == 300 for r in summary["peers"]), "both peers took all 300 steps")


def window(peer, cfg, tmp, root):
    out = os.path.join(tmp, "window")
    # In network namespaces (--network): ip netns exec's fresh /sys has no cgroups, and the peer
    # switches its quota through the launcher's bind mount of them.
    p = subprocess.run([LAUNCH, "-n", "2", cfg, "--peer", peer, "--out", out, "--set", "train.max_steps=30",
                        "--set", "network.straggler_steps=[5, 15]", "--network"],
                       capture_output=True, text=True, timeout=300)
    text = p.stdout + p.stderr
    if not check(p.returncode == 0, f"a straggler for steps 5-14: exit {p.returncode}:\n{excerpt(text)}"):
        return
    share = len(os.sched_getaffinity(0)) / 2
    slow = re.search(r"rank 1: straggler: from step 5, ([\d.]+) cores", text)
    back = re.search(r"rank 1: straggler: from step 15, ([\d.]+) cores", text)
    check(slow and abs(float(slow.group(1)) - share / 4) < 1e-3, "rank 1 drops to a quarter of its share at step 5")
    check(back and abs(float(back.group(1)) - share) < 1e-3, "rank 1 is back at its share at step 15")
    check("straggler: from step" not in "".join(line for line in text.splitlines(True) if "rank 0" in line),
          "rank 0 never changes its quota")
    peers = {p["rank"]: p for p in json.load(open(os.path.join(out, "cpu_quota.json")))["peers"]}
    check(abs(peers[1]["cores"] - share) < 1e-3, f"rank 1 starts at its share: {peers[1]}")
    views = [line.split()[1] for line in open("/proc/self/mounts") if line.split()[1].endswith("-cgroups")]
    check(not views, f"the bind mount of the run's cgroups is gone: {views}")


def sleep_mode(peer, cfg, tmp, root):
    out = os.path.join(tmp, "sleep")
    p = subprocess.Popen([LAUNCH, "-n", "2", cfg, "--peer", peer, "--out", out, "--set", "train.max_steps=20",
                          "--set", "network.straggler_mode=sleep"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    made = False
    while p.poll() is None:
        made = made or bool(ours(root, p.pid))
        time.sleep(0.02)
    text = p.stdout.read()
    check(p.returncode == 0 and "sleeps 3 x its compute time" in text,
          f"sleep mode runs, its straggler sleeping: exit {p.returncode}:\n{excerpt(text)}")
    check(not made and not os.path.exists(os.path.join(out, "cpu_quota.json")), "sleep mode makes no cgroup")


def refusals(peer, cfg, tmp):
    p = subprocess.run([LAUNCH, "-n", "2", cfg, "--peer", peer, "--out", os.path.join(tmp, "program"),
                        "--set", "network.straggler_steps=[2, 4]", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "a program's peers cannot switch their quota" in p.stderr,
          f"a program with straggler_steps is refused: exit {p.returncode}: {p.stderr.strip()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    p = subprocess.run([peer, "--config", cfg, "--rank", "1", "--world-size", "2", "--out", os.path.join(tmp, "hand"),
                        "--set", f"transport.rendezvous_dir={os.path.join(tmp, 'hand-rdv')}"],
                       capture_output=True, text=True, timeout=60, env=env)
    check(p.returncode != 0 and "rank 1 is a straggler in quota mode" in p.stdout + p.stderr
          and "tools/murmur-launch" in p.stdout + p.stderr,
          f"murmur-peer by hand as a quota straggler is refused: exit {p.returncode}: {(p.stdout + p.stderr)[-600:]}")


def leftovers(root):
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"murmur-{dead.pid}-7"
    os.makedirs(os.path.join(root, name, "rank0"))
    # Nested one level deeper, as a launcher that once took a run's bind mount for the hierarchy
    # left it: removed too, deepest first.
    os.makedirs(os.path.join(root, name, f"murmur-{dead.pid}-8", "rank1"))
    # The run's bind mount of its cgroups lists as a cgroup mount too: never the hierarchy.
    view = os.path.join(cpu_quota.VIEWS, f"{name}-cgroups")
    os.makedirs(view, exist_ok=True)
    subprocess.run(["mount", "--bind", os.path.join(root, name), view], check=True)
    found = cpu_quota.hierarchy()[1]
    check(found == root, f"the hierarchy is {root}, not a run's bind mount: {found}")
    p = subprocess.run([os.path.join(ROOT, "tools", "murmur-netem"), "cleanup"], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0 and name in p.stdout and not os.path.exists(os.path.join(root, name)),
          f"murmur-netem cleanup removes a dead launcher's cgroups: {p.stdout.strip()} {p.stderr.strip()}")
    check(not os.path.exists(view), f"murmur-netem cleanup removes a dead launcher's bind mount {view}")
    if os.path.ismount(view):  # the check failed: leave nothing behind
        subprocess.run(["umount", "-l", view])
    if os.path.isdir(view):
        os.rmdir(view)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer", required=True)
    args = parser.parse_args()
    if os.geteuid() != 0:
        check.skip("CPU quotas are cgroups, which only root makes")
    try:
        version, root = cpu_quota.hierarchy()
    except cpu_quota.QuotaError as e:
        check.skip(str(e))
    print(f"straggler_quota_test: cgroup {version} at {root}")
    with tempfile.TemporaryDirectory(prefix="murmur-quota-") as tmp:
        cfg = os.path.join(tmp, "quota.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        whole_run(args.peer, cfg, tmp, root)
        window(args.peer, cfg, tmp, root)
        sleep_mode(args.peer, cfg, tmp, root)
        refusals(args.peer, cfg, tmp)
        leftovers(root)
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The emulated network end to end (needs root and iproute2; exits 77, CTest's skip, otherwise):
1. two namespaces behind a 20 Mbit/s link: one TCP stream's goodput is within 25% of it;
   a link with 10 ms latency and 2 ms jitter: the median round trip is 20 ms (18-28);
   one with 5% loss: 5000 UDP datagrams, 3.8-6.2% lost (netem, or iptables and murmur-delay
   where the kernel has no netem);
   where murmur-delay makes the latency, each one reports the packets it held when stopped;
   1 MB messages across 100 Mbit/s and 10 ms arrive in the latency plus the bytes at TCP's
   goodput, within 25% (murmur-netem measure --message-bytes);
   2 peers (D-PSGD) across 20 ms latency, 5 ms jitter and 1% loss finish, and each step's
   exchange takes at least one 20 ms one-way trip (network.json has the delayers' reports);
2. tools/murmur-launch runs 2 peers across a 10 Mbit/s link (D-PSGD, synthetic data, rank 1 a
   2x straggler, its CPU quota's cgroup joined before its namespace): each peer listened on its namespace's 10.77 address, no rank sent faster than
   the link over the run, the bytes rank 0 (the one that waits on the link) sent over its
   communication time are within 25% of the link rate, summary.json has time_to_accuracy,
   network.json has each link's bytes, at least murmur's own count,
   and no namespace of the run is left;
3. a partition: 3 peers (D-PSGD on a ring, run.on_peer_failure: continue); once they train, the
   test takes rank 2's link down at the bridge. Both sides notice within the peer timeout, drop
   the other from their mixing weights and finish: ranks 0 and 1 together, rank 2 alone;
4. murmur-launch SIGKILLed mid-run: its reaper removes the namespaces, kills the peers and
   removes their CPU-quota cgroups;
5. not root: a clear error (when setpriv can drop root).
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SCALE = 1  # --time-scale: sanitizer builds stretch the bounds below (MURMUR_TEST_TIMEOUT_SCALE)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from murmur_netem import Network, NetemError  # noqa: E402
from murmur_netem import measure  # noqa: E402
from murmur_netem.network import list_namespaces  # noqa: E402

CONFIG = """\
run: {name: netem, log_every: 5, threads: 1}
model: {name: mlp, hidden: [256]}
data: {name: synthetic, synthetic: {train_size: 2048, test_size: 512, noise: 2.5}}
train: {epochs: 1, batch_size: 32, max_steps: 20, schedule: {name: constant}}
eval: {every_steps: 5, target_accuracy: 0.3}
algorithm: {name: dpsgd}
topology: {graph: ring}
network: {bandwidth: 10mbit, stragglers: {1: 2.0}}
"""


def fail(msg):
    print(f"netem_test: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print(f"netem_test: ok: {msg}")


def ours(pid):
    return [n for n in list_namespaces() if n.startswith(f"murmur-{pid}-")]


def link_goodput():
    with Network(2, bandwidth="20mbit") as net:
        r = measure.stream(net, 0, 1, 4_000_000)
        left = list(net.created)
    mbit = r["gbit_s"] * 1e3
    check(15 <= mbit <= 25, f"one TCP stream over a 20mbit link: {mbit:.1f} Mbit/s (within 25%)")
    check(not [n for n in left if n in list_namespaces()], "the link's namespaces are gone")


def message_delivery():
    """`murmur-netem measure --message-bytes`: 1 MB messages across 100 Mbit/s and 10 ms take the
    latency and the bytes at TCP's goodput (10 + 1e6 x 8 / 95.64e6 = 93.6 ms), within 25%. (The
    token bucket lets its 32 KiB burst go at once after each gap: 2.7 ms.)"""
    with Network(2, bandwidth="100mbit", latency="10ms") as net:
        times = measure.messages(net, 0, 1, 1_000_000, count=6, gap=0.15)
    median = sorted(times[1:])[len(times[1:]) // 2] * 1e3
    check(len(times) == 6 and 0.75 * 93.6 <= median <= 1.25 * 93.6,
          f"1 MB messages over 100mbit and 10ms: delivered in {median:.1f} ms (median of 5; 93.6 by the model)")


def can_impair():
    """Whether latency and loss can be made here (netem, or iptables and murmur-delay); says why not."""
    try:
        Network(1, latency="1ms", loss="1%").up().down()
        return True
    except NetemError as e:
        print(f"netem_test: skipped the latency and loss checks: {e}")
        return False


def impaired_links():
    with Network(2, latency="10ms", jitter="2ms") as net:
        how = net.mechanism
        rtts = sorted(measure.round_trips(net, 0, 1, count=50))
        if how == "netfilter":
            # Each murmur-delay says, when stopped, how many packets it held and how late it let
            # them go: 50 round trips are at least 50 packets each way.
            reports = net.stop_delayers()
            for rank in range(2):
                r = reports.get(rank, {})
                check(r.get("packets_passed", 0) >= 50 and r.get("packets_dropped") == 0 and
                      0 <= r.get("late_us_mean", -1) <= 1e3 * r.get("late_ms_max", -1),
                      f"rank {rank}'s murmur-delay reports what it held: {r}")
    median = rtts[len(rtts) // 2] * 1e3
    check(18 <= median <= 28, f"10 ms each way, 2 ms jitter ({how}): median round trip {median:.1f} ms "
                              f"(min {rtts[0] * 1e3:.1f}, max {rtts[-1] * 1e3:.1f})")
    with Network(2, loss="5%") as net:
        lost = 1 - measure.delivered(net, 0, 1, count=5000)
    # 5000 draws at 5%: one standard deviation is 0.31 points; the bounds are almost 4 of them.
    check(0.038 <= lost <= 0.062, f"5% loss ({how}): {lost * 100:.2f}% of 5000 datagrams lost")


def slow_lossy_peers(peer, tmp):
    """D-PSGD across 20 ms latency, 5 ms jitter and 1% loss: it finishes, and every exchange pays
    for the trip (an unshaped exchange of this MLP takes well under 5 ms here)."""
    cfg = os.path.join(tmp, "slow.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.replace("{bandwidth: 10mbit, stragglers: {1: 2.0}}",
                               "{latency: 20ms, jitter: 5ms, loss: 1%}"))
    out = os.path.join(tmp, "slow")
    p = subprocess.run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", cfg, "--peer", peer, "--out", out],
                       capture_output=True, text=True, timeout=180 * SCALE)
    if p.returncode != 0:
        fail(f"murmur-launch across latency and loss exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr}")
    check("latency 20ms, jitter 5ms, loss 1%" in p.stdout, "murmur-launch says it made the slow, lossy network")
    for rank in range(2):
        steps = [json.loads(line) for line in open(os.path.join(out, f"rank{rank}", "metrics.jsonl"))]
        steps = [s for s in steps if s.get("kind") == "step"]
        per_step = steps[-1]["comm_s"] / steps[-1]["step"]
        check(steps[-1]["step"] == 20 and per_step >= 0.015,
              f"rank {rank}: all 20 steps across the slow link, {per_step * 1e3:.0f} ms of communication per step")
    # network.json: where murmur-delay made the latency (no netem here), each peer's link says
    # how late its delayer let packets go: latency the link did not ask for.
    with open(os.path.join(out, "network.json")) as f:
        links = json.load(f)["peers"]
    if any("delayer" in link for link in links):
        for link in links:
            d = link.get("delayer", {})
            check(d.get("packets_passed", 0) > 0 and d.get("late_us_mean", -1) >= 0,
                  f"rank {link['rank']}'s network.json has its delayer's report: {d}")


def launch_two_peers(peer, tmp):
    cfg = os.path.join(tmp, "netem.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    out = os.path.join(tmp, "run")
    p = subprocess.run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", cfg, "--peer", peer, "--out", out],
                       capture_output=True, text=True, timeout=180 * SCALE)
    if p.returncode != 0:
        fail(f"murmur-launch over the emulated network exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr}")
    check(True, "murmur-launch over the emulated network exits 0")
    check("emulated network: 2 namespaces" in p.stdout, "murmur-launch says it made the network")
    check("rank 1: straggler: 1/2 of its CPU share" in p.stdout, "rank 1 says it is a straggler (a CPU quota)")
    addresses = "".join(open(f).read() for f in glob.glob(os.path.join(out, "rendezvous", "*")))
    check("10.77.0.1" in addresses and "10.77.0.2" in addresses, "the peers published their namespaces' addresses")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    t = s.get("time_to_accuracy") or {}
    check(t.get("target") == 0.3 and t.get("time_s") is not None and t.get("bytes_sent", 0) > 0,
          f"summary.json has time_to_accuracy {t}")
    # network.json: each peer's bytes over its link as the bridge counted them: at least what
    # murmur counted of its messages (headers and acknowledgements on top).
    with open(os.path.join(out, "network.json")) as f:
        links = json.load(f)["peers"]
    for peer_summary, link in zip(s["peers"], links):
        check(link["link_bytes_sent"] >= peer_summary["bytes_sent"] > 0,
              f"rank {link['rank']}: {link['link_bytes_sent']} bytes over its link, murmur sent {peer_summary['bytes_sent']}")
    last = {}
    for rank in range(2):
        with open(os.path.join(out, f"rank{rank}", "metrics.jsonl")) as f:
            for line in f:
                obj = json.loads(line)
                if obj.get("kind") == "step":
                    last[rank] = obj
        # Over the whole run no rank's bytes leave faster than the link lets them.
        run_mbit = last[rank]["bytes_sent"] * 8 / last[rank]["time_s"] / 1e6
        check(run_mbit <= 12.5, f"rank {rank}: {last[rank]['bytes_sent']} bytes in {last[rank]['time_s']:.2f} s: "
                                f"{run_mbit:.1f} Mbit/s, not above the 10mbit link")
    # Rank 0 is the one that waits on the link: rank 1 computes 2x slower, so the kernel has
    # rank 0's bytes across (and takes rank 1's into its send buffer) while rank 1 computes, and
    # rank 1's communication time is shorter than the transfer (13 Mbit/s "seen" under TSan).
    mbit = last[0]["bytes_sent"] * 8 / last[0]["comm_s"] / 1e6
    check(7.5 <= mbit <= 12.5, f"rank 0: {last[0]['bytes_sent']} bytes in {last[0]['comm_s']:.2f} s of "
                               f"communication: {mbit:.1f} Mbit/s on a 10mbit link (within 25%)")


def steps_done(out, rank):
    """The last step rank's metrics.jsonl reports (0 before the first)."""
    last = 0
    try:
        with open(os.path.join(out, f"rank{rank}", "metrics.jsonl")) as f:
            for line in f:
                obj = json.loads(line)
                if obj.get("kind") == "step":
                    last = obj["step"]
    except (OSError, ValueError):
        pass
    return last


def partition(peer, tmp):
    cfg = os.path.join(tmp, "partition.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.replace("max_steps: 20", "max_steps: 3000").replace("epochs: 1,", "epochs: 1000,")
                .replace("{bandwidth: 10mbit, stragglers: {1: 2.0}}", "{bandwidth: 1gbit}")
                .replace("every_steps: 5", "every_steps: 1000"))
    out = os.path.join(tmp, "partition")
    p = subprocess.Popen([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "3", cfg, "--peer", peer, "--out", out,
                          "--keep-going", "--set", f"transport.peer_timeout_ms={3000 * SCALE}",
                          "--set", "run.log_every=1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 90 * SCALE
        while time.time() < deadline and min(steps_done(out, r) for r in range(3)) < 20 and p.poll() is None:
            time.sleep(0.1)
        cut_at = [steps_done(out, r) for r in range(3)]
        check(p.poll() is None and min(cut_at) >= 20, f"3 peers train across the bridge (steps {cut_at})")
        hub = [n for n in ours(p.pid) if n.endswith("-hub")]
        check(len(hub) == 1, "the run's hub namespace is there")
        subprocess.run(["ip", "-n", hub[0], "link", "set", "p2", "down"], check=True)
        output, _ = p.communicate(timeout=120 * SCALE)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail(f"the partitioned run did not finish within {120 * SCALE} s (a hang)")
    if p.returncode != 0:
        fail(f"the partitioned run exited {p.returncode}:\n{output[-3000:]}")
    check(True, f"the partitioned run finishes (rank 2 cut off after step {max(cut_at)})")
    for rank, lost in ((0, 2), (1, 2), (2, 0), (2, 1)):
        check(f"rank {rank}: lost rank {lost}" in output, f"rank {rank} noticed rank {lost} is gone")
    check("rank 0: lost rank 1" not in output and "rank 1: lost rank 0" not in output,
          "ranks 0 and 1, on the same side, kept each other")
    for rank in range(3):
        check(steps_done(out, rank) == 3000, f"rank {rank} trained all 3000 steps ({steps_done(out, rank)})")


def killed_launcher(peer, tmp):
    cfg = os.path.join(tmp, "slow.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.replace("max_steps: 20", "max_steps: 100000").replace("epochs: 1", "epochs: 1000"))
    p = subprocess.Popen([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", cfg, "--peer", peer,
                          "--out", os.path.join(tmp, "killed")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(ours(p.pid)) < 3:
        time.sleep(0.2)
    check(len(ours(p.pid)) == 3, "the launcher made a hub and 2 peer namespaces")
    peers = []
    while time.time() < deadline and len(peers) < 2:
        peers = [int(x) for n in ours(p.pid) for x in
                 subprocess.run(["ip", "netns", "pids", n], capture_output=True, text=True).stdout.split()]
        time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.time() + 30
    while time.time() < deadline and ours(p.pid):
        time.sleep(0.2)
    check(not ours(p.pid), "after SIGKILL of murmur-launch, its reaper removed the namespaces")
    alive = [pid for pid in peers if os.path.exists(f"/proc/{pid}") and
             "Z" not in open(f"/proc/{pid}/stat").read().split()[2]]
    check(not alive, f"and killed the peers inside ({len(peers)} found before)")
    # Rank 1 is a straggler (network.stragglers): the peers ran in CPU-quota cgroups, which go too.
    from murmur_netem import cpu_quota
    root = cpu_quota.hierarchy()[1]
    while time.time() < deadline and any(d.startswith(f"murmur-{p.pid}-") for d in os.listdir(root)):
        time.sleep(0.2)
    check(not any(d.startswith(f"murmur-{p.pid}-") for d in os.listdir(root)),
          "and removed the peers' CPU-quota cgroups")


def not_root():
    if not shutil.which("setpriv"):
        print("netem_test: setpriv missing: not-root message unchecked")
        return
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        os.path.join(ROOT, "tools", "murmur-netem"), "check"], capture_output=True, text=True)
    check(r.returncode == 2 and "needs root" in r.stderr, f"not root: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--time-scale", type=int, default=1, help="multiplies the time bounds (sanitizer builds)")
    args = ap.parse_args()
    global SCALE
    SCALE = args.time_scale
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("netem_test: skipped: needs root and iproute2 (ip, tc)")
        return SKIP
    try:
        Network(1, bandwidth="1gbit").up().down()
    except NetemError as e:
        print(f"netem_test: skipped: cannot create namespaces here: {e}")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="murmur-netem-test-") as tmp:
        link_goodput()
        if can_impair():
            impaired_links()
            message_delivery()
            slow_lossy_peers(os.path.abspath(args.peer), tmp)
        launch_two_peers(os.path.abspath(args.peer), tmp)
        partition(os.path.abspath(args.peer), tmp)
        killed_launcher(os.path.abspath(args.peer), tmp)
        not_root()
    print("netem_test: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

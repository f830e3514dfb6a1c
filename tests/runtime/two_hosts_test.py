#!/usr/bin/python3
"""transport.host: auto across two emulated hosts (needs root and iproute2; exits 77, CTest's
skip, otherwise). Two network namespaces behind a bridge (tools/murmur_netem), each with its own
address on eth0 and a default route through it, stand for two hosts; each peer also gets a UTS
namespace named after its host (node-a, node-b). 2 peers per host, started by hand as a user
or a batch system would (MURMUR_RANK, MURMUR_WORLD_SIZE=4, MURMUR_LOCAL_SIZE=2), meeting in one
rendezvous directory, with nothing said about addresses:

1. over tcp, ucx and ofi: every peer listens on its host's eth0 address (loopback cannot cross
   namespaces), says so in its log, and the run ends with summary.json;
2. every peer told transport.host=127.0.0.1: one clear error naming the rank, both hosts and
   the key, instead of a connect timeout;
3. $MURMUR_SOCKET_IFNAME naming no interface there: an error naming the variable and listing
   the host's interfaces.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from launch_util import Checks, ring_config  # noqa: E402
from murmur_netem import NetemError, Network  # noqa: E402

check = Checks("two_hosts_test")
HOSTS = ("node-a", "node-b")


def start(net, peer, d, rank, sets=(), env_extra=None):
    """Rank `rank` on host rank // 2, in that namespace and a UTS namespace of that name."""
    node = rank // 2
    env = dict(os.environ, MURMUR_RANK=str(rank), MURMUR_WORLD_SIZE="4", MURMUR_LOCAL_RANK=str(rank % 2),
               MURMUR_LOCAL_SIZE="2", MURMUR_SECRET="two-hosts-test")
    for k in ("MURMUR_SOCKET_IFNAME", "MURMUR_LAUNCHER", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE"):
        env.pop(k, None)
    env.update(env_extra or {})
    cmd = net.exec_prefix(node) + ["unshare", "--uts", "sh", "-c", f'hostname {HOSTS[node]} && exec "$@"', "sh",
                                   peer, "--config", os.path.join(d, "two.yaml"), "--out", os.path.join(d, "out"),
                                   "--set", f"transport.rendezvous_dir={os.path.join(d, 'rdv')}"] + list(sets)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run4(net, peer, d, sets=(), env_extra=None, timeout=120):
    """Starts the 4 peers and waits for them: ([exit codes], [outputs])."""
    for sub in ("rdv", "out"):
        subprocess.run(["rm", "-rf", os.path.join(d, sub)], check=True)
    procs = [start(net, peer, d, r, sets, env_extra) for r in range(4)]
    codes, outputs = [], []
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(killed: timed out)\n"
        codes.append(p.returncode)
        outputs.append(out)
    return codes, outputs


def run_all(net, peer, d):
    with open(os.path.join(d, "two.yaml"), "w") as f:
        f.write(ring_config("two-hosts", steps=60))
    for ns in net.namespaces:  # each "host" reaches the other through its default route
        subprocess.run(["ip", "-n", ns, "route", "add", "default", "dev", "eth0"], check=True)

    # 1. Each backend, nothing said about addresses.
    for backend in ("tcp", "ucx", "ofi"):
        t0 = time.time()
        codes, outs = run4(net, peer, d, ["--set", f"transport.backend={backend}"])
        text = "\n".join(f"--- rank {r} (exit {codes[r]}):\n{outs[r][-2500:]}" for r in range(4))
        if not check(codes == [0, 0, 0, 0], f"{backend}: exit codes {codes}\n{text}"):
            continue
        for r in range(4):
            want = f"rank {r}: {backend} transport on {net.addresses[r // 2]} (interface eth0 (the default route))"
            check(want in outs[r], f"{backend}: rank {r} did not say \"{want}\":\n{outs[r][-2500:]}")
        summary = os.path.join(d, "out", "summary.json")
        if check(os.path.exists(summary), f"{backend}: no summary.json\n{text}"):
            with open(summary) as f:
                s = json.load(f)
            check(len(s["peers"]) == 4 and "average_model" in s, f"{backend}: summary peers {s['peers']}")
        print(f"two_hosts_test: {backend}: 2 hosts x 2 peers, {time.time() - t0:.1f} s", flush=True)

    # 2. Loopback given to every peer: refused at the rendezvous, naming who and where.
    codes, outs = run4(net, peer, d, ["--set", "transport.host=127.0.0.1", "--set",
                                      "transport.connect_timeout_ms=8000"], timeout=60)
    text = "\n".join(outs)
    check(any(c == 1 for c in codes) and "published the loopback address 127.0.0.1:" in text and
          "runs on node-a" in text and "from host node-b" in text and "transport.host" in text,
          f"loopback on two hosts: exit codes {codes}:\n{text[-4000:]}")

    # 3. An interface list that selects nothing there.
    codes, outs = run4(net, peer, d, env_extra={"MURMUR_SOCKET_IFNAME": "ib"}, timeout=60)
    check(codes == [1, 1, 1, 1] and all('$MURMUR_SOCKET_IFNAME "ib": no interface' in o and "eth0 (10.77." in o
                                        for o in outs), f"MURMUR_SOCKET_IFNAME=ib: {codes}:\n{outs[0][-2000:]}")


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    if os.geteuid() != 0:
        check.skip("network namespaces need root")
    with tempfile.TemporaryDirectory(prefix="murmur-two-hosts-") as d:
        try:
            net = Network(2).up()
        except NetemError as e:
            check.skip(f"no emulated network here: {e}")
        try:
            run_all(net, peer, d)
        finally:
            net.down()
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

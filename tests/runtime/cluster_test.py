#!/usr/bin/python3
"""tools/murmur-cluster: a real 2-node cluster on this machine, and murmur's launch paths on it
as a user types them (needs root, openssh-server, Slurm and munge; exits 77, CTest's skip,
otherwise). Each node is a network namespace with its own address and hostname, running a real
sshd and slurmd; slurmctld and munged run on the controller host.

1. `up -N 2`: each node has its name, reaches the other by name over ssh (no -F: the node's
   ssh_config is the cluster's), and Slurm sees both nodes idle; `exec` of a host that is not
   there is one clear error naming the hosts.
2. `murmur-launch -n 4 CONFIG --hostfile HOSTFILE` on node0, 2 nodes x 2 slots, over tcp, ucx and
   ofi: summary.json, and ranks 2 and 3 listen on node1's address (the run spans both nodes).
   With algorithm.hierarchical (2 nodes: the exact average, consensus distance 0), and refused
   by name with the ranks placed round robin (--map-by node).
3. `salloc -N 2 -n 4 murmur-launch CONFIG --slurm` (SGP), an sbatch script with -N 2, and
   `murmur-sweep SWEEP --slurm --sbatch-args "-N 2"` for a 2-point sweep: summary.json each,
   and a summary.csv with both points.
4. A run directory on each node's own disk (D/node-local), with transport.rendezvous: hosts
   (no directory at all): under --hostfile and under salloc -N 2 --slurm, node0's directory
   holds every rank's result.json and a summary.json with no rank failed and a time to accuracy
   (node1's ranks' results, eval points included, came over the transport); node1's holds its
   ranks' own files and no summary.
5. node1's link cut mid-run under run.on_peer_failure: continue: node0's peers finish every
   step and write their results; the launcher names the peers on node1 and exits.
6. `down`: every daemon the cluster started is gone, and so are its namespaces; the host's
   hostname and /etc/hosts are as before. Then `up` again and its supervisor SIGKILLed: its
   namespaces, and the daemons inside, are gone within seconds all the same (the reaper), and
   `down` removes what is left of its state.
7. `run -N 1 -- sleep 120` interrupted (SIGINT to its process group): the cluster goes, and run
   exits 130.
"""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "murmur-cluster")
LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")
SWEEP_TOOL = os.path.join(ROOT, "tools", "murmur-sweep")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from launch_util import (Checks, Launched, excerpt, print_logs, result, ring_config, small_sweep,  # noqa: E402
                         small_sweep_rows, wait_gone, wait_training)
from murmur_netem.network import alive, list_namespaces  # noqa: E402

NEEDED = ("/usr/sbin/sshd", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/salloc",
          "/usr/bin/nsenter", "/usr/bin/unshare")
NODE_ADDRESS = {0: "10.77.0.1", 1: "10.77.0.2"}  # node r // 2 of rank r: 2 slots per node
check = Checks("cluster_test")


class Tool:
    def __init__(self, d):
        self.d = d

    def __call__(self, *args, timeout=180):
        r = subprocess.run([TOOL, "--dir", self.d] + list(args), capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr

    def on(self, node, argv):
        """argv on `node`, started and read as Launched is."""
        return Launched([TOOL, "--dir", self.d, "exec", node] + list(argv))


def spans_nodes(text, backend):
    """Whether each rank r said it listens on node r // 2's address."""
    return all(f"rank {r}: {backend} transport on {NODE_ADDRESS[r // 2]}" in text for r in range(4))


def summary_ok(out, what, text, n=4):
    path = os.path.join(out, "summary.json")
    if not check(os.path.exists(path), f"{what}: no summary.json:\n{excerpt(text)}"):
        return False
    with open(path) as f:
        s = json.load(f)
    return check(len(s["peers"]) == n and "average_model" in s and not any(p.get("failed") for p in s["peers"]),
                 f"{what}: summary peers {s['peers']}")


def hosts(tool):
    for node, other in (("node0", "node1"), ("node1", "node0")):
        text = tool.on(node, ["sh", "-c", f"hostname; ssh {other} hostname"]).finish(60)
        check(text.split() == [node, other], f"{node}: hostname, then ssh {other} hostname said {text!r}")
    text = tool.on("node0", ["sinfo", "-h", "-N", "-o", "%N %t"]).finish(60)
    check(sorted(text.split()) == sorted(["node0", "idle", "node1", "idle"]), f"sinfo on node0: {text!r}")
    code, text = tool("exec", "node7", "true")
    check(code == 1 and "no host node7" in text and "node0, node1, ctl" in text, f"exec node7: {code} {text}")


def hostfile_runs(tool, d, peer, config):
    for backend in ("tcp", "ucx", "ofi"):
        out = os.path.join(d, f"hostfile-{backend}")
        t0 = time.time()
        text = tool.on("node0", [LAUNCH, "-n", "4", config, "--hostfile", os.path.join(tool.d, "hostfile"),
                                 "--peer", peer, "--out", out, "--set", f"transport.backend={backend}"]).finish()
        if summary_ok(out, f"--hostfile over {backend}", text):
            check(spans_nodes(text, backend), f"--hostfile over {backend}: ranks not on node0, node0, node1, node1:"
                  f"\n{excerpt(text)}")
        print(f"cluster_test: --hostfile, 2 nodes x 2 peers over {backend}: {time.time() - t0:.1f} s", flush=True)


SWEEP = small_sweep("cluster-sweep")


def hierarchical_runs(tool, d, peer, config):
    """algorithm.hierarchical across the 2 nodes: with 2 nodes it is the exact average, so the
    peers end with one model; ranks placed round robin (--map-by node) are refused by name."""
    out = os.path.join(d, "hierarchical")
    base = [LAUNCH, "-n", "4", config, "--hostfile", os.path.join(tool.d, "hostfile"), "--peer", peer,
            "--set", "algorithm.hierarchical=true"]
    text = tool.on("node0", base + ["--out", out]).finish()
    if summary_ok(out, "hierarchical D-PSGD, --hostfile", text):
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        check(s["consensus_distance"] == 0, f"hierarchical D-PSGD on 2 nodes: consensus distance "
              f"{s['consensus_distance']}, want 0 (the exact average)")
    text = tool.on("node0", base + ["--map-by", "node", "--out", os.path.join(d, "hierarchical-rr")]).finish()
    check(re.search(r"rank (1|2) runs on node (1|0) \(\$MURMUR_NODE_RANK\), but nodes of 2 consecutive ranks "
                    r"put it on node (0|1): place ranks in blocks", text) is not None,
          f"hierarchical with --map-by node: not refused by name:\n{excerpt(text)}")


def slurm_runs(tool, d, peer, config):
    sgp = os.path.join(d, "sgp.yaml")
    with open(config) as f, open(sgp, "w") as g:
        g.write(f.read().replace("algorithm: {name: dpsgd}", "algorithm: {name: sgp}")
                .replace("topology: {graph: ring}", "topology: {graph: exponential}"))
    out = os.path.join(d, "salloc")
    t0 = time.time()
    text = tool.on("node0", ["salloc", "-N", "2", "-n", "4", "--quiet", LAUNCH, "-n", "4", sgp, "--slurm",
                             "--peer", peer, "--out", out]).finish()
    if summary_ok(out, "salloc -N 2 -n 4 --slurm", text):
        check(spans_nodes(text, "tcp"), f"salloc -N 2 -n 4: ranks not on node0, node0, node1, node1:\n{excerpt(text)}")
    print(f"cluster_test: salloc -N 2 -n 4, SGP: {time.time() - t0:.1f} s", flush=True)

    out, script = os.path.join(d, "sbatch"), os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#SBATCH -N 2\n#SBATCH -n 4\n#SBATCH -o {d}/sbatch.log\n"
                f"exec {LAUNCH} {config} --slurm --peer {peer} --out {out}\n")
    text = tool.on("node0", ["sbatch", "--wait", "--quiet", script]).finish()
    log = open(os.path.join(d, "sbatch.log")).read() if os.path.exists(os.path.join(d, "sbatch.log")) else ""
    if summary_ok(out, "sbatch -N 2 -n 4", text + log):
        check(spans_nodes(log, "tcp"), f"sbatch -N 2 -n 4: ranks not on node0, node0, node1, node1:\n{log[-3000:]}")

    spec, out = os.path.join(d, "sweep.yaml"), os.path.join(d, "sweep")
    with open(spec, "w") as f:
        f.write(SWEEP)
    text = tool.on("node0", [SWEEP_TOOL, spec, "--out", out, "--peer", peer, "--slurm",
                             "--sbatch-args", "-N 2"]).finish()
    if not check(text.count("submitted job") == 2, f"murmur-sweep --slurm: {excerpt(text)}"):
        return
    for _ in range(600):
        q = tool.on("node0", ["squeue", "--noheader", "--format=%i"]).finish(30)
        if not q.strip():
            break
        time.sleep(0.3)
    text = tool.on("node0", [SWEEP_TOOL, "--report", out]).finish()
    rows = small_sweep_rows(out)
    check(rows == [("allreduce", "2"), ("ring", "2")],
          f"murmur-sweep --report after --slurm -N 2: rows {rows}: {text[-2000:]}")


def node_local_runs(tool, state, peer, config):
    """The run directory on each node's own disk, the ranks met by their host list alone."""
    local = {node: os.path.join(state["dir"], "local", node) for node in ("node0", "node1")}
    overrides = ["--set", "transport.rendezvous=hosts", "--set", "eval.target_accuracy=0.05"]
    hostfile = [LAUNCH, "-n", "4", config, "--hostfile", state["hostfile"]]
    slurm = ["salloc", "-N", "2", "-n", "4", "--quiet", LAUNCH, "-n", "4", config, "--slurm"]
    for what, argv in (("--hostfile", hostfile), ("salloc -N 2 --slurm", slurm)):
        name = "local-slurm" if "--slurm" in argv else "local-hostfile"
        t0 = time.time()
        text = tool.on("node0", argv + ["--peer", peer, "--out", os.path.join(state["node_local"], name)]
                       + overrides).finish()
        mine, theirs = os.path.join(local["node0"], name), os.path.join(local["node1"], name)
        what = f"node-local run directories, {what}"
        check("(transport.rendezvous: hosts" in text, f"{what}: the ranks did not meet by their host list:\n"
              f"{excerpt(text)}")
        if summary_ok(mine, what, text):
            with open(os.path.join(mine, "summary.json")) as f:
                s = json.load(f)
            check(s.get("time_to_accuracy", {}).get("step") is not None,
                  f"{what}: no time to accuracy from node1's eval points: {s.get('time_to_accuracy')}")
        check(all(result(mine, r) for r in range(4)), f"{what}: node0 lacks a result.json: "
              f"{sorted(os.listdir(mine)) if os.path.isdir(mine) else 'no directory'}")
        check(not os.path.exists(os.path.join(mine, "rank2", "metrics.jsonl")) and
              os.path.exists(os.path.join(theirs, "rank2", "metrics.jsonl")) and
              not os.path.exists(os.path.join(theirs, "summary.json")),
              f"{what}: the directories are not each node's own")
        print(f"cluster_test: {what}: {time.time() - t0:.1f} s", flush=True)


def cut_link(tool, d, peer, config):
    """node1's link cut while the 4 peers train: node0's two finish as a pair."""
    out, steps = os.path.join(d, "cut"), 4000
    p = tool.on("node0", [LAUNCH, "-n", "4", config, "--hostfile", os.path.join(tool.d, "hostfile"),
                          "--peer", peer, "--out", out, "--set", f"train.max_steps={steps}",
                          "--set", "run.on_peer_failure=continue", "--set", "transport.peer_timeout_ms=3000"])
    if not check(wait_training(out, deadline_s=90), "cut: the peers did not start"):
        p.kill()
        return
    t0 = time.time()
    code, said = tool("link", "node1", "down")
    check(code == 0, f"link node1 down: {code} {said}")
    text = p.finish(150)
    print(f"cluster_test: node1's link cut: the launcher done {time.time() - t0:.1f} s later", flush=True)
    tool("link", "node1", "up")
    for r in (0, 1):
        res = result(out, r)
        check(res is not None and res.get("steps") == steps and not res.get("stopped_early"),
              f"cut: node0's rank {r} did not finish its {steps} steps: result {res}\n{excerpt(text)}")
    check(p.returncode not in (0, None) and "peer 2 on node1" in text and "peer 3 on node1" in text,
          f"cut: the launcher exited {p.returncode} without naming node1's peers:\n{excerpt(text)}")
    wait_gone(out, 0)


def leftovers(state):
    """What of a cluster (its state.json as it was up) still exists: namespaces, live daemons."""
    left = [ns for ns in state["namespaces"] if ns in list_namespaces()]
    left += [f"{name} (pid {pid})" for name, pid in state["daemons"] + list(state["holders"].items()) if alive(pid)]
    return left


def wait_none_left(state, within_s):
    deadline = time.time() + within_s
    while leftovers(state) and time.time() < deadline:
        time.sleep(0.2)
    return leftovers(state)


def interrupted_run(tool):
    """`run -N 1 -- sleep`, Ctrl-C to its process group (as a terminal sends it): the command
    stops, the cluster goes, and run exits 130."""
    default_int = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    p = Launched([sys.executable, "-c", default_int, TOOL, "--dir", tool.d, "run", "-N", "1", "--no-slurm",
                  "--", "sleep", "120"])
    state = None
    for _ in range(300):
        try:
            with open(os.path.join(tool.d, "state.json")) as f:
                state = json.load(f)
            if state.get("ready"):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    if not check(state and state.get("ready"), "run -N 1: the cluster did not come up"):
        p.kill()
        return
    time.sleep(0.5)  # past `up`'s last line: the command runs
    os.killpg(p.pid, signal.SIGINT)
    text = p.finish(60)
    left = wait_none_left(state, 5)
    check(p.returncode == 130 and "took down" in text and not left,
          f"run interrupted: exit {p.returncode}, left {left}:\n{text}")


def run_all(tool, state, d, peer):
    config = os.path.join(d, "ring.yaml")
    with open(config, "w") as f:
        f.write(ring_config("cluster", steps=60))
    hosts(tool)
    hostfile_runs(tool, d, peer, config)
    hierarchical_runs(tool, d, peer, config)
    slurm_runs(tool, d, peer, config)
    node_local_runs(tool, state, peer, config)
    cut_link(tool, d, peer, config)


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    missing = [p for p in NEEDED if not os.access(p, os.X_OK)]
    if missing:
        check.skip(f"no {', '.join(missing)} (Debian's openssh-server, slurmctld, slurmd, slurm-client, munge "
                   "and util-linux; tools/setup-debian installs them)")
    if os.geteuid() != 0:
        check.skip("the cluster's network namespaces, sshd and slurmd need root")
    before = (socket.gethostname(), open("/etc/hosts").read())
    with tempfile.TemporaryDirectory(prefix="murmur-cluster-") as d:
        os.chmod(d, 0o755)
        tool = Tool(os.path.join(d, "cluster"))
        t0 = time.time()
        code, text = tool("up", "-N", "2", "--slots", "2")
        if not check(code == 0, f"up -N 2: {code}\n{text}"):
            tool("down")
            return check.result()
        print(f"cluster_test: up -N 2: {time.time() - t0:.1f} s", flush=True)
        with open(os.path.join(tool.d, "state.json")) as f:
            state = json.load(f)
        try:
            run_all(tool, state, d, peer)
        finally:
            if check.failures:
                print_logs(os.path.join(tool.d, "log", "*"))
            code, text = tool("down")
            check(code == 0 and "took down" in text, f"down: {code} {text}")
            left = wait_none_left(state, 0)
            check(not left, f"down left {left}")
            check((socket.gethostname(), open("/etc/hosts").read()) == before, "the host's hostname or /etc/hosts changed")

        # The supervisor SIGKILLed: nothing of it may stay.
        code, text = tool("up", "-N", "2", "--slots", "2")
        if check(code == 0, f"up again: {code}\n{text}"):
            with open(os.path.join(tool.d, "state.json")) as f:
                state = json.load(f)
            os.kill(state["supervisor"], signal.SIGKILL)
            left = wait_none_left(state, 20)
            check(not left, f"the supervisor SIGKILLed: left {left}")
            code, text = tool("status")
            check(code == 1 and "dead one left its state" in text, f"status after the SIGKILL: {code} {text}")
            code, text = tool("down")
            check(code == 0 and "leftovers of a dead cluster" in text and not glob.glob(os.path.join(tool.d, "state.json")),
                  f"down after the SIGKILL: {code} {text}")
        tool("down")
        interrupted_run(tool)
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""murmur-launch --slurm against a real Slurm 22.05 (Debian's slurmctld, slurmd and munge):
this test starts its own munged, slurmctld and slurmd on loopback, from a slurm.conf and a
munge key of its own in a temporary directory (SLURM_CONF points every client there), and
stops exactly those (by pid). Exits 77 (CTest's skip) without the packages or without root.

1. `salloc -n 4 murmur-launch CONFIG --slurm`: 4 peers, summary.json; each peer's local rank
   and local size from Slurm (SLURM_LOCALID, the tasks on its node).
2. `salloc -n 2 murmur-launch CONFIG --slurm`, the config saying 4 peers: the run takes its
   size from the allocation (before: srun failed asking for 4); `-n 4` in that allocation is
   one clear error naming both, before anything starts.
3. Ctrl-C (SIGINT) to the launcher: every peer writes a checkpoint and stops (before: srun's
   "forcing job termination" SIGKILLed them), and the launcher exits 130.
4. The peer of SLURM_PROCID 2 SIGKILLed: the launcher names peer 2 (before: "peer 0 exited with
   code 137"), summary.json marks rank 2 failed, and the others stop.
5. an sbatch script that runs murmur-launch --slurm finishes with summary.json;
6. `murmur-sweep SWEEP --slurm`, 2 points: each an sbatch job; once they are done, `--report`
   writes summary.csv with both (needs Debian's python3-yaml, as murmur-sweep does);
7. `srun -n 4 murmur-peer --config C --out D`, no launcher and no rendezvous set: the peers
   meet in D/rendezvous/slurm-<job>.<step>, and the one that evaluates the average writes
   summary.json (before: "no way to find peers").
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from murmur_cluster import slurm_conf  # noqa: E402
from launch_util import (LONG_RUN, Checks, Launched, environ_of, excerpt, free_port, peers_of, print_logs,  # noqa: E402
                         program_ok, result, ring_config, small_sweep, small_sweep_rows, torch_program, wait_gone,
                         wait_training)

CONFIG = ring_config("slurm")
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
check = Checks("slurm_test")



class Cluster:
    """munged, slurmctld and one slurmd (this host, 4 CPUs whatever it has), all of this test's."""

    def __init__(self, d):
        self.d = d
        self.node = socket.gethostname().split(".")[0]
        self.procs = []
        for sub in ("state", "spool", os.path.join("spool", self.node), "log"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        self.conf = os.path.join(d, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(slurm_conf("murmurtest", self.node, "127.0.0.1", free_port(), free_port(),
                               f"{d}/munge.sock", d, f"{d}/log",
                               f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n", partition="test"))
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        for k in list(self.env):  # this test's Slurm only, not one it may itself run under
            if k.startswith(("SLURM_", "SALLOC_", "SBATCH_", "SRUN_")) and k != "SLURM_CONF":
                del self.env[k]

    def daemon(self, argv, name):
        out = open(os.path.join(self.d, "log", name + ".out"), "w")
        self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env))

    def start(self):
        key = os.path.join(self.d, "munge.key")
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        os.chmod(key, 0o600)
        d = self.d
        self.daemon(["munged", "-F", "-f", f"--socket={d}/munge.sock", f"--key-file={key}",
                     f"--log-file={d}/log/munged.log", f"--pid-file={d}/munged.pid",
                     f"--seed-file={d}/munged.seed"], "munged")
        self.daemon(["slurmctld", "-D", "-i"], "slurmctld")
        self.daemon(["slurmd", "-D", "-N", self.node], "slurmd")
        for _ in range(150):
            if any(p.poll() is not None for p in self.procs):
                break
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
            if r.returncode == 0 and r.stdout.strip() == "idle":
                return True
            time.sleep(0.2)
        for log in sorted(glob.glob(os.path.join(self.d, "log", "*"))):
            with open(log) as f:
                print(f"slurm_test: {log}:\n{f.read()[-2000:]}")
        return False

    def stop(self):
        # Jobs first (their steps' processes are slurmstepd's, not ours), then the daemons.
        subprocess.run(["scancel", "--user", str(os.getuid())], env=self.env, capture_output=True)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def salloc(cluster, n, argv):
    return Launched(["salloc", "-n", str(n), "--quiet"] + argv, env=cluster.env)


def said(text):
    """The launcher's and srun's own lines of an output, without the peers' log lines."""
    return "\n".join(line for line in text.splitlines() if line.startswith(("murmur-launch", "srun", "salloc")))[-3000:]


def launcher_pid(salloc_proc):
    """The murmur-launch process under salloc (its child)."""
    for _ in range(100):
        for stat in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(stat, "rb") as f:
                    argv = f.read().split(b"\0")
                with open(stat.replace("cmdline", "stat")) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == salloc_proc.pid and any(a.endswith(b"murmur-launch") for a in argv):
                return int(stat.split("/")[2])
        time.sleep(0.1)
    return None


def run_all(d, cluster, peer):
    config = os.path.join(d, "slurm.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    base = [LAUNCH, config, "--slurm", "--peer", peer]

    # 1. Four peers in an allocation of four.
    out = os.path.join(d, "four")
    t0 = time.time()
    text = salloc(cluster, 4, base + ["-n", "4", "--out", out]).finish()
    summary = os.path.join(out, "summary.json")
    if check(os.path.exists(summary), f"salloc -n 4: no summary.json:\n{excerpt(text)}"):
        with open(summary) as f:
            s = json.load(f)
        check(len(s["peers"]) == 4 and "average_model" in s and not any(p.get("failed") for p in s["peers"]),
              f"salloc -n 4: summary peers {s['peers']}")
    print(f"slurm_test: salloc -n 4, 4 peers: {time.time() - t0:.1f} s", flush=True)

    # 1b. A PyTorch program instead of murmur-peer (-- PROGRAM), each task of srun one peer.
    program = torch_program(peer)
    if program is None:
        print("slurm_test: no PyTorch program run (no python3-torch, or no Python package in this build)")
    else:
        out = os.path.join(d, "program")
        t0 = time.time()
        p = salloc(cluster, 4, base + ["-n", "4", "--out", out, "--"] + program)
        text = p.finish(180)
        wrong = program_ok(text, out, 4)
        check(p.returncode == 0 and not wrong, f"-- PROGRAM under salloc: exit {p.returncode}, {wrong}:\n{excerpt(text)}")
        print(f"slurm_test: a PyTorch program, salloc -n 4: {time.time() - t0:.1f} s", flush=True)

    # 2. The allocation decides the size; -n beyond it is refused.
    out = os.path.join(d, "two")
    text = salloc(cluster, 2, base + ["--out", out]).finish()
    ok = os.path.exists(os.path.join(out, "summary.json"))
    if check(ok, f"salloc -n 2 without -n: no summary.json:\n{excerpt(text)}"):
        with open(os.path.join(out, "summary.json")) as f:
            check(json.load(f)["world_size"] == 2, "salloc -n 2: the world is not 2")
    out = os.path.join(d, "too-many")
    text = salloc(cluster, 2, base + ["-n", "4", "--out", out]).finish()
    check("-n 4" in text and "2 tasks" in text and not os.path.exists(os.path.join(out, "rank0")),
          f"-n 4 in an allocation of 2:\n{excerpt(text)}")

    long_run = ["-n", "4"] + LONG_RUN
    # 3. Ctrl-C.
    out = os.path.join(d, "interrupt")
    p = salloc(cluster, 4, base + long_run + ["--out", out])
    launcher = launcher_pid(p)
    if check(launcher and wait_training(out), "interrupt: the peers did not start"):
        os.kill(launcher, signal.SIGINT)
        gone = wait_gone(out, 40)
        text = p.finish()
        check(gone, f"interrupt: peers still running 40 s after the SIGINT; the launcher said:\n{said(text)}")
        for r in range(4):
            res = result(out, r)
            ckpts = glob.glob(os.path.join(out, f"rank{r}", "ckpt-*.safetensors"))
            check(res and res["stopped_early"] and ckpts, f"interrupt: rank {r} did not stop with a checkpoint "
                  f"(result {res}, {len(ckpts)} checkpoints)\n{excerpt(text)}")
        check("every peer wrote a checkpoint" in text, f"interrupt: the launcher said:\n{said(text)}")
    else:
        p.kill()
        wait_gone(out, 0)

    # 4. SLURM_PROCID 2 killed.
    out = os.path.join(d, "killed")
    p = salloc(cluster, 4, base + long_run + ["--out", out])
    if check(wait_training(out), "killed: the peers did not start"):
        victim = [pid for pid in peers_of(out) if environ_of(pid).get("SLURM_PROCID") == "2"]
        if check(len(victim) == 1, f"killed: {len(victim)} peers with SLURM_PROCID 2"):
            os.kill(victim[0], signal.SIGKILL)
        text = p.finish()
        check("peer 2 on " in text and "exited with signal SIGKILL; stopping the others" in text and
              text.count("stopping the others") == 1,
              f"killed: the launcher named another peer:\n{excerpt(text)}")
        check(wait_gone(out, 30), "killed: the others still running")
        try:
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            # The others stopped (143, with a checkpoint) or failed on the loss (1), as the timing goes.
            failed = [(q["rank"], q.get("exit")) for q in s["peers"] if q.get("failed")]
            check((2, -9) in failed and all(code in (1, 143) for rank, code in failed if rank != 2),
                  f"killed: summary.json's failed peers (rank, exit) {failed}, want (2, -9) and no other "
                  f"killed\n{excerpt(text)}")
        except (OSError, ValueError) as e:
            check(False, f"killed: summary.json: {e}")
    else:
        p.kill()
        wait_gone(out, 0)

    # 5. sbatch.
    out = os.path.join(d, "batch")
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#SBATCH -n 4\n#SBATCH -o {d}/batch.log\n"
                f"exec {LAUNCH} {config} --slurm --peer {peer} --out {out}\n")
    r = subprocess.run(["sbatch", "--wait", "--quiet", script], env=cluster.env, capture_output=True,
                       text=True, timeout=180)
    log = open(os.path.join(d, "batch.log")).read() if os.path.exists(os.path.join(d, "batch.log")) else ""
    check(r.returncode == 0 and os.path.exists(os.path.join(out, "summary.json")),
          f"sbatch: code {r.returncode} {r.stderr}\n{log[-3000:]}")

    # 6. A sweep, one sbatch job per point.
    sweep(d, cluster, peer)

    # 7. srun alone.
    out = os.path.join(d, "srun")
    env = dict(cluster.env, MURMUR_SECRET="s" * 64)
    r = subprocess.run(["srun", "-n", "4", peer, "--config", config, "--out", out], env=env,
                       capture_output=True, text=True, timeout=180)
    rdv = os.listdir(os.path.join(out, "rendezvous")) if os.path.isdir(os.path.join(out, "rendezvous")) else []
    check(r.returncode == 0 and os.path.exists(os.path.join(out, "summary.json")) and
          len(rdv) == 1 and rdv[0].startswith("slurm-"),
          f"srun alone: code {r.returncode}, rendezvous {rdv}:\n{(r.stdout + r.stderr)[-3000:]}")


SWEEP = small_sweep("slurm-sweep")


def sweep(d, cluster, peer):
    spec, out = os.path.join(d, "sweep.yaml"), os.path.join(d, "sweep")
    with open(spec, "w") as f:
        f.write(SWEEP)
    tool = os.path.join(ROOT, "tools", "murmur-sweep")
    r = subprocess.run([tool, spec, "--out", out, "--peer", peer, "--slurm"], env=cluster.env,
                       capture_output=True, text=True, timeout=120)
    if not check(r.returncode == 0 and r.stdout.count("submitted job") == 2,
                 f"murmur-sweep --slurm: code {r.returncode}: {r.stdout} {r.stderr}"):
        return
    for _ in range(600):
        q = subprocess.run(["squeue", "--noheader", "--format=%i"], env=cluster.env, capture_output=True, text=True)
        if q.returncode == 0 and not q.stdout.strip():
            break
        time.sleep(0.2)
    r = subprocess.run([tool, "--report", out], env=cluster.env, capture_output=True, text=True, timeout=120)
    rows = small_sweep_rows(out)
    check(rows == [("allreduce", "2"), ("ring", "2")],
          f"murmur-sweep --report after --slurm: code {r.returncode}, rows {rows}: {r.stdout} {r.stderr}")


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    missing = [p for p in DAEMONS + ("/usr/bin/salloc", "/usr/sbin/mungekey") if not os.access(p, os.X_OK)]
    if missing:
        check.skip(f"no {', '.join(missing)} (Debian's slurmctld, slurmd, slurm-client and munge; "
             "tools/setup-debian installs them)")
    if os.geteuid() != 0:
        check.skip("slurmd runs jobs as their user only when it runs as root")
    with tempfile.TemporaryDirectory(prefix="murmur-slurm-") as d:
        os.chmod(d, 0o755)
        cluster = Cluster(d)
        try:
            if not cluster.start():
                check(False, "the Slurm daemons did not start (logs above)")
            else:
                run_all(d, cluster, peer)
        finally:
            if check.failures:
                print_logs(os.path.join(d, "log", "*"))
            cluster.stop()
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

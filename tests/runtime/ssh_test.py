#!/usr/bin/python3
"""murmur-launch --hostfile against a real sshd (Debian's openssh-server), started by this test
on loopback with a key pair of its own, and stopped by it (by pid); two host names, node-a and
node-b, both reach it. Exits 77 (CTest's skip) where there is no sshd, or it cannot start.

1. 2 hosts x 2 slots, 4 peers (D-PSGD on a ring, synthetic data) over tcp, ucx and ofi: the run
   finishes with summary.json. While it runs, over tcp: each remote peer's environment holds its
   rank, local rank and local size (2), the secret, a UCX_ variable and a -x one, and no command
   line on this machine holds the secret (before, it was on ssh's: `env ... MURMUR_SECRET=...`).
2. The launcher SIGKILLed mid-run: every remote peer stops within the grace and writes a
   checkpoint (before, they trained on, and died later of SIGPIPE with none).
3. Ctrl-C (SIGINT) to the launcher: every remote peer checkpoints and stops, and says so.
4. A host ssh cannot reach: the launcher names the peer and the host and stops the others.
5. -x of a variable that is not set: refused before anything starts.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SSHD = "/usr/sbin/sshd"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")
SECRET = "5ec7e7" * 8
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import murmur_ssh  # noqa: E402
from launch_util import (LONG_RUN, Checks, Launched, environ_of, excerpt, free_port, peers_of, program_ok,  # noqa: E402
                         result, ring_config, torch_program, wait_gone, wait_training)

CONFIG = ring_config("ssh")

check = Checks("ssh_test")



def children(pid):
    """Pids whose parent is `pid` (sshd's per-connection processes)."""
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.split("/")[2]))
    return out


class Sshd:
    """A real sshd on 127.0.0.1:port, accepting one key; self.config is the client's ssh_config."""

    def __init__(self, d):
        self.d = d
        self.port = free_port()
        self.made_privsep = False
        key = os.path.join(d, "id")
        for path in (os.path.join(d, "host_key"), key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
        shutil.copy(key + ".pub", os.path.join(d, "authorized_keys"))
        with open(os.path.join(d, "sshd_config"), "w") as f:
            f.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
                    f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nStrictModes no\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                    "PermitRootLogin prohibit-password\nLogLevel ERROR\nMaxStartups 32\n")
        closed = free_port()  # nothing listens there: a host ssh cannot reach
        self.config = os.path.join(d, "ssh_config")
        with open(self.config, "w") as f:
            # A long connect timeout: a loaded machine (ctest -j) can take seconds for sshd's
            # banner; nothing listens at node-gone's port, so it is refused at once anyway.
            for hosts, port in (("node-a node-b", self.port), ("node-gone", closed)):
                f.write(f"Host {hosts}\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {key}\n"
                        "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                        "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 60\n")

    def start(self):
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):  # sshd's privilege-separation dir
            os.makedirs("/run/sshd", mode=0o755)
            self.made_privsep = True
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", os.path.join(self.d, "sshd_config")],
                                     stderr=open(os.path.join(self.d, "sshd.log"), "w"))
        for _ in range(100):
            if self.proc.poll() is not None:
                break
            r = subprocess.run(["ssh", "-F", self.config, "-o", "BatchMode=yes", "node-a", "true"],
                               capture_output=True, timeout=30)
            if r.returncode == 0:
                return True
            time.sleep(0.1)
        self.stop()
        with open(os.path.join(self.d, "sshd.log")) as f:
            print(f"ssh_test: sshd did not start: {f.read()}")
        return False

    def stop(self):
        if self.proc.poll() is None:
            for child in children(self.proc.pid):  # sessions still open
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def secret_on_a_command_line():
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if SECRET.encode() in f.read():
                    return path
        except OSError:
            pass
    return None


def launch(d, name, peer, hostfile, extra=(), env=None):
    out = os.path.join(d, name)
    cmd = [LAUNCH, os.path.join(d, "ssh.yaml"), "-n", "4", "--hostfile", hostfile, "--out", out,
           "--peer", peer] + list(extra)
    return Launched(cmd, env), out


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    # The forwarded environment: murmur's and the libraries' variables, and no others.
    fwd = murmur_ssh.forwarded({"MURMUR_X": "1", "UCX_TLS": "tcp", "HOME": "/root", "LANG": "C",
                                "LD_LIBRARY_PATH": "/opt/lib", "EXTRA": "e"}, ["EXTRA", "SET=v"])
    check(fwd == {"MURMUR_X": "1", "UCX_TLS": "tcp", "LD_LIBRARY_PATH": "/opt/lib", "EXTRA": "e", "SET": "v"},
          f"forwarded environment: {fwd}")
    if not os.access(SSHD, os.X_OK) or not shutil.which("ssh-keygen"):
        check.skip(f"no {SSHD} (Debian's openssh-server; tools/setup-debian installs it)")
    with tempfile.TemporaryDirectory(prefix="murmur-ssh-") as d:
        sshd = Sshd(d)
        if not sshd.start():
            check.skip("sshd would not start here (see above)")
        try:
            run_all(d, sshd, peer)
        finally:
            sshd.stop()
    return check.result()


def run_all(d, sshd, peer):
    with open(os.path.join(d, "ssh.yaml"), "w") as f:
        f.write(CONFIG)
    hostfile = os.path.join(d, "hosts")
    with open(hostfile, "w") as f:
        f.write("node-a slots=2\nnode-b slots=2\n")
    ssh = ["--ssh", f"ssh -F {sshd.config}"]
    # Two hosts of 2 peers each: left to itself, transport.host: auto would take the default
    # route's interface; the test keeps them on loopback by the interface list a user would set.
    env = dict(os.environ, MURMUR_SECRET=SECRET, UCX_MURMUR_SSH_TEST="forwarded", SSH_TEST_EXTRA="yes",
               MURMUR_SOCKET_IFNAME="=lo")
    env.pop("LD_PRELOAD", None)

    # 1. Over each backend; over tcp, the remote peers' environment and every command line looked at.
    for backend in ("tcp", "ucx", "ofi"):
        t0 = time.time()
        p, out = launch(d, f"run-{backend}", peer, hostfile, ssh + ["-x", "SSH_TEST_EXTRA", "--set",
                        f"transport.backend={backend}"] + (["--set", "train.max_steps=400"] if backend == "tcp" else []),
                        env=env)
        seen, leaked = {}, None
        while p.poll() is None:
            for pid in peers_of(out):
                if pid not in seen:
                    e = environ_of(pid)
                    if e and "MURMUR_RANK" in e:
                        seen[pid] = e
            leaked = leaked or secret_on_a_command_line()
            time.sleep(0.05)
        text = p.finish()
        ok = check(p.returncode == 0, f"{backend}: launcher exited {p.returncode}:\n{excerpt(text)}")
        for r in range(4):
            check(f"rank {r}: {backend} transport on 127.0.0.1 (interface lo ($MURMUR_SOCKET_IFNAME))" in text,
                  f"{backend}: rank {r} did not say it listens on lo's address:\n{excerpt(text)}")
        summary = os.path.join(out, "summary.json")
        if ok and check(os.path.exists(summary), f"{backend}: no summary.json"):
            with open(summary) as f:
                s = json.load(f)
            check(len(s["peers"]) == 4 and "average_model" in s, f"{backend}: summary {s.get('peers')}")
        print(f"ssh_test: {backend}: 2 hosts x 2 peers over ssh in {time.time() - t0:.1f} s", flush=True)
        if backend != "tcp":
            continue
        check(leaked is None, f"the secret is on a command line: {leaked}")
        ranks = sorted(int(e["MURMUR_RANK"]) for e in seen.values())
        if check(ranks == [0, 1, 2, 3], f"saw the environments of ranks {ranks}, want 0-3"):
            for e in seen.values():
                r = int(e["MURMUR_RANK"])
                want = {"MURMUR_WORLD_SIZE": "4", "MURMUR_LOCAL_RANK": str(r % 2), "MURMUR_LOCAL_SIZE": "2",
                        "MURMUR_NODE_RANK": str(r // 2),
                        "MURMUR_SECRET": SECRET, "UCX_MURMUR_SSH_TEST": "forwarded", "SSH_TEST_EXTRA": "yes"}
                got = {k: e.get(k) for k in want}
                check(got == want, f"rank {r}'s environment: {got}, want {want}")
                check("SSH_CONNECTION" in e, f"rank {r} did not run under sshd")

    # 1b. A PyTorch program instead of murmur-peer (-- PROGRAM): the config, the --set list and
    # PYTHONPATH reach the remote peers through ssh's stdin, and they average one model.
    program = torch_program(peer)
    if program is None:
        print("ssh_test: no PyTorch program run (no python3-torch, or no Python package in this build)")
    else:
        t0 = time.time()
        p, out = launch(d, "program", peer, hostfile, ssh + ["--"] + program, env=env)
        text = p.finish(180)
        wrong = program_ok(text, out, 4)
        check(p.returncode == 0 and not wrong, f"-- PROGRAM over ssh: exit {p.returncode}, {wrong}:\n{excerpt(text)}")
        print(f"ssh_test: a PyTorch program, 2 hosts x 2 peers over ssh in {time.time() - t0:.1f} s", flush=True)

    # 2 and 3. The launcher killed, or interrupted: every remote peer checkpoints and stops.
    long_run = ssh + LONG_RUN
    for how in (signal.SIGKILL, signal.SIGINT):
        name = signal.Signals(how).name
        p, out = launch(d, f"stop-{name}", peer, hostfile, long_run)
        if not wait_training(out):
            check(False, f"{name}: the peers did not start training:\n{p.kill()[-3000:]}")
            wait_gone(out, 0)
            continue
        check(len(peers_of(out)) == 4, f"{name}: {len(peers_of(out))} peers running, want 4")
        if p.poll() is not None:
            text = p.finish()
            check(False, f"{name}: the launcher ended by itself, code {p.returncode}:\n{excerpt(text)}")
            continue
        os.kill(p.pid, how)
        gone = wait_gone(out, 30)
        text = p.finish(60)
        check(gone, f"{name}: remote peers still running 30 s after the launcher's {name}:\n{excerpt(text)}")
        for r in range(4):
            ckpts = glob.glob(os.path.join(out, f"rank{r}", "ckpt-*.safetensors"))
            res = result(out, r)
            check(ckpts and res and res["stopped_early"], f"{name}: rank {r} did not stop with a checkpoint "
                  f"({len(ckpts)} checkpoints, result {res})")
        if how == signal.SIGINT:
            check(p.returncode == 128 + signal.SIGINT and "interrupted" in text and
                  text.count("checkpoint written") == 4 and "every peer wrote a checkpoint" in text,
                  f"SIGINT: launcher exited {p.returncode}:\n{excerpt(text)}")

    # 4. A host ssh cannot reach.
    gone = os.path.join(d, "hosts-gone")
    with open(gone, "w") as f:
        f.write("node-a slots=3\nnode-gone\n")
    p, out = launch(d, "gone", peer, gone, ssh + LONG_RUN)
    text = p.finish(120)
    check(p.returncode not in (0, None) and "peer 3 on node-gone exited with code 255 (ssh failed" in text,
          f"unreachable host: code {p.returncode}:\n{excerpt(text)}")
    check(wait_gone(out, 30), "unreachable host: the other peers were left running")

    # 5. -x of an unset variable.
    env5 = dict(os.environ)
    env5.pop("MURMUR_NOT_SET_ANYWHERE", None)
    r = subprocess.run([LAUNCH, os.path.join(d, "ssh.yaml"), "-n", "2", "--hostfile", hostfile, "--out",
                        os.path.join(d, "x"), "--peer", peer, "-x", "MURMUR_NOT_SET_ANYWHERE"] + ssh,
                       capture_output=True, text=True, timeout=60, env=env5)
    check(r.returncode != 0 and "-x MURMUR_NOT_SET_ANYWHERE: not set" in r.stderr and
          not os.path.exists(os.path.join(d, "x", "rank0")), f"-x unset: {r.returncode} {r.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())

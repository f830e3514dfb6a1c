"""An emulated cluster on one machine, for tools/murmur-cluster: K nodes, each a network
namespace behind one bridge (tools/murmur_netem, links optionally shaped) with its own hostname
and /etc/hosts, running a real sshd and a real slurmd; one slurmctld and one munged on a
controller host (`ctl`, the bridge's own namespace). What a user types on a real cluster runs
here as it is: `murmur-launch --hostfile`, `salloc`, `sbatch`, `murmur-sweep --slurm`.

How a node is made, and why so:
- A holder process per host (`sleep infinity`) lives in the host's network namespace (entered
  with nsenter --net) and in UTS and mount namespaces of its own (unshare --uts --mount): it
  sets the hostname and bind-mounts the cluster's hosts file over /etc/hosts. Every daemon and
  every `exec` enters the holder's three namespaces (nsenter -t PID -n -u -m). Not `ip netns
  exec`: it mounts a fresh /sys, and slurmd 22.05 then exits ("No filesystem mounted on
  /sys/fs/cgroup").
- The filesystem is shared, as a cluster's home or scratch filesystem is: the cluster's
  directory holds slurm.conf, the munge key and socket, the ssh keys, the hostfile and the logs.
  All but one directory, D/node-local, which each host's holder bind-mounts from a directory
  of its own (D/local/<host>), as a node's local disk (/tmp, /scratch) is: a run written there
  is split across the nodes, as on a cluster without a shared filesystem.
- A supervisor process (`murmur-cluster serve`, in its own session) makes all of it, then waits;
  SIGTERM, SIGINT or SIGHUP make it stop every daemon it started (by pid) and delete the
  namespaces, which kills whatever still runs inside (peers, slurmstepd). The namespaces carry its
  pid (murmur-<pid>-c-*), and a netem reaper deletes them if it dies any other way (SIGKILL), so
  nothing outlives it in the host's own namespace.

Needs root, iproute2, util-linux (nsenter, unshare), openssh-server and openssh-client, and for
Slurm slurmctld, slurmd, slurm-client and munge (tools/setup-debian installs them all). Python
standard library only.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from murmur_netem import Network  # noqa: E402
from murmur_netem.network import alive  # noqa: E402

DEFAULT_DIR = "/tmp/murmur-cluster"
CONTROLLER = "ctl"
CONTROLLER_ADDRESS = "10.77.255.254"  # on the bridge itself; nodes are 10.77.0.1, 10.77.0.2, ...
SLURMCTLD_PORT, SLURMD_PORT = 6817, 6818  # Slurm's defaults: each host has its own namespace
SSH = ("/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen")
SLURM = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/sbin/mungekey",
         "/usr/bin/sinfo", "/usr/bin/salloc", "/usr/bin/scancel")
PRIVSEP = "/run/sshd"  # sshd's privilege-separation directory (Debian's sshd.service makes it)


class ClusterError(Exception):
    """The cluster cannot be made or reached; the message says why and what to do."""


def node_name(i):
    return f"node{i}"


def state_path(d):
    return os.path.join(d, "state.json")


def read_state(d):
    """The state of the cluster in `d`, or None when none was made there."""
    try:
        with open(state_path(d)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ClusterError(f"{state_path(d)}: unreadable ({e}); `murmur-cluster down --dir {d}` removes it")


def is_up(state):
    return bool(state) and alive(state["supervisor"])


def check_tools(slurm):
    """Raises ClusterError naming the packages whose programs are missing."""
    if os.geteuid() != 0:
        raise ClusterError("an emulated cluster needs root (network namespaces, sshd, slurmd)")
    wanted = {"/usr/bin/nsenter": "util-linux", "/usr/bin/unshare": "util-linux",
              "/etc/ssh/ssh_config": "openssh-client"}
    wanted.update({p: "openssh-server and openssh-client" for p in SSH})
    if slurm:
        wanted.update({p: "slurmctld, slurmd, slurm-client and munge" for p in SLURM})
    missing = sorted({pkg for path, pkg in wanted.items()
                      if not os.access(path, os.R_OK if path.startswith("/etc/") else os.X_OK)})
    if missing:
        raise ClusterError(f"missing programs of Debian's {'; '.join(missing)} (tools/setup-debian installs "
                           "them" + ("; --no-slurm makes a cluster without Slurm)" if slurm else ")"))


def enter(pid, cwd=None):
    """The command prefix that runs a program on the host whose holder is `pid`."""
    return ["nsenter", "-t", str(pid), "-n", "-u", "-m"] + ([f"--wd={cwd}"] if cwd else []) + ["--"]


def environment(state, base=None):
    """The environment of a command run on a node: the cluster's Slurm config (its ssh config is
    the node's /etc/ssh/ssh_config)."""
    env = dict(os.environ if base is None else base)
    for k in list(env):  # this cluster's Slurm only, not one the caller itself runs under
        if k.startswith(("SLURM_", "SALLOC_", "SBATCH_", "SRUN_")):
            del env[k]
    if state.get("slurm_conf"):
        env["SLURM_CONF"] = state["slurm_conf"]
    return env


def slurm_conf(cluster, ctl_host, ctl_address, ctld_port, slurmd_port, munge_socket, state_dir, log_dir, nodes,
               partition="murmur"):
    """A slurm.conf for daemons of our own, all as root: munge auth on `munge_socket`, state,
    spool (per node, %n: the directories must exist), pid files under `state_dir`, logs in
    `log_dir`; `nodes` the NodeName lines. linuxproc and task/none: no cgroups asked of the host
    (tests/runtime/slurm_test.py uses it too)."""
    return f"""ClusterName={cluster}
SlurmctldHost={ctl_host}({ctl_address})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={state_dir}/state
SlurmdSpoolDir={state_dir}/spool/%n
SlurmctldPidFile={state_dir}/slurmctld.pid
SlurmdPidFile={state_dir}/slurmd-%n.pid
SlurmctldLogFile={log_dir}/slurmctld.log
SlurmdLogFile={log_dir}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
MpiDefault=none
SwitchType=switch/none
{nodes}PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def link_bytes(state):
    """{node: (bytes it sent, bytes it received)} over its link since `up`: the counters of its
    port on the bridge, so what crossed between hosts (a node's own loopback never shows here)."""
    out = {}
    for i, name in enumerate(state["nodes"]):
        r = subprocess.run(["ip", "-s", "-j", "-n", state["namespaces"][0], "link", "show", f"p{i}"],
                           capture_output=True, text=True)
        try:
            stats = json.loads(r.stdout)[0]["stats64"]
            out[name] = (stats["rx"]["bytes"], stats["tx"]["bytes"])  # the port receives what the node sends
        except (ValueError, IndexError, KeyError):
            out[name] = None
    return out


class Supervisor:
    """Makes the cluster (up()), and takes it down (down()): run by `murmur-cluster serve`."""

    def __init__(self, d, nodes, slots, shape, slurm=True):
        self.d = os.path.abspath(d)
        self.n = nodes
        self.slots = slots
        self.shape = shape
        self.slurm = slurm
        self.net = None
        self.daemons = []  # (name, Popen), in start order
        self.holders = {}  # host name -> Popen
        self.made_privsep = False
        self.state = {"supervisor": os.getpid(), "dir": self.d, "nodes": [node_name(i) for i in range(nodes)],
                      "slots": slots, "shape": shape, "ready": False}

    def path(self, *parts):
        return os.path.join(self.d, *parts)

    def save(self):
        tmp = state_path(self.d) + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, state_path(self.d))

    def log(self, name):
        return open(self.path("log", name), "w")

    # --- making it

    def up(self):
        for sub in ("ssh", "slurm"):  # a former cluster's keys and Slurm state: this one makes its own
            shutil.rmtree(self.path(sub), ignore_errors=True)
        shutil.rmtree(self.path("local"), ignore_errors=True)  # a former cluster's node-local files
        for sub in ("log", "ssh", "slurm", os.path.join("slurm", "state"), os.path.join("slurm", "spool"),
                    "node-local"):
            os.makedirs(self.path(sub), exist_ok=True)
        self.state["node_local"] = self.path("node-local")
        self.save()
        self.net = Network(self.n, tag=f"{os.getpid()}-c", **self.shape)
        self.net.up()
        self.net.start_reaper()
        self.state["namespaces"] = [self.net.hub] + self.net.namespaces
        self.state["addresses"] = dict(zip(self.state["nodes"], self.net.addresses))
        hub = self.net.hub
        subprocess.run(["ip", "-n", hub, "addr", "add", f"{CONTROLLER_ADDRESS}/16", "dev", "br0"], check=True)
        for ns in self.net.namespaces:  # a host reaches the others through its default route
            subprocess.run(["ip", "-n", ns, "route", "add", "default", "dev", "eth0"], check=True)
        self.write_hosts()
        self.prepare_ssh()
        self.holder(CONTROLLER, hub)
        for name, ns in zip(self.state["nodes"], self.net.namespaces):
            self.holder(name, ns)
        self.state["holders"] = {name: p.pid for name, p in self.holders.items()}
        self.save()
        self.start_ssh()
        if self.slurm:
            self.start_slurm()
        self.wait_ready()
        self.state["daemons"] = [[name, p.pid] for name, p in self.daemons]
        self.state["ready"] = True
        self.save()

    def write_hosts(self):
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
                 f"{CONTROLLER_ADDRESS}\t{CONTROLLER}"]
        lines += [f"{a}\t{name}" for name, a in self.state["addresses"].items()]
        with open(self.path("hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(self.path("hostfile"), "w") as f:
            f.write("".join(f"{name} slots={self.slots}\n" for name in self.state["nodes"]))
        self.state["hostfile"] = self.path("hostfile")

    def holder(self, name, ns):
        """The process whose namespaces are host `name`'s: its network namespace `ns`, its own
        hostname, the cluster's /etc/hosts, and its ssh client config as /etc/ssh/ssh_config (so
        that a plain `ssh node1` works on every node, as on a cluster), and its own D/node-local."""
        local = self.path("local", name)
        os.makedirs(local, exist_ok=True)
        script = (f'hostname {name} && mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/ssh/ssh_config && '
                  'mount --bind "$2" "$3" && echo ready && exec sleep infinity')
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "--", "unshare", "--uts", "--mount",
                              "--propagation", "private", "--", "sh", "-c", script, self.path("hosts"),
                              self.state["ssh_config"], local, self.state["node_local"]],
                             stdout=subprocess.PIPE, stderr=self.log(f"holder-{name}.log"), text=True,
                             start_new_session=True)
        self.holders[name] = p
        if p.stdout.readline().strip() != "ready":
            p.wait()
            with open(self.path("log", f"holder-{name}.log")) as f:
                raise ClusterError(f"host {name} (namespace {ns}) could not be made: {f.read().strip()}")
        p.stdout.close()

    def daemon(self, host, name, argv, env=None):
        p = subprocess.Popen(enter(self.holders[host].pid) + argv, stdin=subprocess.DEVNULL,
                             stdout=self.log(f"{name}.out"), stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        self.daemons.append((name, p))
        return p

    def prepare_ssh(self):
        """Keys for the client and every node, authorized_keys, known_hosts, and the configs."""
        key = self.path("ssh", "id")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "murmur-cluster", "-f", key], check=True)
        shutil.copy(key + ".pub", self.path("ssh", "authorized_keys"))
        if not os.path.isdir(PRIVSEP):
            os.makedirs(PRIVSEP, mode=0o755)
            self.made_privsep = True
            self.state["made_privsep"] = True
        known = []
        with open(self.path("ssh", "sshd_config"), "w") as f:
            # ClientAlive*: a session whose client has gone quiet (a cut link) ends in about 15 s,
            # which closes a remote peer's lifeline (murmur_ssh): it checkpoints and stops. (At
            # 6 s, sessions were dropped on a live link while busy peers had both cores.)
            f.write(f"Port 22\nAuthorizedKeysFile {self.path('ssh', 'authorized_keys')}\nStrictModes no\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                    "PermitRootLogin prohibit-password\nLogLevel INFO\nMaxStartups 64\n"
                    "ClientAliveInterval 3\nClientAliveCountMax 5\nAcceptEnv no\n")
        for name in self.state["nodes"]:
            host_key = self.path("ssh", f"host_key-{name}")
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", host_key], check=True)
            with open(host_key + ".pub") as f:
                known.append(f"{name},{self.state['addresses'][name]} {' '.join(f.read().split()[:2])}\n")
        with open(self.path("ssh", "known_hosts"), "w") as f:
            f.writelines(known)
        self.state["ssh_config"] = self.path("ssh", "config")
        with open(self.state["ssh_config"], "w") as f:
            # ServerAlive*: ssh gives up on a host it has not heard from in about 15 s (a cut
            # link): the launcher then names that peer instead of waiting for ever.
            f.write(f"Host {CONTROLLER} node*\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {self.path('ssh', 'known_hosts')}\n  StrictHostKeyChecking yes\n"
                    "  BatchMode yes\n  ConnectTimeout 20\n  ServerAliveInterval 3\n  ServerAliveCountMax 5\n"
                    "  LogLevel ERROR\n")

    def start_ssh(self):
        for name in self.state["nodes"]:
            self.daemon(name, f"sshd-{name}", ["/usr/sbin/sshd", "-D", "-e", "-f", self.path("ssh", "sshd_config"),
                                              "-o", f"HostKey={self.path('ssh', f'host_key-{name}')}",
                                              "-o", f"PidFile={self.path('ssh', f'sshd-{name}.pid')}"])

    def start_slurm(self):
        key, sock = self.path("slurm", "munge.key"), self.path("slurm", "munge.sock")
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
        os.chmod(key, 0o600)
        for name in self.state["nodes"]:
            os.makedirs(self.path("slurm", "spool", name), exist_ok=True)
        conf = self.path("slurm", "slurm.conf")
        s = self.path("slurm")
        nodes = "".join(f"NodeName={name} NodeAddr={a} CPUs={self.slots} State=UNKNOWN\n"
                        for name, a in self.state["addresses"].items())
        with open(conf, "w") as f:
            f.write(slurm_conf("murmur", CONTROLLER, CONTROLLER_ADDRESS, SLURMCTLD_PORT, SLURMD_PORT, sock,
                               s, self.path("log"), nodes))
        self.state["slurm_conf"] = conf
        env = environment(self.state)
        self.daemon(CONTROLLER, "munged", ["munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}",
                                           f"--log-file={self.path('log', 'munged.log')}",
                                           f"--pid-file={s}/munged.pid", f"--seed-file={s}/munged.seed"], env)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        self.daemon(CONTROLLER, "slurmctld", ["slurmctld", "-D", "-i"], env)
        for name in self.state["nodes"]:
            self.daemon(name, f"slurmd-{name}", ["slurmd", "-D", "-N", name], env)

    def wait_ready(self, timeout_s=90):
        """Until ssh from the first node reaches every node and every slurmd is idle."""
        first = self.holders[self.state["nodes"][0]].pid
        env = environment(self.state)
        deadline = time.time() + timeout_s
        pending_ssh = list(self.state["nodes"])
        while time.time() < deadline:
            dead = [name for name, p in self.daemons if p.poll() is not None]
            if dead:
                raise ClusterError(f"{', '.join(dead)} exited at start; logs in {self.path('log')}:\n" + self.tail(dead))
            for name in list(pending_ssh):
                r = subprocess.run(enter(first) + ["ssh", name, "true"],
                                   capture_output=True, text=True, env=env, timeout=60)
                if r.returncode == 0:
                    pending_ssh.remove(name)
            idle = True
            if self.slurm:
                r = subprocess.run(enter(first) + ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                                   text=True, env=env)
                states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
                idle = r.returncode == 0 and all(states.get(name) == "idle" for name in self.state["nodes"])
            if idle and not pending_ssh:
                return
            time.sleep(0.3)
        what = (["ssh to " + ", ".join(pending_ssh)] if pending_ssh else []) + (["slurmd"] if self.slurm else [])
        raise ClusterError(f"not ready after {timeout_s} s ({' or '.join(what)}); logs in {self.path('log')}:\n"
                           + self.tail([name for name, _ in self.daemons]))

    def tail(self, names):
        text = []
        for name in names:
            for log in (f"{name}.out", f"{name}.log"):
                try:
                    with open(self.path("log", log)) as f:
                        body = f.read().strip()[-1500:]
                except OSError:
                    continue
                if body:
                    text.append(f"--- {log}:\n{body}")
        return "\n".join(text)

    # --- taking it down

    def down(self):
        """Stops the jobs, then every daemon (by pid, SIGTERM then SIGKILL), then deletes the
        namespaces: whatever else runs inside dies with them. Never raises."""
        if self.slurm and self.holders.get(self.state["nodes"][0]) and self.state.get("slurm_conf"):
            try:
                subprocess.run(enter(self.holders[self.state["nodes"][0]].pid) + ["scancel", "--user", "root"],
                               env=environment(self.state), capture_output=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for _, p in reversed(self.daemons):
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + 10
        for _, p in reversed(self.daemons):
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for p in self.holders.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.net is not None:
            self.net.down()
        if self.made_privsep:
            shutil.rmtree(PRIVSEP, ignore_errors=True)
        secrets = [self.path("ssh", "id"), self.path("slurm", "munge.key")]
        secrets += [self.path("ssh", f"host_key-{name}") for name in self.state["nodes"]]
        for secret in secrets:
            try:
                os.remove(secret)
            except OSError:
                pass
        try:
            os.remove(state_path(self.d))
        except OSError:
            pass


def stop(d, timeout_s=60):
    """Takes down the cluster in `d`: SIGTERM to its supervisor, which removes everything; if the
    supervisor is gone, removes what its state names. Returns what it did, in words."""
    state = read_state(d)
    if state is None:
        return f"no cluster in {d}"
    pid = state["supervisor"]
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + timeout_s
        while alive(pid) and time.time() < deadline:
            time.sleep(0.1)
        if alive(pid):
            raise ClusterError(f"the supervisor (pid {pid}) did not stop in {timeout_s} s; "
                               f"`kill -9 {pid}` and `tools/murmur-netem cleanup` remove the rest")
        return f"took down the cluster in {d}"
    # Its supervisor died without cleaning up (SIGKILL): its reaper removes the namespaces; make sure.
    from murmur_netem.network import remove_namespaces
    remove_namespaces(state.get("namespaces", []))
    if state.get("made_privsep"):
        shutil.rmtree(PRIVSEP, ignore_errors=True)
    os.remove(state_path(d))
    return f"removed the leftovers of a dead cluster in {d}"

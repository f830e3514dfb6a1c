"""One emulated network: a hub namespace with a bridge, and one namespace per peer.

Namespaces are named murmur-<pid>-<serial>-hub and murmur-<pid>-<serial>-<rank>: unique per
run, so parallel runs never collide, and a leftover names the process that made it, so cleanup()
can tell a dead run's namespaces from a live one's. Everything lives inside these namespaces
(the bridge too), so deleting them removes every interface, qdisc, iptables rule and murmur-delay
process, and the host's own network is never touched.

Latency, jitter and loss use the kernel's netem qdisc where it has one. Where it has not (some
cloud kernels), loss is an iptables `statistic` rule that drops that share of the packets a peer
receives, and latency and jitter are murmur-delay (tools/murmur_delay.cc), which holds the packets
a peer receives in an NFQUEUE. Both act on arrival: a packet dropped on its way out fails the
sender's send() with EPERM, which no real link does, and one held on its way out still counts
against the sending socket's TCP small-queue budget (about 1 ms of its rate), which throttles a
stream far below the link's rate. Each direction of a link loses and is delayed as with netem;
a lost packet has used the link's bandwidth. A Network removes itself on close() / leaving a `with`; a reaper
process does it if the owner dies without (SIGKILL): see start_reaper().
"""
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import tc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PREFIX = "murmur-"
SUBNET = "10.77"
_serial = itertools.count()


class NetemError(Exception):
    """The emulated network cannot be made here; the message says why and what to do."""


def is_shaped(network):
    """True iff a config's `network` section asks tc for anything (stragglers need no namespaces)."""
    return any((network or {}).get(k) for k in ("bandwidth", "latency", "jitter", "loss"))


def address(rank):
    """10.77.x.y of a rank: host number rank + 1 in a /16 (65533 peers)."""
    host = rank + 1
    return f"{SUBNET}.{host // 256}.{host % 256}"


def run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise NetemError(f"{what}: `{' '.join(cmd)}` failed: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def check_environment():
    """Raises NetemError naming what is missing: root, iproute2's ip and tc."""
    if os.geteuid() != 0:
        raise NetemError("network emulation needs root (it creates network namespaces with `ip netns`); "
                         "run as root, or drop the config's network bandwidth/latency/jitter/loss")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetemError(f"network emulation needs `{tool}` from iproute2 (apt-get install iproute2)")


class Network:
    """n peers behind one bridge; shaping from a config's `network` section (tc's strings)."""

    def __init__(self, n, bandwidth="", latency="", jitter="", loss="", tag=None, delay_tool=None):
        self.n = n
        self.shape = {"bandwidth": bandwidth or "", "latency": latency or "", "jitter": jitter or "",
                      "loss": loss or ""}
        for key, parse in (("bandwidth", tc.rate_bps), ("latency", tc.seconds), ("jitter", tc.seconds),
                           ("loss", tc.percent)):
            if self.shape[key]:
                try:
                    parse(self.shape[key])
                except ValueError as e:
                    raise NetemError(f"network.{key}: {e}")
        self.tag = tag or f"{os.getpid()}-{next(_serial)}"
        self.hub = f"{PREFIX}{self.tag}-hub"
        self.namespaces = [f"{PREFIX}{self.tag}-{r}" for r in range(n)]
        self.addresses = [address(r) for r in range(n)]
        self.created = []
        self.reaper = None
        self.delay_tool = delay_tool or os.environ.get("MURMUR_DELAY") or os.path.join(ROOT, "build/bin/murmur-delay")
        self.delayers = []  # murmur-delay processes (netfilter path)
        self.delay_reports = None  # what each delayer said at exit (stop_delayers())
        self.report_dir = None  # where the delayers write their reports (netfilter path)
        self.mechanism = ""  # how latency/jitter/loss are made: "netem" or "netfilter" (after up())

    @classmethod
    def from_config(cls, n, network, tag=None, delay_tool=None):
        network = network or {}
        return cls(n, *(network.get(k, "") for k in ("bandwidth", "latency", "jitter", "loss")), tag=tag,
                   delay_tool=delay_tool)

    def describe(self):
        parts = [f"{k} {v}" for k, v in self.shape.items() if v]
        how = f" (by {self.mechanism})" if self.mechanism else ""
        return f"{self.n} namespaces {PREFIX}{self.tag}-*, " + (", ".join(parts) or "unshaped") + how

    def exec_prefix(self, rank):
        """The command prefix that runs a program inside rank's namespace."""
        return ["ip", "netns", "exec", self.namespaces[rank]]

    def up(self):
        """Creates everything, or removes what it made and raises NetemError."""
        check_environment()
        try:
            self._create()
        except BaseException:
            self.down()
            raise
        return self

    def _create(self):
        ip = lambda ns, *a: run(["ip", "-n", ns] + list(a), f"namespace {ns}")  # noqa: E731
        for ns in [self.hub] + self.namespaces:
            run(["ip", "netns", "add", ns], "creating a network namespace")
            self.created.append(ns)
            ip(ns, "link", "set", "lo", "up")
        ip(self.hub, "link", "add", "br0", "type", "bridge")
        ip(self.hub, "link", "set", "br0", "up")
        impaired = any(self.shape[k] for k in ("latency", "jitter", "loss"))
        if impaired:
            self.mechanism = "netem" if self._has_netem() else "netfilter"
            if self.mechanism == "netfilter":
                self._check_netfilter()
        for r, ns in enumerate(self.namespaces):
            port = f"p{r}"
            ip(self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip(self.hub, "link", "set", port, "master", "br0", "up")
            ip(ns, "addr", "add", f"{self.addresses[r]}/16", "dev", "eth0")
            ip(ns, "link", "set", "eth0", "up")
            if self.mechanism == "netfilter":
                self._impair_by_netfilter(r, ns)
                for args in tc.peer_side("eth0", bandwidth=self.shape["bandwidth"]):
                    self._tc(ns, args)
            else:
                for args in tc.peer_side("eth0", **self.shape):
                    self._tc(ns, args)
            for args in tc.hub_side(port, self.shape["bandwidth"]):
                self._tc(self.hub, args)

    def _tc(self, ns, args):
        r = subprocess.run(["ip", "netns", "exec", ns, "tc"] + args, capture_output=True, text=True)
        if r.returncode == 0:
            return
        raise NetemError(f"tc in {ns}: `tc {' '.join(args)}` failed: {r.stderr.strip()}")

    def _has_netem(self):
        """Whether this kernel has the netem qdisc: tried on the hub's loopback, then removed."""
        add = ["ip", "netns", "exec", self.hub, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
        if subprocess.run(add, capture_output=True).returncode != 0:
            return False
        subprocess.run(["ip", "netns", "exec", self.hub, "tc", "qdisc", "del", "dev", "lo", "root"],
                       capture_output=True)
        return True

    def _check_netfilter(self):
        """Raises NetemError naming what the netfilter path lacks (iptables, murmur-delay)."""
        missing = "this kernel has no netem qdisc (sch_netem), and "
        if shutil.which("iptables") is None:
            raise NetemError(missing + "emulating loss or latency without it needs iptables "
                             "(apt-get install iptables); or drop network.latency/jitter/loss")
        if (self.shape["latency"] or self.shape["jitter"]) and not os.access(self.delay_tool, os.X_OK):
            raise NetemError(missing + f"emulating latency without it needs murmur-delay, not found at "
                             f"{self.delay_tool} (build it: apt-get install libnetfilter-queue-dev, then "
                             "cmake --build build; or set MURMUR_DELAY)")

    def _iptables(self, ns, args):
        run(["ip", "netns", "exec", ns, "iptables"] + args, f"iptables in {ns}")

    def _impair_by_netfilter(self, rank, ns):
        """Loss: an iptables statistic rule drops that share of what the peer receives. Latency and
        jitter: murmur-delay holds the rest in NFQUEUE 0 of the peer's namespace. The delayer binds
        the queue before the rule sends anything to it; it dies with the namespace."""
        if self.shape["loss"]:
            p = tc.percent(self.shape["loss"]) / 100
            self._iptables(ns, ["-A", "INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random",
                                "--probability", f"{p:.8f}", "-j", "DROP"])
        if not (self.shape["latency"] or self.shape["jitter"]):
            return
        report = os.path.join(self._report_dir(), f"delay{rank}.json")
        cmd = self.exec_prefix(rank) + [
            self.delay_tool, "--report", report, "--queue", "0", "--limit", str(tc.queue_packets(self.shape["bandwidth"])), "--seed", str(rank + 1),
            "--delay-us", f"{tc.seconds(self.shape['latency'] or '0ms') * 1e6:.0f}",
            "--jitter-us", f"{tc.seconds(self.shape['jitter'] or '0ms') * 1e6:.0f}"]
        with tempfile.TemporaryFile(mode="w+") as errors:  # a file: nobody must drain it later
            delayer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True,
                                       start_new_session=True)
            line = delayer.stdout.readline().strip()  # "ready", or EOF if it failed
            delayer.stdout.close()
            delayer.report = report
            delayer.rank = rank
            self.delayers.append(delayer)
            if line != "ready":
                delayer.wait()
                errors.seek(0)
                raise NetemError(f"murmur-delay in {ns} did not start: {errors.read().strip()}")
        self._iptables(ns, ["-A", "INPUT", "-i", "eth0", "-j", "NFQUEUE", "--queue-num", "0"])

    def link_bytes(self):
        """[(sent, received)] bytes of each peer over its link so far, headers and all, as its port
        on the bridge counts them (the port receives what the peer sends); None once down."""
        if self.hub not in self.created:
            return None
        stats = {i["ifname"]: i.get("stats64", {}) for i in
                 json.loads(run(["ip", "-n", self.hub, "-s", "-j", "link", "show"], "reading link counters"))}
        return [(stats[f"p{r}"]["rx"]["bytes"], stats[f"p{r}"]["tx"]["bytes"]) for r in range(self.n)]

    def _report_dir(self):
        if self.report_dir is None:
            self.report_dir = tempfile.mkdtemp(prefix="murmur-delay-")
        return self.report_dir

    def stop_delayers(self):
        """Ends the murmur-delay processes (SIGTERM, so each writes its report) and returns
        {rank: report}: packets passed and dropped, and how late it let them go. murmur-delay
        shares the cores with the peers, and a packet it holds past its time is latency the
        link did not ask for. {} on the netem path; a delayer that said nothing is left out."""
        if self.delay_reports is not None:
            return self.delay_reports
        for delayer in self.delayers:
            if delayer.poll() is None:
                delayer.terminate()
        self.delay_reports = {}
        for delayer in self.delayers:
            try:
                delayer.wait(timeout=5)
                with open(delayer.report) as f:
                    self.delay_reports[delayer.rank] = json.load(f)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                pass
        return self.delay_reports

    def down(self):
        """Kills what still runs inside and deletes the namespaces (idempotent, never raises)."""
        try:
            self.stop_delayers()
        except Exception:  # never raises: the namespaces must go regardless
            pass
        remove_namespaces(list(reversed(self.created)))  # kills the delayers too
        self.created = []
        for delayer in self.delayers:
            delayer.kill()
            delayer.wait()
        self.delayers = []
        self.delay_reports = None
        if self.report_dir is not None:
            shutil.rmtree(self.report_dir, ignore_errors=True)
            self.report_dir = None
        if self.reaper is not None and self.reaper.poll() is None:
            self.reaper.stdin.close()  # EOF: the reaper finds nothing left and exits
            self.reaper.wait()
        self.reaper = None

    close = down

    def start_reaper(self):
        """A process in its own session that removes this network once our end of a pipe closes:
        at down(), or when this process dies by any means, SIGKILL included."""
        script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "murmur-netem")
        self.reaper = subprocess.Popen([sys.executable, script, "reap", self.tag], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        return self.reaper

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


def list_namespaces():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)]


def alive(pid):
    """True while process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def remove_namespaces(names):
    for ns in names:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError, PermissionError):
                pass
        # A SIGKILLed process takes a moment to go (longer on a loaded machine): the namespace
        # goes only after it, so that "no namespace left" means "no peer left" too.
        for _ in range(100):
            if not any(alive(pid) for pid in pids):
                break
            time.sleep(0.05)
        for _ in range(50):  # a killed process may hold the namespace for a moment
            if subprocess.run(["ip", "netns", "del", ns], capture_output=True).returncode == 0:
                break
            if ns not in list_namespaces():
                break
            time.sleep(0.1)


def owner_alive(name):
    """Whether the process that made namespace `name` (murmur-<pid>-...) still runs."""
    try:
        os.kill(int(name[len(PREFIX):].split("-")[0]), 0)
        return True
    except (ValueError, IndexError):
        return False
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cleanup(tag=None, everything=False):
    """Removes leftover namespaces: those of `tag`, or every murmur one whose maker is gone (or all
    of them with everything=True). Returns the names removed."""
    names = list_namespaces()
    if tag is not None:
        names = [n for n in names if n.startswith(f"{PREFIX}{tag}-")]
    elif not everything:
        names = [n for n in names if not owner_alive(n)]
    remove_namespaces(names)
    return names

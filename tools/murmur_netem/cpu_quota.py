"""CPU quotas for the peers of one machine: network.stragglers in quota mode.

Every local peer runs in a cgroup of its own, <hierarchy>/murmur-<pid>-<serial>/rank<r>, with a
CPU quota of its share of this machine's cores (cores / peers), and a straggler of factor f with
1/f of that share. So a straggler is really slower, and the time it cannot use goes to nobody;
a sleeping straggler (network.straggler_mode: sleep) hands its cores to the others, which then
run faster than they would beside a real slow peer. A straggler that comes and goes
(network.straggler_steps) starts at its full share, and murmur-peer switches its own quota
between steps (runtime/straggler.cc), through $MURMUR_CPU_CGROUP.

cgroup v2 (cpu.max) where its hierarchy has the cpu controller, else v1 (cpu.cfs_quota_us), as on
machines whose v2 hierarchy has no cpu controller. Needs root. The cgroups go at down(); those of
a run whose launcher died (SIGKILL) go with an emulated network's reaper, else at the next up()
or `murmur-netem cleanup`.

A peer joins its cgroup before it enters an emulated network's namespace: `ip netns exec` mounts
a fresh /sys, without the cgroup filesystem. A peer there that switches its own quota (a window)
finds its cgroups through a bind mount of the run's, /run/murmur-<pid>-<serial>-cgroups
(visible_in_namespaces=True), which goes with them.
Python standard library only.
"""
import itertools
import os
import subprocess
import time

from .network import PREFIX, owner_alive

VIEWS = "/run"  # VIEWS/<the run's cgroup>-cgroups: its bind mount, for peers in network namespaces
PERIOD_US = 100_000
MIN_QUOTA_US = 1000  # the kernel's floor
_serial = itertools.count()


class QuotaError(Exception):
    """The quotas cannot be made here; the message says why."""


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise QuotaError(f"cannot write {text!r} to {path}: {e.strerror}") from None


def hierarchy():
    """("v2" or "v1", the mount point) of a cgroup hierarchy with the cpu controller."""
    v1 = None
    v2 = []
    for line in _read("/proc/self/mounts").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        # Not a run's own bind mount (/run/murmur-...-cgroups, below): it lists as a cgroup mount
        # too, and a launcher that took it for the hierarchy made its cgroups inside that run's.
        if os.path.dirname(fields[1]) == VIEWS and os.path.basename(fields[1]).startswith(PREFIX):
            continue
        if fields[2] == "cgroup2":
            v2.append(fields[1])
        elif fields[2] == "cgroup" and "cpu" in fields[3].split(","):
            v1 = fields[1]
    for mount in v2:
        try:
            if "cpu" in _read(os.path.join(mount, "cgroup.controllers")).split():
                return "v2", mount
        except OSError:
            pass
    if v1 is not None:
        return "v1", v1
    raise QuotaError("no cgroup hierarchy here has the cpu controller (no v1 cpu hierarchy is mounted, "
                     "and no cgroup2 mount lists cpu in its cgroup.controllers)")


def _remove(root, base):
    """Moves what still runs in `base`'s cgroups to the root one, then removes them (never raises).
    Another cleanup (a test's, a reaper's) may remove them first: what is gone counts as removed."""
    subs = []
    for parent, dirs, _ in os.walk(base):  # deepest first, below: a cgroup goes after its children
        subs += [os.path.join(parent, d) for d in dirs]
    for sub in sorted(subs, key=lambda d: d.count(os.sep), reverse=True) + [base]:
        for _ in range(50):
            try:
                pids = _read(os.path.join(sub, "cgroup.procs")).split()
                for pid in pids:
                    with open(os.path.join(root, "cgroup.procs"), "w") as f:
                        f.write(pid)
                os.rmdir(sub)
                break
            except FileNotFoundError:
                break
            except OSError:  # a process on its way out holds the cgroup a moment
                time.sleep(0.05)


def _unmount(view):
    subprocess.run(["umount", "-l", view], capture_output=True)
    try:
        os.rmdir(view)
    except OSError:
        pass


def cleanup(everything=False):
    """Removes the cgroups of runs whose launcher is gone (or all of murmur's), and their bind
    mounts. Returns the cgroups' names."""
    for line in _read("/proc/self/mounts").splitlines():
        view = line.split()[1]
        name = os.path.basename(view)
        if os.path.dirname(view) == VIEWS and name.startswith(PREFIX) and name.endswith("-cgroups"):
            if everything or not owner_alive(name):
                _unmount(view)
    try:
        _, root = hierarchy()
        names = [d for d in os.listdir(root) if d.startswith(PREFIX)]
    except (QuotaError, OSError):
        return []
    removed = []
    for name in names:
        if everything or not owner_alive(name):
            _remove(root, os.path.join(root, name))
            removed.append(name)
    return removed


class CpuQuotas:
    """One run's cgroups: up(), exec_prefix(rank) and environment(rank) for each peer, stats(),
    down(). `stragglers` is {rank: factor}; `window`: the stragglers come and go (their
    peers switch their own quota), so every peer starts at its share; `visible_in_namespaces`:
    those peers run in network namespaces, and see their cgroups through a bind mount."""

    def __init__(self, n, stragglers, window=False, cores=None, visible_in_namespaces=False):
        self.n = n
        self.stragglers = {int(r): float(f) for r, f in stragglers.items() if float(f) > 1}
        self.window = window
        self.cores = cores or len(os.sched_getaffinity(0))
        self.share = self.cores / n
        self.version = None
        self.root = None
        self.base = None
        self.view = None  # the bind mount of base, where peers in network namespaces find it
        self.visible_in_namespaces = visible_in_namespaces

    def quota(self, rank):
        """The cores `rank` starts with."""
        f = 1 if self.window else self.stragglers.get(rank, 1)
        return self.share / f

    def dir(self, rank):
        return os.path.join(self.base, f"rank{rank}")

    def describe(self):
        slow = ", ".join(f"rank {r} {self.share / f:.3f} (1/{f:g})" for r, f in sorted(self.stragglers.items()))
        when = ", in its window of steps" if self.window else ""
        return (f"cgroup {self.version} CPU quotas: every peer {self.share:.3f} cores "
                f"({self.cores} cores / {self.n} peers), {slow}{when}")

    def up(self):
        if os.geteuid() != 0:
            raise QuotaError("CPU quotas need root (they are cgroups murmur-launch makes)")
        self.version, self.root = hierarchy()
        cleanup()
        self.base = os.path.join(self.root, f"{PREFIX}{os.getpid()}-{next(_serial)}")
        try:
            os.mkdir(self.base)
        except OSError as e:
            raise QuotaError(f"cannot make {self.base}: {e.strerror}") from None
        try:
            if self.version == "v2":
                for parent in (self.root, self.base):
                    if "cpu" not in _read(os.path.join(parent, "cgroup.subtree_control")).split():
                        _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
            for rank in range(self.n):
                os.mkdir(self.dir(rank))
                us = max(MIN_QUOTA_US, int(self.quota(rank) * PERIOD_US))
                if self.version == "v2":
                    _write(os.path.join(self.dir(rank), "cpu.max"), f"{us} {PERIOD_US}")
                else:
                    _write(os.path.join(self.dir(rank), "cpu.cfs_period_us"), str(PERIOD_US))
                    _write(os.path.join(self.dir(rank), "cpu.cfs_quota_us"), str(us))
            if self.visible_in_namespaces and self.window:
                view = os.path.join(VIEWS, f"{os.path.basename(self.base)}-cgroups")
                os.mkdir(view)
                self.view = view
                r = subprocess.run(["mount", "--bind", self.base, view], capture_output=True, text=True)
                if r.returncode != 0:
                    raise QuotaError(f"cannot bind-mount {self.base} on {view}: {(r.stderr or r.stdout).strip()}")
        except BaseException:
            self.down()
            raise
        return self

    def exec_prefix(self, rank):
        """Joins rank's cgroup, then runs the command: every process and thread it starts is in it."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(self.dir(rank), "cgroup.procs")]

    def environment(self, rank):
        return {"MURMUR_CPU_CGROUP": os.path.join(self.view, f"rank{rank}") if self.view else self.dir(rank)}

    def stats(self):
        """[{rank, cores, throttled_s, throttled_periods}]: each peer's starting quota and how long
        the kernel held it back for having used it up; None once down."""
        if self.base is None:
            return None
        out = []
        for rank in range(self.n):
            fields = dict(line.split() for line in _read(os.path.join(self.dir(rank), "cpu.stat")).splitlines()
                          if len(line.split()) == 2)
            throttled = (int(fields.get("throttled_usec", 0)) / 1e6 if self.version == "v2"
                         else int(fields.get("throttled_time", 0)) / 1e9)
            out.append({"rank": rank, "cores": round(self.quota(rank), 4), "throttled_s": round(throttled, 3),
                        "throttled_periods": int(fields.get("nr_throttled", 0))})
        return out

    def down(self):
        """Removes the run's cgroups (idempotent, never raises)."""
        if self.view is not None:
            _unmount(self.view)
            self.view = None
        if self.base is not None and os.path.isdir(self.base):
            _remove(self.root, self.base)
        self.base = None

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

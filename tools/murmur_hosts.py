"""Hostfiles for murmur-launch --hostfile: reading them, and placing ranks on their hosts.

A hostfile holds one host per line, `host` or `host slots=N` as Open MPI's do (`#` starts a
comment). Ranks fill each host's slots in order, then the next host's (Open MPI's default,
--map-by slot), or take one slot of each host in turn (--map-by node); a world larger than all
the slots goes round again. A line without `slots=` counts one slot, so a plain list is round
robin either way. Each rank's local rank and local size count the ranks on its host, where every
loopback name (localhost, 127.0.0.1, ::1) is one host, and its node rank is its host's place
among the hosts that got ranks. Python standard library only.
"""

LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost", "ip6-loopback"}


class HostfileError(ValueError):
    pass


def read_hostfile(path):
    """[(host, slots)] in file order; HostfileError naming the file and line for a bad one."""
    hosts = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            slots = 1
            for field in fields[1:]:
                key, eq, value = field.partition("=")
                if key != "slots" or not eq:
                    raise HostfileError(f"{path}:{number}: '{field}' is not slots=N "
                                        f"(a line is: host [slots=N])")
                if not value.isdigit() or int(value) < 1:
                    raise HostfileError(f"{path}:{number}: slots={value}: not a positive count")
                slots = int(value)
            hosts.append((fields[0], slots))
    if not hosts:
        raise HostfileError(f"{path}: no hosts")
    return hosts


def same_host(name):
    """The key two names of one host share: every loopback name is this machine."""
    name = name.lower()
    return "localhost" if name in LOOPBACK else name


MAP_BY = ("slot", "node")


def slot_order(hosts, map_by="slot"):
    """The hosts' slots in the order ranks take them."""
    if map_by == "slot":
        return [host for host, slots in hosts for _ in range(slots)]
    left = [slots for _, slots in hosts]
    order = []
    while any(left):
        for i, (host, _) in enumerate(hosts):
            if left[i]:
                order.append(host)
                left[i] -= 1
    return order


class Placement:
    """Where each of n ranks runs: host[r], local_rank[r], local_size[r] and node_rank[r]."""

    def __init__(self, hosts, n, map_by="slot"):
        if map_by not in MAP_BY:
            raise HostfileError(f"--map-by {map_by}: one of {', '.join(MAP_BY)}")
        order = slot_order(hosts, map_by)
        self.host = [order[r % len(order)] for r in range(n)]
        keys = [same_host(h) for h in self.host]
        nodes = {}
        for key in keys:
            nodes.setdefault(key, len(nodes))
        self.node_rank = [nodes[key] for key in keys]
        counts = {}
        self.local_rank = []
        for key in keys:
            self.local_rank.append(counts.get(key, 0))
            counts[key] = counts.get(key, 0) + 1
        self.local_size = [counts[key] for key in keys]
        self.oversubscribed = n > len(order)

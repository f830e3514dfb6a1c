"""tc's spellings of rates, times and percentages, and the qdiscs that shape one link.

A link is shaped on egress only, at both of its ends: the peer's eth0 (what it sends) and the
hub's port toward the peer (what it receives) each get a token bucket at the bandwidth, so a
peer has that much in each direction, as on a switch. Latency, jitter and loss go on the peer's
eth0 alone, as a netem qdisc above the token bucket (netem delays, tbf paces; tbf under netem is
the layout tc-netem(8) documents), so one way between two peers is the configured latency.
Pure functions: they return argument lists for `tc`, and run nothing.
"""
import re

RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse(text, units, what):
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z%]+)", str(text).strip().lower())
    if not m or m.group(2) not in units:
        raise ValueError(f"{what}: {text!r} is not a number with one of {', '.join(units)}")
    return float(m.group(1)) * units[m.group(2)]


def rate_bps(text):
    """'100mbit' -> 1e8 (bits per second)."""
    return parse(text, RATE_UNITS, "bandwidth")


def seconds(text):
    """'5ms' -> 0.005."""
    return parse(text, TIME_UNITS, "time")


def percent(text):
    """'0.1%' -> 0.1."""
    return parse(text, {"%": 1.0}, "loss")


# The share of a link's rate that carries a TCP stream's payload: 1448 bytes in each 1514-byte
# frame (Ethernet, IPv4, TCP with timestamps at MTU 1500), as tbf counts them. The cost model's
# kTcpGoodputShare (runtime/comm_prediction.h) is the same number.
TCP_GOODPUT_SHARE = 1448 / 1514


def tbf_args(bandwidth):
    """tbf at `bandwidth`. The bucket holds 1 ms at the rate but at least 32 KiB (tbf splits a
    veth's larger GSO super-packets itself), so a burst after an idle moment gains little on a
    slow link; the queue holds 50 ms at the rate (at least 1 MiB), so TCP meets a bottleneck
    with a buffer, not a wall of drops."""
    bps = rate_bps(bandwidth)
    burst = max(32 << 10, int(bps / 8 * 1e-3))
    limit = max(1 << 20, int(bps / 8 * 0.05))
    return ["tbf", "rate", f"{int(bps)}bit", "burst", str(burst), "limit", str(limit)]


def queue_packets(bandwidth=""):
    """Packets a delaying queue may hold: a second of 1500-byte packets at the rate, at least
    10000 (100000 on an unlimited link)."""
    return max(10000, int(rate_bps(bandwidth) / 8 / 1500)) if bandwidth else 100000


def netem_args(latency="", jitter="", loss="", bandwidth=""):
    """netem for delay, jitter and loss; its queue holds a second of packets at the rate."""
    args = ["netem"]
    if latency:
        args += ["delay", f"{seconds(latency) * 1e6:.0f}us"]
        if jitter:
            args += [f"{seconds(jitter) * 1e6:.0f}us"]
    if loss:
        args += ["loss", f"{percent(loss)}%"]
    return args + ["limit", str(queue_packets(bandwidth))]


def peer_side(dev, bandwidth="", latency="", jitter="", loss=""):
    """tc argument lists for the peer's own interface: [netem root,] tbf."""
    cmds = []
    parent = ["root"]
    if latency or loss:
        cmds.append(["qdisc", "add", "dev", dev, "root", "handle", "1:"] +
                    netem_args(latency, jitter, loss, bandwidth))
        parent = ["parent", "1:"]
    if bandwidth:
        cmds.append(["qdisc", "add", "dev", dev] + parent + ["handle", "2:"] + tbf_args(bandwidth))
    return cmds


def hub_side(dev, bandwidth=""):
    """tc argument lists for the hub's port toward a peer: the peer's download rate."""
    return [["qdisc", "add", "dev", dev, "root", "handle", "2:"] + tbf_args(bandwidth)] if bandwidth else []

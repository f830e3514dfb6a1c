"""murmur_netem: emulated networks on one machine, for murmur runs and their tests.

Each peer gets its own network namespace with one interface (eth0, 10.77.x.y/16) joined by a
veth pair to a bridge in a hub namespace; tc shapes each link (tbf for the bandwidth, netem for
latency, jitter and loss), so traffic never leaves these namespaces. Used by tools/murmur-launch
(a `network:` section in the config) and by tools/murmur-netem (check, cleanup, measure).
Needs root and iproute2; python standard library only.
"""
from .network import Network, NetemError, cleanup, is_shaped  # noqa: F401

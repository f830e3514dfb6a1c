#!/usr/bin/python3
"""murmur-launch's hostfiles (tools/murmur_hosts.py): `host [slots=N]` lines, ranks filling each
host's slots in order (a plain list is round robin), local rank and size counted per host with
every loopback name one host, and a bad line refused by murmur-launch before anything starts,
naming the file and line. (Before: slots= was ignored, and localhost and 127.0.0.1 were two
hosts, so the peers on them each took half the cores they had.) And a launch whose peers all
fail before they start names them and says rank 0 never started (before: murmur-peer's
"config.yaml: cannot open config", from the summary it was asked for). And a launch whose peers
meet through transport.rendezvous: hosts, with no rendezvous directory. Python standard library only.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from murmur_hosts import HostfileError, Placement, read_hostfile  # noqa: E402

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


with tempfile.TemporaryDirectory() as d:
    hosts = read_hostfile(write(d, "slots", "# two nodes\nnode-a slots=2\n\nnode-b slots=2  # b\n"))
    check("read with slots", hosts, [("node-a", 2), ("node-b", 2)])
    p = Placement(hosts, 4)
    check("blocks", p.host, ["node-a", "node-a", "node-b", "node-b"])
    check("local ranks", p.local_rank, [0, 1, 0, 1])
    check("local sizes", p.local_size, [2, 2, 2, 2])
    check("fits", p.oversubscribed, False)
    check("blocks: node ranks", p.node_rank, [0, 0, 1, 1])
    p = Placement(hosts, 4, "node")
    check("--map-by node", p.host, ["node-a", "node-b", "node-a", "node-b"])
    check("--map-by node: local ranks", p.local_rank, [0, 0, 1, 1])
    check("--map-by node: node ranks", p.node_rank, [0, 1, 0, 1])
    p = Placement([("node-a", 3), ("node-b", 1)], 5, "node")  # b full after one, then round again
    check("--map-by node, unequal slots", p.host, ["node-a", "node-b", "node-a", "node-a", "node-a"])
    check("--map-by node, unequal slots: local sizes", p.local_size, [4, 1, 4, 4, 4])
    try:
        Placement(hosts, 4, "core")
        failures.append("--map-by core was accepted")
    except HostfileError as e:
        check("--map-by core refused", "--map-by core" in str(e), True)

    p = Placement(read_hostfile(write(d, "plain", "node-a\nnode-b\n")), 5)
    check("round robin", p.host, ["node-a", "node-b", "node-a", "node-b", "node-a"])
    check("round robin local ranks", p.local_rank, [0, 0, 1, 1, 2])
    check("round robin local sizes", p.local_size, [3, 2, 3, 2, 3])
    check("oversubscribed", p.oversubscribed, True)

    p = Placement(read_hostfile(write(d, "loop", "localhost\n127.0.0.1\nLOCALHOST\n::1\n")), 4)
    check("loopback names are one host: local ranks", p.local_rank, [0, 1, 2, 3])
    check("loopback names are one host: local sizes", p.local_size, [4, 4, 4, 4])

    for text, words in [("node-a slots=0\n", "slots=0"), ("node-a cpus=2\n", "'cpus=2'"),
                        ("node-a\nnode-b slots=x\n", ":2: slots=x"), ("# none\n\n", "no hosts")]:
        path = write(d, "bad", text)
        try:
            read_hostfile(path)
            failures.append(f"{text!r}: accepted")
        except HostfileError as e:
            if words not in str(e) or path not in str(e):
                failures.append(f"{text!r}: {e} (want {words!r} and the path)")

    # murmur-launch says so and starts nothing (no ssh is tried).
    path = write(d, "bad", "node-a\nnode-b slots=two\n")
    r = subprocess.run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", "--hostfile", path,
                        "--out", os.path.join(d, "run")] + sys.argv[1:],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0 or f"{path}:2: slots=two" not in r.stderr + r.stdout:
        failures.append(f"murmur-launch with a bad hostfile: code {r.returncode}, {r.stderr + r.stdout!r}")

    # Peers that fail before they start (a wrapper that resolves the config, then exits 3).
    real = sys.argv[sys.argv.index("--peer") + 1]
    failing = write(d, "failing-peer", f"""#!/bin/sh
case " $* " in *" --print-config "*) exec {real} "$@";; esac
echo "failing-peer: cannot start" >&2; exit 3
""")
    os.chmod(failing, 0o755)
    config = write(d, "c.yaml", "run: {name: fail}\nmodel: {name: mlp, hidden: [8]}\n"
                   "data: {name: synthetic, synthetic: {train_size: 64, test_size: 32}}\n")
    r = subprocess.run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", config, "--peer", failing,
                        "--out", os.path.join(d, "failed")], capture_output=True, text=True, timeout=120)
    said = r.stderr + r.stdout
    if (r.returncode == 0 or "peer 0 exited with code 3" not in said or "rank 0 never started" not in said
            or "cannot open config" in said):
        failures.append(f"murmur-launch with peers that fail at start: code {r.returncode}, {said!r}")

    # transport.rendezvous: hosts: the launcher gives the host list ($MURMUR_HOSTS), the peers
    # listen on base_port + local rank, and no rendezvous directory is made.
    base = 20000 + os.getpid() % 20000
    out = os.path.join(d, "hosts-rdv")
    r = subprocess.run([os.path.join(ROOT, "tools", "murmur-launch"), "-n", "2", config, "--peer", real,
                        "--out", out, "--set", "transport.rendezvous=hosts",
                        "--set", f"transport.base_port={base}", "--set", "train.max_steps=8"],
                       capture_output=True, text=True, timeout=120)
    said = r.stderr + r.stdout
    if (r.returncode != 0 or not os.path.exists(os.path.join(out, "summary.json"))
            or os.path.exists(os.path.join(out, "rendezvous"))
            or f"127.0.0.1:{base + 1}" not in said):
        failures.append(f"murmur-launch with transport.rendezvous=hosts: code {r.returncode}, "
                        f"{said[-2000:]!r}")

for f in failures:
    print("FAILED:", f)
print(f"hosts_test: {'ok' if not failures else f'{len(failures)} failure(s)'}")
sys.exit(1 if failures else 0)

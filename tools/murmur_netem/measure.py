"""iperf-like checks of an emulated link with python sockets: one TCP stream from one peer's
namespace to another's. Goodput is bytes over the time from the first byte sent to the
receiver's acknowledgement of the last (so one extra one-way latency); the connect time is one
round trip. Run as `python3 -m murmur_netem.measure serve|send ...` inside a namespace.
"""
import json
import os
import socket
import subprocess
import sys
import time

PORT = 5201
CHUNK = 1 << 20


def serve(host, port):
    with socket.create_server((host, port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            total = 0
            while True:
                data = conn.recv(CHUNK)
                if not data:
                    break
                total += len(data)
            conn.sendall(total.to_bytes(8, "little"))


def send(host, port, nbytes):
    buf = b"\0" * CHUNK
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=120) as s:
        t1 = time.perf_counter()
        left = nbytes
        while left > 0:
            left -= s.send(buf[:min(left, CHUNK)])
        s.shutdown(socket.SHUT_WR)
        got = int.from_bytes(s.recv(8), "little")
        t2 = time.perf_counter()
    print(json.dumps({"bytes": got, "seconds": t2 - t1, "rtt_s": t1 - t0}))


def stream(net, src, dst, nbytes, timeout=300):
    """{"bytes", "seconds", "gbit_s", "rtt_s"} of nbytes from rank src to rank dst of `net`."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=here)
    mod = [sys.executable, "-m", "murmur_netem.measure"]
    server = subprocess.Popen(net.exec_prefix(dst) + mod + ["serve", net.addresses[dst], str(PORT)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("measure: the receiving side did not start")
        out = subprocess.run(net.exec_prefix(src) + mod + ["send", net.addresses[dst], str(PORT), str(nbytes)],
                             capture_output=True, text=True, env=env, timeout=timeout, check=True).stdout
        r = json.loads(out)
    finally:
        server.kill()
        server.wait()
    r["gbit_s"] = r["bytes"] * 8 / r["seconds"] / 1e9
    return r


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

"""iperf- and ping-like checks of an emulated link with python sockets, from one peer's namespace
to another's:
- stream: one TCP stream. Goodput is bytes over the time from the first byte sent to the
  receiver's acknowledgement of the last (so one extra one-way latency); the connect time is one
  round trip.
- ping: round trips of 1-byte TCP messages (TCP_NODELAY), one at a time.
- datagrams: how many of N UDP datagrams arrive (the link's loss, which TCP would hide).
- messages: N messages of a size over one TCP connection, one every gap, as a training step
  sends its model: each one's delivery time, from the sender's first byte to the receiver's
  last (CLOCK_MONOTONIC, which every namespace shares).
Run as `python3 -m murmur_netem.measure serve|send|echo|ping|sink|spray|take|give ...` inside a
namespace.
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


def echo(host, port):
    with socket.create_server((host, port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(64):
                conn.sendall(data)


def ping(host, port, count):
    with socket.create_connection((host, port), timeout=60) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(count):
            t = time.perf_counter()
            s.sendall(b"x")
            s.recv(1)
            rtts.append(time.perf_counter() - t)
    print(json.dumps({"rtt_s": rtts}))


def sink(host, port, seconds):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, port))
        s.settimeout(seconds)
        print("ready", flush=True)
        got = 0
        try:
            while s.recv(64) != b"end":
                got += 1
        except socket.timeout:
            pass
    print(json.dumps({"received": got}), flush=True)


def spray(host, port, count):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(count):
            s.sendto(b"d", (host, port))
            time.sleep(0.0002)  # never overrun a queue: only the link may lose them
        time.sleep(0.5)
        for _ in range(50):  # the end marker must get through the loss too
            s.sendto(b"end", (host, port))


def take(host, port, size, count):
    """Receives `count` messages of `size` bytes; prints when each one's last byte came."""
    with socket.create_server((host, port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        done = []
        with conn:
            for _ in range(count):
                left = size
                while left > 0:
                    data = conn.recv(min(left, CHUNK))
                    if not data:
                        raise RuntimeError(f"measure: the sender closed after {len(done)} messages")
                    left -= len(data)
                done.append(time.monotonic())
    print(json.dumps({"done": done}), flush=True)


def give(host, port, size, count, gap):
    """Sends `count` messages of `size` bytes, one every `gap` seconds; prints when each began."""
    buf = b"\0" * size
    began = []
    with socket.create_connection((host, port), timeout=120) as s:
        for _ in range(count):
            began.append(time.monotonic())
            s.sendall(buf)
            time.sleep(max(0.0, began[-1] + gap - time.monotonic()))
    print(json.dumps({"began": began}))


def _pair(net, src, dst, serve_args, client_args, timeout):
    """Runs a server in dst's namespace and a client in src's; returns (client json, server json)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=here)
    mod = [sys.executable, "-m", "murmur_netem.measure"]
    server = subprocess.Popen(net.exec_prefix(dst) + mod + serve_args, stdout=subprocess.PIPE, text=True, env=env)
    try:
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("measure: the receiving side did not start")
        out = subprocess.run(net.exec_prefix(src) + mod + client_args, capture_output=True, text=True, env=env,
                             timeout=timeout, check=True).stdout
        served = server.communicate(timeout=timeout)[0]
    finally:
        server.kill()
        server.wait()
    return (json.loads(out) if out.strip() else {}), (json.loads(served) if served.strip() else {})


def round_trips(net, src, dst, count=50, timeout=120):
    """The round-trip times (seconds) of `count` 1-byte TCP messages from rank src to rank dst."""
    mine, _ = _pair(net, src, dst, ["echo", net.addresses[dst], str(PORT)],
                    ["ping", net.addresses[dst], str(PORT), str(count)], timeout)
    return mine["rtt_s"]


def delivered(net, src, dst, count=2000, timeout=120):
    """The share of `count` UDP datagrams from rank src that rank dst receives."""
    _, theirs = _pair(net, src, dst, ["sink", net.addresses[dst], str(PORT), "10"],
                      ["spray", net.addresses[dst], str(PORT), str(count)], timeout)
    return theirs["received"] / count


def stream(net, src, dst, nbytes, timeout=300):
    """{"bytes", "seconds", "gbit_s", "rtt_s"} of nbytes from rank src to rank dst of `net`."""
    r, _ = _pair(net, src, dst, ["serve", net.addresses[dst], str(PORT)],
                 ["send", net.addresses[dst], str(PORT), str(nbytes)], timeout)
    r["gbit_s"] = r["bytes"] * 8 / r["seconds"] / 1e9
    return r


def messages(net, src, dst, size, count=40, gap=0.05, timeout=300):
    """The delivery times (seconds) of `count` messages of `size` bytes from rank src to rank dst,
    one every `gap` seconds: the first is in TCP's slow start, the rest see the link as a run's
    steps do."""
    mine, theirs = _pair(net, src, dst, ["take", net.addresses[dst], str(PORT), str(size), str(count)],
                         ["give", net.addresses[dst], str(PORT), str(size), str(count), str(gap)], timeout)
    return [d - b for b, d in zip(mine["began"], theirs["done"])]


if __name__ == "__main__":
    verb, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if verb == "serve":
        serve(host, port)
    elif verb == "echo":
        echo(host, port)
    elif verb == "sink":
        sink(host, port, float(sys.argv[4]))
    elif verb == "ping":
        ping(host, port, int(sys.argv[4]))
    elif verb == "spray":
        spray(host, port, int(sys.argv[4]))
    elif verb == "take":
        take(host, port, int(sys.argv[4]), int(sys.argv[5]))
    elif verb == "give":
        give(host, port, int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
    else:
        send(host, port, int(sys.argv[4]))

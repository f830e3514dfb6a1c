#!/usr/bin/python3
"""Gloo baseline for `murmur-bench comm`: PyTorch's Gloo backend (torch.distributed, what DDP on
CPU uses) over TCP on 127.0.0.1, running the same patterns as tools/bench_mpi's MPI program. These
are a stream of `rounds` messages from rank 0 to rank 1 acked at the end ("p2p"), the ring-neighbor
exchange with isend/irecv to the left and right ("ring_exchange"), and all_reduce of floats,
summed ("allreduce"). Each pattern does 2 warm-up rounds, then takes the mean of the timed rounds,
each round opened by a barrier; rounds = clamp(256 MiB / bytes, 3, 50). One JSON object per row
on stdout, backend "gloo", as murmur-bench comm --json prints them.

Needs Debian's python3-torch (hence /usr/bin/python3). Each rank runs one intra-op thread, its
share of the cores, as murmur's peers do.
  tools/bench_gloo.py --processes 2,4 --sizes 1048576,16777216
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rounds_for(nbytes):
    return max(3, min(50, (256 << 20) // nbytes))


def timed(rounds, body):
    for _ in range(2):
        body()
    total = 0.0
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        body()
        total += time.perf_counter() - start
    return total / rounds


def rank_main(rank, n, port, sizes, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=n)
    left, right = (rank + n - 1) % n, (rank + 1) % n
    rows = []
    for nbytes in sizes:
        count = nbytes // 4
        rounds = rounds_for(nbytes)
        send = torch.zeros(count)
        from_left, from_right = torch.zeros(count), torch.zeros(count)
        one = torch.zeros(1)

        def p2p():
            if rank == 0:
                for q in [dist.isend(send, 1) for _ in range(rounds)]:
                    q.wait()
                dist.recv(one, 1)
            elif rank == 1:
                for q in [dist.irecv(from_left, 0) for _ in range(rounds)]:
                    q.wait()
                dist.send(one, 0)

        seconds = timed(1, p2p) / rounds
        rows.append(("p2p", nbytes, seconds, nbytes))

        peers = [(right, from_left, left)] + ([(left, from_right, right)] if n > 2 else [])

        def exchange():
            qs = []
            for to, into, source in peers:
                qs.append(dist.irecv(into, source))
                qs.append(dist.isend(send, to))
            for q in qs:
                q.wait()

        seconds = timed(rounds, exchange)
        rows.append(("ring_exchange", nbytes, seconds, nbytes * len(peers)))

        data = torch.zeros(count)
        seconds = timed(rounds, lambda: dist.all_reduce(data, op=dist.ReduceOp.SUM))
        rows.append(("allreduce", nbytes, seconds, nbytes))
    if rank == 0:
        with open(out, "w") as f:
            for pattern, nbytes, seconds, moved in rows:
                f.write(json.dumps({"backend": "gloo", "pattern": pattern, "processes": n,
                                    "bytes": nbytes, "seconds": seconds,
                                    "gbps": moved * 8 / seconds / 1e9}) + "\n")
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="2,4", help="comma-separated rank counts")
    parser.add_argument("--sizes", default="65536,1048576,16777216,67108864",
                        help="comma-separated message sizes in bytes")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    out = f"/tmp/murmur-bench-gloo-{os.getpid()}.jsonl"
    try:
        for n in (int(p) for p in args.processes.split(",")):
            mp.spawn(rank_main, args=(n, free_port(), sizes, out), nprocs=n, join=True)
            with open(out) as f:
                sys.stdout.write(f.read())
            sys.stdout.flush()
    finally:
        if os.path.exists(out):
            os.remove(out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The benchmarks' rows that the docs' tables quote, as a user runs them: `murmur-bench comm
--patterns p2p,put --json` prints a p2p row for every backend and a put row exactly for those
with one-sided put (ucx, ofi), and tools/bench_gloo.py (tools/bench_mpi's Gloo column) prints
p2p, ring_exchange and allreduce rows for 2 processes; tools/bench_mpi itself, at one small size
and two rounds, prints each of murmur's rows with its Open MPI ratios, as medians of the rounds.
Checks that the rows are there and well formed, never their speed. The Gloo part is skipped
without Debian's python3-torch, the bench_mpi part without Open MPI's mpicc.
"""
import math
import shutil
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rows_of(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def check_row(row, failures):
    if not (row["seconds"] > 0 and row["gbps"] > 0 and row["bytes"] == 65536 and row["processes"] == 2):
        failures.append(f"a malformed row: {row}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    args = parser.parse_args()
    failures = []

    p = subprocess.run([args.bench, "comm", "--processes", "2", "--sizes", "65536",
                        "--patterns", "p2p,put", "--json"], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        failures.append(f"murmur-bench comm exited {p.returncode}: {p.stderr[-2000:]}")
    rows = rows_of(p.stdout)
    backends = sorted({r["backend"] for r in rows})
    for b in backends:
        patterns = sorted(r["pattern"] for r in rows if r["backend"] == b)
        want = ["p2p", "put"] if b.split(":")[0] in ("ucx", "ofi") else ["p2p"]
        if patterns != want:
            failures.append(f"{b}: rows {patterns}, expected {want}")
    if "tcp" not in backends:
        failures.append(f"no tcp rows among {backends}")
    for r in rows:
        check_row(r, failures)

    have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed as d; "
                                 "assert d.is_gloo_available()"], capture_output=True).returncode == 0
    if have_torch:
        p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "bench_gloo.py"),
                            "--processes", "2", "--sizes", "65536"], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            failures.append(f"bench_gloo.py exited {p.returncode}: {p.stderr[-2000:]}")
        gloo = rows_of(p.stdout)
        if sorted(r["pattern"] for r in gloo) != ["allreduce", "p2p", "ring_exchange"]:
            failures.append(f"bench_gloo.py rows: {gloo}")
        for r in gloo:
            check_row(r, failures)
    else:
        print("bench_rows_test: no python3-torch with Gloo: its rows not checked")

    if shutil.which("mpicc") and shutil.which("mpirun"):
        build = os.path.dirname(os.path.dirname(os.path.abspath(args.bench)))
        env = dict(os.environ, BENCH_MPI_ROUNDS="2", BENCH_MPI_SIZES="65536")
        p = subprocess.run([os.path.join(ROOT, "tools", "bench_mpi"), build, "--backends", "tcp",
                            "--processes", "2"], capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            failures.append(f"bench_mpi exited {p.returncode}: {p.stderr[-2000:]}")
        lines = p.stdout.splitlines()
        if "bench_mpi: median of 2 interleaved rounds per row" not in lines:
            failures.append(f"bench_mpi does not say it took medians of 2 rounds: {p.stdout[-2000:]}")
        table = [l.split() for l in lines if l.startswith("tcp ")]
        if sorted(t[1] for t in table) != ["allreduce", "allreduce_direct", "allreduce_hd", "p2p",
                                           "ring_exchange"]:
            failures.append(f"bench_mpi's tcp rows: {table}")
        for t in table:
            # backend pattern np bytes Gbit/s mpi-tcp mpi-vader gloo x-tcp x-vader x-gloo
            if t[2] != "2" or t[3] != "65536" or not all(math.isfinite(float(v)) and float(v) > 0 for v in t[4:7] + t[8:10]):
                failures.append(f"bench_mpi: a malformed row: {t}")
    else:
        print("bench_rows_test: no Open MPI (mpicc, mpirun): tools/bench_mpi not checked")

    for f in failures:
        print("bench_rows_test: FAILED:", f)
    print(f"bench_rows_test: {len(rows)} murmur-bench rows ({', '.join(backends)}); "
          f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Open MPI's mpirun as the launcher (murmur links no MPI; mpirun only starts the processes):
`mpirun -n 4 -x MURMUR_SECRET murmur-peer --config C --out D`, with no rendezvous set, meets in
a directory of that launch's own (D/rendezvous/pmix-<namespace>), and the peer that evaluates
the average model writes D/summary.json. Run twice in the same directory: the second launch
meets in its own directory, not among the first one's address files. Before: mpirun needed transport.rendezvous_dir by hand, and wrote no summary.
Exits 77 (CTest's skip) without mpirun (Debian's openmpi-bin).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from launch_util import Checks, ring_config  # noqa: E402

check = Checks("mpirun_test")


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    if not shutil.which("mpirun"):
        check.skip("no mpirun (Debian's openmpi-bin)")
    env = dict(os.environ, MURMUR_SECRET="m" * 64, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,tcp", OMPI_MCA_rmaps_base_oversubscribe="1")
    for k in [k for k in env if k.startswith(("MURMUR_RANK", "MURMUR_WORLD", "SLURM_", "MURMUR_LAUNCHER"))]:
        del env[k]
    with tempfile.TemporaryDirectory(prefix="murmur-mpirun-") as d:
        config, out = os.path.join(d, "c.yaml"), os.path.join(d, "run")
        with open(config, "w") as f:
            f.write(ring_config("mpirun"))
        for attempt in (1, 2):
            r = subprocess.run(["mpirun", "-n", "4", "-x", "MURMUR_SECRET", peer, "--config", config, "--out", out],
                               env=env, capture_output=True, text=True, timeout=180)
            text = r.stdout + r.stderr
            if not check(r.returncode == 0, f"launch {attempt}: mpirun exited {r.returncode}:\n{text[-3000:]}"):
                break
            try:
                with open(os.path.join(out, "summary.json")) as f:
                    s = json.load(f)
            except (OSError, ValueError) as e:
                check(False, f"launch {attempt}: summary.json: {e}\n{text[-3000:]}")
                break
            check(s["world_size"] == 4 and "average_model" in s and [p.get("steps") for p in s["peers"]] == [40] * 4,
                  f"launch {attempt}: summary.json: world {s['world_size']}, peers {s['peers']}")
            rdv = sorted(os.listdir(os.path.join(out, "rendezvous")))
            check(len(rdv) == attempt and all(x.startswith("pmix-") for x in rdv),
                  f"launch {attempt}: rendezvous directories {rdv}")
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

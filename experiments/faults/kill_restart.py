#!/usr/bin/python3
"""kill_restart.py: 4 peers, one killed with SIGKILL at a random time and restarted; N runs.

    experiments/faults/kill_restart.py [--runs 10] [--epochs 1] [--config configs/ring.yaml]
                                       [--backend tcp|ucx|ofi] [--fault kill|freeze]

--fault freeze instead stops the peer with SIGSTOP for 3 peer timeouts and continues it with
SIGCONT (no restart): its neighbors must drop it and go on, and it must finish alone.

Runs the config once without a fault (the reference), then N times with a random peer killed at a
random moment of the run (between 20% and 70% of the reference's wall time) and restarted 1 s
later with the same command: it resumes from its checkpoint and rejoins (run.on_peer_failure:
continue, murmur-launch --keep-going). Prints each run's final accuracy of the average model
against the reference's, and counts hangs (a run still going after --timeout seconds is killed
and counted as a hang). Exits nonzero if any run hangs or lands more than --tolerance points off.
"""
import argparse
import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER_TIMEOUT_MS = 5000


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/ring.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--peer", default=os.path.join(ROOT, "build/bin/murmur-peer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "runs/faults/kill_restart"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a run counts as hung")
    ap.add_argument("--tolerance", type=float, default=1.0, help="accuracy points allowed off the reference")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="tcp", help="transport.backend: tcp, ucx or ofi")
    ap.add_argument("--fault", choices=["kill", "freeze"], default="kill")
    return ap.parse_args()


def sets(args):
    s = [f"train.epochs={args.epochs}", "checkpoint.every_steps=50",
         f"transport.peer_timeout_ms={PEER_TIMEOUT_MS}", "run.threads=1",
         f"transport.backend={args.backend}"] + args.overrides
    return [x for o in s for x in ("--set", o)]


def launch(args, out, env):
    cmd = [os.path.join(ROOT, "tools/murmur-launch"), "--peer", args.peer, "-n", "4", args.config,
           "--out", out, "--keep-going", "--quiet"] + sets(args)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def restart(args, out, rank, env):
    """The command murmur-launch gave this peer, run again by hand; its output goes to
    <out>/restarted.log (a pipe nobody drains could fill and stop it)."""
    cmd = [args.peer, "--out", out, "--rank", str(rank), "--world-size", "4", "--config",
           os.path.abspath(args.config), "--set", f"transport.rendezvous_dir={out}/rendezvous"]
    cmd += sets(args) + ["--set", "run.on_peer_failure=continue"]
    with open(os.path.join(out, "restarted.log"), "w") as log:
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def rejoined(out):
    """Whether the restarted peer was taken back by its neighbors (it logs "rejoined at step")."""
    try:
        with open(os.path.join(out, "restarted.log")) as f:
            return "rejoined at step" in f.read()
    except OSError:
        return False


def wait_all(procs, deadline):
    """True iff every process ended before the deadline; kills the rest otherwise."""
    for p in procs:
        left = deadline - time.time()
        try:
            p.communicate(timeout=max(0.1, left))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            return False
    return True


def results(out):
    """(accuracy of the average model, [each peer's accuracy]) from rank<r>/result.json. A peer
    restarted after the others had finished reports an average of its own: the average over
    the most ranks is the run's."""
    peers, average, widest = [], None, -1
    for path in sorted(glob.glob(os.path.join(out, "rank*", "result.json"))):
        with open(path) as f:
            r = json.load(f)
        peers.append(r["test_accuracy"])
        if "average_model" in r and len(r["average_model"].get("ranks", [])) > widest:
            average = r["average_model"]["test_accuracy"]
            widest = len(r["average_model"].get("ranks", []))
    return average, peers


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    env = dict(os.environ, MURMUR_SECRET="kill-restart-" + str(os.getpid()))
    os.makedirs(args.out, exist_ok=True)
    ref_out = os.path.join(args.out, "reference")
    subprocess.run(["rm", "-rf", ref_out])
    t0 = time.time()
    p = launch(args, ref_out, env)
    if not wait_all([p], t0 + args.timeout) or p.returncode != 0:
        sys.exit(f"kill_restart: the fault-free reference run failed (see {ref_out})")
    ref_wall = time.time() - t0
    ref_avg, _ = results(ref_out)
    print(f"reference (no fault): average model {100 * ref_avg:.2f}%, {ref_wall:.0f} s", flush=True)
    rows, hangs, off = [], 0, 0
    for i in range(args.runs):
        out = os.path.join(args.out, f"run{i}")
        subprocess.run(["rm", "-rf", out])
        rank = rng.randrange(4)
        at = rng.uniform(0.2, 0.7) * ref_wall
        t0 = time.time()
        launcher = launch(args, out, env)
        time.sleep(at)
        pattern = f"[-]-out {out} --rank {rank} "
        if args.fault == "kill":
            subprocess.run(["pkill", "-KILL", "-f", "--", pattern])
            time.sleep(1)
            again = restart(args, out, rank, env)
            procs = [launcher, again]
        else:
            subprocess.run(["pkill", "-STOP", "-f", "--", pattern])
            time.sleep(3 * PEER_TIMEOUT_MS / 1000)
            subprocess.run(["pkill", "-CONT", "-f", "--", pattern])
            again, procs = None, [launcher]
        finished = wait_all(procs, t0 + args.timeout)
        avg, peers = results(out)
        back = rejoined(out)
        if not finished or avg is None:
            hangs += not finished
            print(f"run {i}: killed rank {rank} at {at:.1f} s: {'HUNG' if not finished else 'no average'}",
                  flush=True)
            rows.append({"run": i, "rank": rank, "at_s": at, "hung": not finished})
            continue
        delta = 100 * (avg - ref_avg)
        off += abs(delta) > args.tolerance
        what = "killed" if args.fault == "kill" else "froze"
        after = (f"rejoined: {'yes' if back else 'no (trained alone)'}" if again
                 else f"{len(peers)} peers finished")
        print(f"run {i}: {what} rank {rank} at {at:.1f} s: average model {100 * avg:.2f}% "
              f"({delta:+.2f} points), peers {' '.join(f'{100 * a:.2f}' for a in peers)}, "
              f"{after}, {time.time() - t0:.0f} s", flush=True)
        rows.append({"run": i, "rank": rank, "at_s": at, "hung": False, "average": avg,
                     "delta_points": delta, "peers": peers, "rejoined": back,
                     "finished_peers": len(peers),
                     "restart_exit": again.returncode if again else None})
    deltas = [r["delta_points"] for r in rows if "delta_points" in r]
    print(f"{len(rows)} runs: {hangs} hung, {off} more than {args.tolerance} point(s) off, "
          f"{sum(bool(r.get('rejoined')) for r in rows)} rejoined, "
          f"{sum(r.get('finished_peers') == 4 for r in rows)} with all 4 peers finished; largest |delta| {max(map(abs, deltas)) if deltas else float('nan'):.2f} points")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"reference": ref_avg, "runs": rows}, f, indent=1)
    sys.exit(1 if hangs or off else 0)


if __name__ == "__main__":
    main()

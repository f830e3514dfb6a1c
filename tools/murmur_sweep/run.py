"""Runs the points of a sweep one after another on this machine, or submits each to Slurm.

A point's run directory is <sweep dir>/<point id>/. A point is done when its summary.json is
complete (every peer reported, none stopped early); done points are skipped, so running the
sweep again resumes it (an interrupted point resumes from its peers' newest checkpoints).
One progress line covers the whole sweep, with an ETA from this session's pace.
"""
import json
import os
import shlex
import subprocess
import sys
import time

from . import checkpoints


def is_done(run_dir):
    """True iff run_dir/summary.json exists and every peer finished with figures."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return False
    peers = s.get("peers") or []
    return (len(peers) == s.get("world_size") and
            all("test_accuracy" in p and not p.get("failed") and not p.get("stopped_early") for p in peers))


def value_text(v):
    """A --set value: YAML flow text (JSON is YAML) for everything but plain strings."""
    return v if isinstance(v, str) else json.dumps(v)


def base_config(sweep, out):
    """The base config's path; an inline `config:` is written into the sweep directory."""
    if sweep.base:
        return sweep.base
    import yaml
    path = os.path.join(out, "base.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(sweep.inline, f, sort_keys=False)
    return path


def point_command(sweep, point, out, tools):
    run_dir = os.path.join(out, point.id)
    n = point.world_size(sweep.peers or 0)
    sets = [f"{k}={value_text(v)}" for k, v in point.overrides.items() if k != "world.size"]
    if sweep.runner == "sim":
        cmd = [tools["sim"]]
    else:
        cmd = [tools["launch"], "--peer", tools["peer"], "--quiet"]
    if n:
        cmd += ["-n", str(n)]
    # murmur-launch takes the config as its argument, murmur-sim as --config.
    config = base_config(sweep, out)
    cmd += [config] if sweep.runner == "launch" else ["--config", config]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--out", run_dir]
    return cmd, run_dir


def forget_stale_metrics(run_dir):
    """A rank with no checkpoint starts from step 0: its old metrics lines would be read twice."""
    if not os.path.isdir(run_dir):
        return
    for d in os.listdir(run_dir):
        rank_dir = os.path.join(run_dir, d)
        if d.startswith("rank") and os.path.isdir(rank_dir):
            if not any(f.endswith(".safetensors") for f in os.listdir(rank_dir)):
                try:
                    os.remove(os.path.join(rank_dir, "metrics.jsonl"))
                except OSError:
                    pass


def point_fraction(run_dir, epochs):
    """How far the running point is, from rank 0's last step line (0..1)."""
    path = os.path.join(run_dir, "rank0", "metrics.jsonl")
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return 0.0
    for line in reversed(lines):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "epoch" in obj:
            return min(1.0, obj["epoch"] / max(1e-9, epochs))
    return 0.0


def fmt_eta(s):
    s = int(max(0, s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """One line across the sweep: a bar, points done, the current point and the ETA."""

    def __init__(self, total, done):
        self.total, self.done_before, self.done_now = total, done, 0
        self.t0 = time.time()
        self.tty = sys.stdout.isatty()

    def eta(self, fraction):
        """Seconds left at this session's pace (points are about equal work: same data, epochs)."""
        done = self.done_now + fraction
        if done < 0.02:
            return "?"
        pace = (time.time() - self.t0) / done
        return fmt_eta(pace * (self.total - self.done_before - done))

    def show(self, current, fraction):
        if not self.tty:
            return
        done = self.done_before + self.done_now + fraction
        width = 30
        fill = int(width * done / max(1, self.total))
        sys.stdout.write(f"\r\033[K[{'#' * fill}{'.' * (width - fill)}] "
                         f"{self.done_before + self.done_now}/{self.total} {current} {100 * fraction:3.0f}%  "
                         f"elapsed {fmt_eta(time.time() - self.t0)}  ETA {self.eta(fraction)}")
        sys.stdout.flush()

    def finished(self, pid, ok, seconds):
        self.done_now += 1
        if self.tty:
            sys.stdout.write("\r\033[K")
        print(f"murmur-sweep: {'done' if ok else 'FAILED'} {pid} ({seconds:.0f}s); "
              f"{self.done_before + self.done_now}/{self.total} points, "
              f"elapsed {fmt_eta(time.time() - self.t0)}, ETA {self.eta(0.0)}", flush=True)


def run_local(sweep, out, tools, keep_checkpoints=False):
    """Runs every point not yet done; returns the ids of the points that failed."""
    pending = [p for p in sweep.points if not is_done(os.path.join(out, p.id))]
    progress = Progress(len(sweep.points), len(sweep.points) - len(pending))
    print(f"murmur-sweep: {sweep.name}: {len(sweep.points)} points, "
          f"{len(sweep.points) - len(pending)} already done, results in {out}", flush=True)
    failed = []
    for p in pending:
        cmd, run_dir = point_command(sweep, p, out, tools)
        os.makedirs(run_dir, exist_ok=True)
        forget_stale_metrics(run_dir)
        epochs = float(p.overrides.get("train.epochs", 5))
        t = time.time()
        with open(os.path.join(run_dir, "launch.log"), "ab") as log:
            log.write(("$ " + shlex.join(cmd) + "\n").encode())
            log.flush()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                while proc.poll() is None:
                    progress.show(p.id, point_fraction(run_dir, epochs))
                    time.sleep(1.0)
            except KeyboardInterrupt:
                proc.wait()  # murmur-launch forwards the signal; the peers checkpoint and stop
                raise
        ok = proc.returncode == 0 and is_done(run_dir)
        if ok:
            checkpoints.consensus_series(run_dir, write=True)
            if not keep_checkpoints:
                checkpoints.remove(run_dir)
        else:
            failed.append(p.id)
        progress.finished(p.id, ok, time.time() - t)
    return failed


def submit_slurm(sweep, out, tools, sbatch_args):
    """Submits each point not done (and not already queued) as one sbatch job that runs
    murmur-launch --slurm in the allocation (tests/runtime/slurm_test.py runs it on a real Slurm)."""
    queued = set()
    try:
        r = subprocess.run(["squeue", "--me", "--noheader", "--format=%i"], capture_output=True, text=True)
        queued = set(r.stdout.split())
    except OSError:
        pass
    for p in sweep.points:
        cmd, run_dir = point_command(sweep, p, out, tools)
        if is_done(run_dir):
            continue
        os.makedirs(run_dir, exist_ok=True)
        job_file = os.path.join(run_dir, "slurm_job")
        if os.path.exists(job_file) and open(job_file).read().strip() in queued:
            print(f"murmur-sweep: {p.id}: job {open(job_file).read().strip()} still queued")
            continue
        n = p.world_size(sweep.peers or 0)
        if sweep.runner == "launch":
            cmd.insert(1, "--slurm")
        sb = ["sbatch", "--parsable", f"--job-name=murmur-{sweep.name}-{p.id}",
              f"--output={os.path.join(run_dir, 'slurm-%j.out')}"]
        sb += [f"--ntasks={n}"] if sweep.runner == "launch" and n else ["--ntasks=1"]
        sb += shlex.split(sbatch_args or "")
        sb += ["--wrap", shlex.join(cmd)]
        r = subprocess.run(sb, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(f"murmur-sweep: sbatch for {p.id} failed: {r.stderr}")
            return 1
        job = r.stdout.strip().split(";")[0]
        with open(job_file, "w") as f:
            f.write(job + "\n")
        print(f"murmur-sweep: {p.id}: submitted job {job}")
    print(f"murmur-sweep: when the jobs are done: tools/murmur-sweep --report {out}")
    return 0

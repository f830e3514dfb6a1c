"""Helpers of the launcher tests that watch a run's peers from outside: finding a run's
murmur-peer processes, waiting for them to train, and making sure none is left behind.
Python standard library only."""
import csv
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def ring_config(name, steps=40):
    """A small D-PSGD run on a ring (synthetic data, 4 peers, steps of about a millisecond here):
    `steps` of them, or near enough to endless (ENDLESS) for a run that the test stops itself,
    which then logs and evaluates as LONG_RUN does."""
    every = 1000 if steps >= ENDLESS else 0
    return f"""\
run: {{name: {name}, log_every: {1000 if every else 10}, threads: 1}}
world: {{size: 4}}
model: {{name: mlp, hidden: [64]}}
data: {{name: synthetic, synthetic: {{train_size: 2048, test_size: 256, noise: 2.5}}}}
train: {{epochs: 1000000, batch_size: 32, max_steps: {steps}, schedule: {{name: constant}}}}
eval: {{every_steps: {every}}}
algorithm: {{name: dpsgd}}
topology: {{graph: ring}}
"""


def small_sweep(name):
    """A 2-point murmur-sweep spec (D-PSGD on a ring, allreduce; 2 peers, synthetic data, 1 epoch)."""
    return f"""\
name: {name}
config:
  run: {{name: {name}, log_every: 4, threads: 1}}
  model: {{name: mlp, hidden: [16]}}
  data: {{name: synthetic, synthetic: {{train_size: 1024, test_size: 256, noise: 3.0}}}}
  train: {{epochs: 1, batch_size: 16, schedule: {{name: constant}}}}
  eval: {{every_steps: 8}}
peers: 2
grid:
  algorithm:
    ring: {{algorithm.name: dpsgd, topology.graph: ring}}
    allreduce: {{algorithm.name: allreduce}}
"""


def small_sweep_rows(out):
    """[(point, peers)] of a small_sweep's summary.csv in `out`, sorted ([] where there is none)."""
    try:
        with open(os.path.join(out, "summary.csv")) as f:
            return sorted((row["point"], row["peers"]) for row in csv.DictReader(f))
    except (OSError, KeyError):
        return []


ENDLESS = 10_000_000  # ring_config(steps=ENDLESS): hours here; the tests stop it themselves
# A ring_config run made endless: its steps take about a millisecond, and logged and evaluated
# as the short runs are (every 10 steps, every 16-step epoch) it prints over a thousand lines a
# second. Through srun that much output delays srun's own forwarding of a Ctrl-C by 20-48 s on
# a loaded machine (past the launcher's grace), and it slows every other test running beside it.
LONG_RUN = ["--set", f"train.max_steps={ENDLESS}", "--set", "run.log_every=1000", "--set", "eval.every_steps=1000"]


class Checks:
    """A test's checks: check(cond, what) records and prints a failure and goes on; skip(why)
    exits 77 (CTest's skip) unless something already failed; result() prints the verdict and
    is the exit code."""

    SKIP = 77

    def __init__(self, name):
        self.name = name
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)
            print(f"{self.name}: FAILED: {what}", flush=True)
        return cond

    def skip(self, why):
        print(f"{self.name}: skipped: {why}")
        sys.exit(1 if self.failures else self.SKIP)

    def result(self):
        print(f"{self.name}: {'ok' if not self.failures else f'{len(self.failures)} failure(s)'}")
        return 1 if self.failures else 0


def excerpt(text, limit=3000):
    """What a failure shows of a run's output: its warnings and errors (a failing peer's own
    lines come early and would fall out of a tail), then the tail."""
    noted = [line for line in text.splitlines()
             if "[error]" in line or "[warning]" in line or "error:" in line or "rror" in line[:40]]
    head = "\n".join(noted)[-limit // 2:]
    return (f"(its warnings and errors)\n{head}\n(its last lines)\n" if head else "") + text[-limit:]


def print_logs(pattern, lines=40):
    """The last lines of each daemon log matching `pattern`: after a failure, what sshd, slurmd
    and slurmctld saw (CI keeps only this output)."""
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            continue
        print(f"--- {path} (last {len(tail)} lines)")
        print("\n".join(tail), flush=True)


class Launched:
    """A launcher (or salloc) started in its own session, its output read all along (a full pipe
    would stall it), and kept: .text once it has exited."""

    def __init__(self, cmd, env=None):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env or os.environ, start_new_session=True)
        self.pid = self.proc.pid
        self.chunks = []
        self.reader = threading.Thread(target=lambda: self.chunks.extend(iter(self.proc.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    def poll(self):
        return self.proc.poll()

    @property
    def returncode(self):
        return self.proc.returncode

    def finish(self, timeout=120):
        """Waits for it (SIGKILLs its session after `timeout`) and returns its output."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.chunks.append("\n(timed out)\n")
        self.reader.join(timeout=10)
        return "".join(self.chunks)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.finish()


def peers_of(out):
    """{pid: cmdline} of the murmur-peer processes of the run in `out`."""
    found = {}
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"murmur-peer") and out.encode() in argv:
            found[int(path.split("/")[2])] = argv
    return found


def has_stepped(out, rank):
    try:
        with open(os.path.join(out, f"rank{rank}", "metrics.jsonl")) as f:
            return '"step"' in f.read()
    except OSError:
        return False


def wait_training(out, n=4, deadline_s=60):
    """True once each of the n ranks has logged a step, False at the deadline."""
    t = time.time() + deadline_s
    while time.time() < t:
        if all(has_stepped(out, r) for r in range(n)):
            return True
        time.sleep(0.2)
    return False


def result(out, rank):
    """rank<r>/result.json of the run in `out`, or None."""
    try:
        with open(os.path.join(out, f"rank{rank}", "result.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wait_gone(out, within_s):
    """True if the run's peers are all gone within `within_s`; SIGKILLs any left, either way."""
    t = time.time() + within_s
    while time.time() < t and peers_of(out):
        time.sleep(0.2)
    left = peers_of(out)
    for pid in left:  # never leave one behind, whatever the check says
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return not left


def environ_of(pid):
    """The environment of process `pid` as a dict ({} once it has gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return dict(kv.decode(errors="replace").split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_program(peer):
    """The argv of tests/api/torch_peer.py (a PyTorch program that murmur's Python package
    averages) for `-- PROGRAM` runs, or None where it cannot run: no python3-torch, or no package
    in the build of `peer` (a sanitizer build has none)."""
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(peer))), "python", "murmur")
    has_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    if not (has_torch and os.path.exists(os.path.join(package, "__init__.py"))):
        return None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return ["/usr/bin/python3", os.path.join(root, "tests", "api", "torch_peer.py"), "train"]


def program_results(text):
    """{rank: RESULT} of the torch_peer.py peers in a launcher's output."""
    out = {}
    for line in text.splitlines():
        at = line.find("RESULT ")
        if at >= 0:
            r = json.loads(line[at + 7:])
            out[r["rank"]] = r
    return out


def program_ok(text, out, n):
    """"" when n torch_peer.py peers ended with one model (the exact average) and summary.json
    holds them all, else what is wrong."""
    got = program_results(text)
    if sorted(got) != list(range(n)):
        return f"results from ranks {sorted(got)}, want 0-{n - 1}"
    if len({json.dumps(r["params"]) for r in got.values()}) != 1:
        return f"the peers' models differ after the average: {[r['params'] for r in got.values()]}"
    try:
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return "no summary.json"
    if len(s["peers"]) != n or any(p.get("failed") for p in s["peers"]) or "average_model" not in s:
        return f"summary peers {s['peers']}"
    return ""

"""Slurm for murmur-launch --slurm: the allocation's size, which task srun says exited how, and
stopping a step so that its peers write their checkpoints.

- Signals go to the step through `scancel --signal=TERM JOB.STEP`, not to srun: srun turns a
  SIGINT or SIGTERM of its own into "forcing job termination", which SIGKILLs the tasks before
  they can write a checkpoint. The step is found by its name (`srun -J`), unique per launch.
- srun exits with one code for the whole step; which task failed is in its own error lines
  (`srun: error: node3: task 2: Killed`, `... tasks 0-1,3: Exited with exit code 1`), read as they
  come, so the failed peer is the one named and summary.json holds its code.

Python standard library only; scancel and squeue come with Debian's slurm-client.
"""
import os
import re
import signal
import subprocess
import time

EXIT_LINE = re.compile(r"^srun: error: (\S+): tasks? ([0-9][0-9,\-]*): (.+?)\s*$")
EXIT_CODE = re.compile(r"Exited with exit code (\d+)")
# srun names a signalled task with strsignal()'s text ("Killed", "Terminated", ...).
SIGNAL_TEXT = {signal.strsignal(s): s for s in signal.valid_signals()
               if isinstance(s, signal.Signals) and signal.strsignal(s)}


def allocation_tasks(environ):
    """The number of tasks of the allocation this runs in (SLURM_NTASKS), else None."""
    value = environ.get("SLURM_NTASKS") or environ.get("SLURM_NPROCS")
    return int(value) if value and value.isdigit() else None


def task_exits(line):
    """[(host, task, code)] from one line of srun's output: code as subprocess gives it (the exit
    status, or minus the signal). [] for any other line."""
    m = EXIT_LINE.match(line)
    if not m:
        return []
    host, tasks, what = m.groups()
    code = EXIT_CODE.search(what)
    if code:
        rc = int(code.group(1))
    elif what.split(" (")[0] in SIGNAL_TEXT:  # "Killed", "Segmentation fault (core dumped)"
        rc = -SIGNAL_TEXT[what.split(" (")[0]]
    else:
        return []
    out = []
    for part in tasks.split(","):
        lo, _, hi = part.partition("-")
        out += [(host, t, rc) for t in range(int(lo), int(hi or lo) + 1)]
    return out


def steps_named(name):
    """The ids ("JOB.STEP") of this user's running steps called `name`; [] if squeue fails."""
    r = subprocess.run(["squeue", "--steps", "--noheader", "--format=%i %j", "--user", str(os.getuid())],
                       capture_output=True, text=True)
    return [f[0] for f in (line.split() for line in r.stdout.splitlines()) if len(f) == 2 and f[1] == name]


def signal_step(name, sig, tries=10):
    """Sends `sig` to every task of the step `name` (SIGKILL: cancels the step). Returns None once
    sent, else why not: no such step listed, or scancel's error. A loaded slurmctld answers late
    or times out, so it tries `tries` times, half a second apart."""
    how = [] if sig == signal.SIGKILL else [f"--signal={signal.Signals(sig).name[3:]}"]
    why = f"squeue lists no step named {name}"
    for _ in range(tries):
        steps = steps_named(name)
        if steps:
            r = subprocess.run(["scancel"] + how + steps, capture_output=True, text=True)
            if r.returncode == 0:
                return None
            why = f"scancel {' '.join(how + steps)}: {r.stderr.strip() or r.returncode}"
        time.sleep(0.5)
    return why

"""Slurm for murmur-launch --slurm: the allocation's size, which task srun says exited how, and
stopping a step so that its peers write their checkpoints.

- A stop goes through srun itself, started with `--disable-status`: one SIGINT to srun is then
  forwarded at once as SIGINT to every task, by srun to each node's slurmd (without that
  option srun only prints the tasks' states; a SIGTERM to srun is "forcing job termination",
  a SIGKILL of every task, which is how a stop is escalated). Not `scancel --signal`: that
  goes through slurmctld, which took up to 25 s to answer here under load, past the grace a
  stop has before it is escalated.
- srun exits with one code for the whole step; which task failed is in its own error lines
  (`srun: error: node3: task 2: Killed`, `... tasks 0-1,3: Exited with exit code 1`), read as they
  come, so the failed peer is the one named and summary.json holds its code.

Python standard library only; srun comes with Debian's slurm-client.
"""
import re
import signal

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

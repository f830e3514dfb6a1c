"""Starting a peer on another host over ssh, for murmur-launch --hostfile.

Two things plain `ssh host env K=V... murmur-peer ...` gets wrong, and this module mends:

- The environment travels over ssh's stdin, not its command line: the run's secret on a command
  line is readable by every user of both hosts in `ps`. The remote side reads `K=V` lines until
  a `go` line and exports them (no eval: a value is never run as shell code).
- Remote peers die with the launcher. Without a terminal, sshd sends a remote command nothing
  when the ssh client goes away; the peer would train on, and die later of SIGPIPE with no
  checkpoint. So ssh's stdin stays open as a lifeline: the launcher writes `TERM` or `KILL` on it
  to stop the peer, and when it closes (the launcher exited, or was killed) the remote side sends
  the peer SIGTERM, as Ctrl-C does locally: the peer writes its checkpoint and stops. The peer
  runs with SIGPIPE ignored, so a closed output cannot kill it before its checkpoint is written.

The remote host needs only a POSIX sh. Python standard library only.
"""
import os
import re
import shlex

# Forwarded from the launcher's environment as they are: murmur's own, where libraries (and a
# Python program's modules) are, and the knobs of the libraries the peer runs on (as mpirun -x
# or srun --export would be told to).
FORWARD_NAMES = ("LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES")
FORWARD_PREFIXES = ("MURMUR_", "UCX_", "FI_", "NCCL_", "OMP_", "OPENBLAS_")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Runs on the remote host as `sh -c BOOTSTRAP murmur-remote CWD PEER ARGS...`.
BOOTSTRAP = r"""
while IFS= read -r kv && [ "$kv" != go ]; do export "$kv"; done
cd "$1" || exit 126
shift
exec 3<&0
trap '' PIPE
"$@" </dev/null &
peer=$!
trap 'kill -TERM $peer 2>/dev/null' HUP INT TERM
(while IFS= read -r cmd <&3; do
   case $cmd in TERM) kill -TERM $peer 2>/dev/null ;; KILL) kill -KILL $peer 2>/dev/null ;; esac
 done
 kill -TERM $peer 2>/dev/null) &
lifeline=$!
wait $peer
rc=$?
while [ $rc -gt 128 ] && kill -0 $peer 2>/dev/null; do wait $peer; rc=$?; done
kill $lifeline 2>/dev/null
exit $rc
"""


class ForwardError(ValueError):
    pass


def forwarded(environ, extra=()):
    """The variables a remote peer gets: the forwarded ones of `environ`, then `extra` (-x NAME or
    -x NAME=VALUE). A name that is not a shell name, or a value with a newline, is refused."""
    env = {k: v for k, v in environ.items()
           if k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES)}
    for item in extra:
        name, eq, value = item.partition("=")
        if not eq:
            if name not in environ:
                raise ForwardError(f"-x {name}: not set in the launcher's environment")
            value = environ[name]
        env[name] = value
    for name, value in env.items():
        if not NAME.match(name):
            raise ForwardError(f"-x {name}: not a variable name")
        if "\n" in value:
            raise ForwardError(f"{name}: its value holds a newline, which cannot be forwarded over ssh")
    return env


def command(ssh, host, cwd, peer_cmd):
    """The local argv that starts `peer_cmd` on `host` in `cwd` through ssh (a list, e.g.
    ["ssh", "-F", "cfg"]); its stdin then takes preamble(env) and stays open as the lifeline."""
    remote = shlex.join(["sh", "-c", BOOTSTRAP, "murmur-remote", cwd] + list(peer_cmd))
    return list(ssh) + ["-o", "BatchMode=yes", host, remote]


def preamble(env):
    """What the launcher writes first on ssh's stdin: the environment, then `go`."""
    return "".join(f"{k}={v}\n" for k, v in env.items()) + "go\n"


def default_ssh():
    """The ssh command: $MURMUR_SSH (e.g. "ssh -F cluster/ssh_config"), else ssh."""
    return shlex.split(os.environ.get("MURMUR_SSH", "ssh"))

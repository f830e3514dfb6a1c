"""murmur for PyTorch: decentralized training of your own model.

    import murmur
    murmur.init("configs/ring.yaml")                  # rank and world from the launcher
    opt = murmur.DecentralizedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
    for x, y in loader:                                # this peer's shard (DistributedSampler)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step(loss=loss)                            # the local step, then the gossip
    opt.finish(evaluate=lambda: test(model))           # the exact average of every peer's model

Start it with `tools/murmur-launch -n 4 --config configs/ring.yaml -- python3 train.py` (or
srun, or mpirun): every algorithm, topology and transport of murmur's configs works, and the
run directory holds the same files as murmur-peer's (metrics.jsonl, result.json, summary.json).
The primitives `neighbor_average`, `allreduce` and `barrier` are there for loops of your own.
Works with Debian's python3-torch (CPU; CUDA tensors where torch has CUDA) and numpy arrays.
"""
import json
import os

from ._murmur import Communicator, ConfigError, Error, PeerLost, TransportError
from .buffers import as_buffer
from .optimizer import DecentralizedOptimizer, Stopped

__all__ = ["init", "get", "Communicator", "DecentralizedOptimizer", "Stopped", "Error",
           "ConfigError", "PeerLost", "TransportError", "neighbor_average", "allreduce", "broadcast", "barrier",
           "neighbors", "log_eval", "finish", "rank", "world_size", "local_rank", "local_size"]

_comm = None


def _assignments(prefix, value):
    """{"algorithm": {"name": "sgp"}} -> ["algorithm.name=\"sgp\""]: values as JSON, which YAML reads."""
    if isinstance(value, dict):
        out = []
        for key, inner in value.items():
            out += _assignments(f"{prefix}.{key}" if prefix else str(key), inner)
        return out
    return [f"{prefix}={json.dumps(value)}"]


def init(config=None, *, out="", handle_signals=True, threads=True, **overrides):
    """Joins the run as one peer and returns its Communicator (also murmur.get()).

    `config`: a YAML file's path, a dict of sections, or None for the file murmur-launch names
    ($MURMUR_CONFIG), else murmur's default (D-PSGD on a ring). `overrides` set keys after it:
    `algorithm={"name": "sgp"}`, or dotted as `**{"train.lr": 0.1}`; murmur-launch's --set come
    last. `threads`: set torch's threads and OpenBLAS's to this peer's share of the node's
    cores (run.threads, else the cores over the peers on this node). With `handle_signals`,
    SIGINT and SIGTERM ask to stop at the next step (DecentralizedOptimizer checkpoints and
    raises Stopped), as murmur-peer does.
    """
    global _comm
    if _comm is not None:
        raise Error("murmur.init: called twice (one peer per process)")
    sets = []
    for key, value in overrides.items():
        sets += _assignments(key, value)
    kwargs = {}
    if isinstance(config, dict):
        kwargs["config_yaml"] = json.dumps(config)  # JSON is YAML
    elif config is not None:
        kwargs["config_file"] = os.fspath(config)
    comm = Communicator(overrides=sets, out=os.fspath(out), handle_signals=handle_signals,
                        size_threads=threads, **kwargs)
    comm.config = json.loads(comm.config_json())
    if threads:  # OpenBLAS's are sized already (Communicator); torch's own pool too
        try:
            import torch
            torch.set_num_threads(comm.compute_threads)
        except ImportError:
            pass
    _comm = comm
    return comm


def get():
    """The Communicator of murmur.init()."""
    if _comm is None:
        raise Error("murmur: call murmur.init() first")
    return _comm


def rank():
    return get().rank


def world_size():
    return get().world_size


def local_rank():
    return get().local_rank


def local_size():
    return get().local_size


def neighbor_average(tensor, comm=None):
    """One gossip round over topology.graph, in place: x <- sum_j W_ij x_j (each call is the
    next round of a time-varying graph). Every peer calls it with a tensor of the same size."""
    (comm or get()).neighbor_average(as_buffer(tensor, "neighbor_average"))
    return tensor


def allreduce(tensor, op="mean", comm=None):
    """In place: the mean (op="mean") or sum (op="sum") of `tensor` over every peer."""
    if op not in ("mean", "sum"):
        raise ValueError(f"murmur.allreduce: op={op!r}: expected 'mean' or 'sum'")
    (comm or get()).allreduce(as_buffer(tensor, "allreduce"), op == "mean")
    return tensor


def broadcast(tensor, root=0, comm=None):
    """In place: rank `root`'s `tensor` on every peer."""
    (comm or get()).broadcast(as_buffer(tensor, "broadcast"), root)
    return tensor


def barrier(comm=None):
    (comm or get()).barrier()


def neighbors(round=0, comm=None):
    """This rank's share of round `round`'s mixing matrix: self_weight, recv_from and
    recv_weights (its row), send_to and send_weights (its column)."""
    return (comm or get()).neighbors(round)


def log_eval(accuracy=None, loss=None, epoch=None, comm=None):
    """An evaluation of this peer's model (metrics.jsonl, the run's time to accuracy)."""
    (comm or get()).log_eval(_number(accuracy), _number(loss), _number(epoch))


def finish(accuracy=None, loss=None, comm=None):
    """Ends the run (after DecentralizedOptimizer.average, or without an average): writes
    result.json, and summary.json where no launcher does. `accuracy`, `loss`: the average
    model's evaluation, reported by the peer that Communicator.average() names evaluator."""
    (comm or get()).finish(_number(accuracy), _number(loss))


def _number(v):
    return None if v is None else float(v)

"""DecentralizedOptimizer: any torch.optim optimizer, with murmur's averaging after each step.

The model's parameters (and, with buffers="average", its floating-point buffers, such as
BatchNorm's running statistics) are moved into one flat float32 tensor that they then view, so
the averaging works on that one buffer in place: no copy per step on the CPU, and one memory
registration with UCX or libfabric. Checkpoints are the wrapper's: on a stop signal it saves the
model and optimizer (rank<r>/checkpoint.pt, written whole or not at all) and raises Stopped; a
run started again in the same directory resumes from there, every peer at the same step.
"""
import os
import signal

from ._murmur import Error
from .buffers import as_buffer

BUFFERS = ("average", "local")


class Stopped(SystemExit):
    """SIGINT or SIGTERM reached this peer: its checkpoint is written. Exits the program with
    128 + the signal, as murmur-peer does, unless caught."""

    def __init__(self, signum, step, path):
        super().__init__(128 + signum)
        self.signal, self.step, self.path = signum, step, path

    def __str__(self):
        name = signal.Signals(self.signal).name if self.signal else "a stop"
        return f"stopped by {name} at step {self.step}; checkpoint {self.path}"


def _device_of(tensors, what):
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"{what}: the tensors are on {sorted(str(d) for d in devices)}; "
                         "murmur takes a model on one device")
    return devices.pop()


class DecentralizedOptimizer:
    """Wraps `optimizer` (over `model`'s parameters): step() is the optimizer's step, then the
    averaging of murmur's config. `buffers`: "average" mixes the floating-point buffers with the
    parameters, "local" leaves them to each peer. `same_start`: every peer starts from rank 0's
    parameters (and buffers), as DDP does; a resumed run starts from its checkpoints instead. Every peer must wrap the same model: a model
    whose tensors differ in names, shapes or dtypes on any peer is refused on every peer
    (murmur.ConfigError naming the first difference)."""

    def __init__(self, optimizer, model, buffers="average", comm=None, checkpoint=True,
                 same_start=True):
        import torch
        from . import get
        self.optimizer, self.model = optimizer, model
        self.comm = comm or get()
        if buffers not in BUFFERS:
            raise ValueError(f"DecentralizedOptimizer: buffers={buffers!r}: expected one of {BUFFERS}")
        named = list(model.named_parameters())
        if not named:
            raise ValueError("DecentralizedOptimizer: the model has no parameters")
        mine = {id(p) for _, p in named}
        for g, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                if id(p) not in mine:
                    raise ValueError(f"DecentralizedOptimizer: param_groups[{g}] holds a tensor of shape "
                                     f"{tuple(p.shape)} that is not a parameter of the model")
        if buffers == "average":
            named += [(f"{n} (buffer)", b) for n, b in model.named_buffers() if b.is_floating_point()]
        for name, t in named:
            if t.dtype != torch.float32:
                raise TypeError(f"DecentralizedOptimizer: {name} is {t.dtype}; murmur averages float32 "
                                "tensors (model.float()), or keep buffers local (buffers='local')")
        device = _device_of([t for _, t in named], "DecentralizedOptimizer")
        total = sum(t.numel() for _, t in named)
        flat = torch.empty(total, dtype=torch.float32, device=device)
        self._views = []
        at = 0
        with torch.no_grad():
            for name, t in named:
                view = flat[at:at + t.numel()].view_as(t)
                view.copy_(t)
                t.data = view  # the tensor object stays (optimizer state, hooks): its storage moves
                self._views.append((name, t, view.data_ptr()))
                at += t.numel()
        self.flat = flat
        self.comm._attached = flat  # murmur holds its address: it lives as long as the communicator
        description = [f"{name} {list(t.shape)} {str(t.dtype).replace('torch.', '')}" for name, t in named]
        self.comm.attach([as_buffer(flat, "DecentralizedOptimizer")], description)
        if same_start:  # every peer starts from rank 0's model, as DDP does
            self.comm.broadcast(as_buffer(flat, "DecentralizedOptimizer"), 0)
        self.cuda = device.type == "cuda"
        self.log_every = self.comm.config["run"]["log_every"]
        self.step_count = 0
        self.checkpoint_path = os.path.join(self.comm.out, f"rank{self.comm.rank}", "checkpoint.pt")
        self.checkpointing = checkpoint
        if checkpoint and self.comm.config["checkpoint"]["resume"]:
            self._resume()

    # ---- torch.optim's surface ----
    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)

    def step(self, closure=None, *, loss=None, samples=0):
        """The optimizer's step, then murmur's averaging. `loss` (a number or tensor) and
        `samples` (the batch size) go into metrics.jsonl every run.log_every steps."""
        result = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        if loss is None:
            loss = result
        self._check_views()
        if self.cuda:
            import torch
            torch.cuda.current_stream(self.flat.device).synchronize()
        self.step_count += 1
        value = None
        # A CUDA loss is read (a device sync) only when its metrics line is due.
        if loss is not None and (not self.cuda or self.step_count % self.log_every == 0):
            value = float(loss)
        self.comm.after_step(self.step_count, value, int(samples))
        if self.comm.stop_requested():
            self._stop()
        return result

    def flush(self):
        """Completes the averaging in flight (algorithm.overlap): call it before evaluating."""
        self.comm.flush()

    # ---- the end of a run ----
    def average(self):
        """Replaces the parameters by the exact mean of every peer's model; returns
        {"consensus_distance", "ranks", "evaluator"}."""
        self._check_views()
        return self.comm.average()

    def finish(self, evaluate=None):
        """average(), then `evaluate()` (returning an accuracy, or (accuracy, loss)) of the
        average model on the peer that reports it, and the run's results written. Returns
        average()'s dict, with "accuracy" and "loss" where evaluated."""
        a = self.average()
        accuracy = loss = None
        if evaluate is not None and a["evaluator"]:
            got = evaluate()
            accuracy, loss = got if isinstance(got, tuple) else (got, None)
            a["accuracy"], a["loss"] = accuracy, loss
        self.comm.finish(None if accuracy is None else float(accuracy), None if loss is None else float(loss))
        return a

    # ---- checkpoints ----
    def save(self, path=None):
        """The model, the optimizer and the step, to `path` (default rank<r>/checkpoint.pt), whole
        or not at all (a temp file renamed into place)."""
        import torch
        self.flush()
        path = path or self.checkpoint_path
        tmp = f"{path}.tmp.{os.getpid()}"
        torch.save({"step": self.step_count, "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict()}, tmp)
        os.replace(tmp, path)
        return path

    def _resume(self):
        import torch
        step = 0
        if os.path.exists(self.checkpoint_path):
            saved = torch.load(self.checkpoint_path, map_location=self.flat.device)
            self.model.load_state_dict(saved["model"])  # copies into the views: they stay
            self.optimizer.load_state_dict(saved["optimizer"])
            step = int(saved["step"])
        # Every peer goes on from the step of the one that stopped earliest.
        self.step_count = self.comm.agree_start(step)
        if step or self.step_count:
            print(f"murmur: rank {self.comm.rank} resumes at step {self.step_count} "
                  f"(its checkpoint: step {step})", flush=True)

    def _stop(self):
        path = self.save() if self.checkpointing else None
        raise Stopped(self.comm.stop_signal(), self.step_count, path)

    def _check_views(self):
        for name, t, ptr in self._views:
            if t.data_ptr() != ptr:
                raise Error(f"DecentralizedOptimizer: {name} no longer views murmur's buffer (was it "
                            "replaced, by model.to(), .float(), or load_state_dict(assign=True)?); "
                            "move the model first, then wrap its optimizer")

#!/usr/bin/python3
"""The murmur Python package with PyTorch, as a user runs it: programs started by
`tools/murmur-launch -n N --config C -- /usr/bin/python3 PROGRAM`.

1. torch_peer.py train under several algorithms of configs/ (4 peers): every peer ends with the
   same parameters (the exact average), started from rank 0's (same_start), its parameters
   views of one flat buffer; summary.json holds every peer and the average model's figures.
2. BatchNorm's running statistics: averaged (buffers="average"), or each peer's own ("local").
3. The primitives on torch tensors and numpy arrays: neighbor_average, allreduce, broadcast.
4. Refusals: a different model on one rank is refused on every rank naming the first
   difference; in one process, a float64 tensor, a non-float one, a non-contiguous one, a
   parameter replaced after wrapping, and a foreign parameter are clear Python exceptions.
5. Ctrl-C in the launcher: every Python peer writes rank<r>/checkpoint.pt and exits 130; the
   same command resumes every peer at one step and finishes.
6. examples/pytorch/train.py (the CNN with BatchNorm on Fashion-MNIST) and
   examples/pytorch/char_transformer.py, briefly, through the launcher.
Skipped (77) without Debian's python3-torch or the build's package. Needs /usr/bin/python3.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "runtime"))
from launch_util import Checks, Launched, excerpt, has_stepped, program_results as results  # noqa: E402

LAUNCH = os.path.join(ROOT, "tools", "murmur-launch")
PEER = os.path.join(HERE, "torch_peer.py")
PY = "/usr/bin/python3"
check = Checks("pytorch_test")


def launch(peer, n, config, out, program, sets=(), timeout=240):
    cmd = [LAUNCH, "-n", str(n), "--config", config, "--peer", peer, "--out", out]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd + ["--"] + program, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def summary(out):
    try:
        with open(os.path.join(out, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def algorithms(peer, d):
    for name in ("ring", "allreduce", "sgp", "local_sgd", "choco_topk", "adpsgd"):
        out = os.path.join(d, name)
        t0 = time.time()
        rc, text = launch(peer, 4, os.path.join(ROOT, "configs", f"{name}.yaml"), out, [PY, PEER, "train"])
        got = results(text)
        what = f"configs/{name}.yaml"
        if not check(rc == 0 and len(got) == 4, f"{what}: exit {rc}, {len(got)} results:\n{excerpt(text)}"):
            continue
        check(len({json.dumps(r["params"]) for r in got.values()}) == 1,
              f"{what}: the peers' parameters differ after the average: {[r['params'] for r in got.values()]}")
        check(len({json.dumps(r["start"]) for r in got.values()}) == 1,
              f"{what}: the peers did not start from rank 0's model: {[r['start'] for r in got.values()]}")
        check(all(r["views"] for r in got.values()), f"{what}: a parameter is not a view of the flat buffer")
        check(all(r["ranks"] == [0, 1, 2, 3] for r in got.values()), f"{what}: average ranks {got[0]['ranks']}")
        s = summary(out)
        if check(s is not None, f"{what}: no summary.json"):
            check(len(s["peers"]) == 4 and not any(p.get("failed") for p in s["peers"]), f"{what}: peers {s['peers']}")
            check(s.get("average_model", {}).get("test_accuracy") == 0.9, f"{what}: average model {s.get('average_model')}")
            check(s["peers"][2]["steps"] == 30 and s["peers"][2]["bytes_sent"] > 0, f"{what}: peer 2 {s['peers'][2]}")
        print(f"pytorch_test: {what}: 4 Python peers, {time.time() - t0:.1f} s", flush=True)


def buffers(peer, d):
    means = {}
    for mode in ("average", "local"):
        out = os.path.join(d, f"buffers-{mode}")
        rc, text = launch(peer, 2, os.path.join(ROOT, "configs", "ring.yaml"), out,
                          [PY, PEER, "train", "--buffers", mode])
        got = results(text)
        if check(rc == 0 and len(got) == 2, f"buffers={mode}: exit {rc}:\n{excerpt(text)}"):
            means[mode] = {r["running_mean"] for r in got.values()}
    check(len(means.get("average", {1, 2})) == 1, f"buffers=average: running means differ: {means.get('average')}")
    check(len(means.get("local", {1})) == 2, f"buffers=local: running means the same: {means.get('local')}")


def primitives(peer, d):
    n = 3
    rc, text = launch(peer, n, os.path.join(ROOT, "configs", "ring.yaml"), os.path.join(d, "prim"),
                      [PY, PEER, "primitives"])
    got = results(text)
    if not check(rc == 0 and len(got) == n, f"primitives: exit {rc}:\n{excerpt(text)}"):
        return
    for r, res in got.items():
        # A ring of 3, weights 1/3: one round is the exact mean.
        check(abs(res["neighbor"][0] - 1.0) < 1e-6 and abs(res["neighbor"][1] - 5 / 3) < 1e-5,
              f"primitives: rank {r}: neighbor_average gave {res['neighbor']}")
        check(res["sum"] == 3.0, f"primitives: rank {r}: allreduce sum {res['sum']}")
        check(res["bcast"] == [12.0] * 3, f"primitives: rank {r}: broadcast from rank 2 gave {res['bcast']}")
        check(abs(res["numpy_mean"] - 1.0) < 1e-6, f"primitives: rank {r}: numpy allreduce {res['numpy_mean']}")
        check(len(res["nbrs"]["recv_from"]) == 2, f"primitives: rank {r}: neighbors {res['nbrs']}")


def refusals(peer, d):
    rc, text = launch(peer, 2, os.path.join(ROOT, "configs", "ring.yaml"), os.path.join(d, "other"),
                      [PY, PEER, "train", "--other-model-on", "1"], timeout=120)
    lines = [line for line in text.splitlines() if "the model differs between peers" in line]
    check(rc != 0 and {line[:3] for line in lines} >= {"[0]", "[1]"} and
          all("rank 1 has `0.weight [24, 8] float32` where rank 0 has `0.weight [16, 8] float32`" in line
              for line in lines),
          f"a different model on rank 1: exit {rc}, refusals {lines}:\n{excerpt(text)}")
    # In one process (a world of one): the checks a tensor meets before C++ sees its address.
    script = r"""
import sys, torch, numpy, murmur
murmur.init(out=sys.argv[1])
def expect(kind, words, fn):
    try:
        fn()
    except kind as e:
        assert all(w in str(e) for w in words), f"{kind.__name__}: {e}"
        return
    raise AssertionError(f"no {kind.__name__} for {words}")
expect(TypeError, ["float64", ".float()"], lambda: murmur.allreduce(torch.zeros(3, dtype=torch.float64)))
expect(TypeError, ["non-float", "int64"], lambda: murmur.neighbor_average(torch.zeros(3, dtype=torch.int64)))
expect(ValueError, ["not contiguous"], lambda: murmur.allreduce(torch.zeros(4, 4).t()))
expect(TypeError, ["float64", "astype"], lambda: murmur.allreduce(numpy.zeros(3)))
expect(TypeError, ["list"], lambda: murmur.allreduce([1.0]))
net64 = torch.nn.Linear(2, 2).double()
expect(TypeError, ["float64", "model.float()"],
       lambda: murmur.DecentralizedOptimizer(torch.optim.SGD(net64.parameters(), lr=0.1), net64))
net = torch.nn.Linear(3, 2)
expect(ValueError, ["not a parameter of the model"],
       lambda: murmur.DecentralizedOptimizer(torch.optim.SGD(torch.nn.Linear(3, 2).parameters(), lr=0.1), net))
opt = murmur.DecentralizedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), net)
net.weight.data = torch.zeros(2, 3)  # replaced: no longer murmur's buffer
expect(murmur.Error, ["weight", "no longer views"], lambda: opt.step())
print("REFUSALS OK")
"""
    p = subprocess.run([PY, "-c", script, os.path.join(d, "alone")], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=python_path()))
    check(p.returncode == 0 and "REFUSALS OK" in p.stdout, f"refusals in one process:\n{p.stdout}{p.stderr}")


def interrupt(peer, d):
    out = os.path.join(d, "ctrl-c")
    cmd = [LAUNCH, "-n", "2", "--config", os.path.join(ROOT, "configs", "ring.yaml"), "--peer", peer,
           "--out", out, "--set", "run.log_every=1000", "--", PY, PEER, "endless"]
    p = Launched(cmd)
    t = time.time() + 90
    while time.time() < t and not all(has_stepped(out, r) for r in range(2)) and p.poll() is None:
        time.sleep(0.2)
    p.proc.send_signal(signal.SIGINT)
    text = p.finish(60)
    ckpts = [os.path.join(out, f"rank{r}", "checkpoint.pt") for r in range(2)]
    check(p.returncode == 130 and "every peer wrote a checkpoint" in text and all(map(os.path.exists, ckpts)),
          f"Ctrl-C: exit {p.returncode}, checkpoints {[os.path.exists(c) for c in ckpts]}:\n{excerpt(text)}")
    import torch
    steps = [torch.load(c)["step"] for c in ckpts if os.path.exists(c)]
    # The same command resumes, every peer at the lowest step; "train" mode stops it at +30.
    go_on = min(steps, default=0) + 30
    rc, text = launch(peer, 2, os.path.join(ROOT, "configs", "ring.yaml"), out,
                      [PY, PEER, "train", "--steps", str(go_on)])
    resumed = [line for line in text.splitlines() if "resumes at step" in line]
    check(rc == 0 and len(resumed) == 2 and all(f"resumes at step {min(steps)}" in line for line in resumed),
          f"resume after Ctrl-C (checkpoints at steps {steps}): exit {rc}, {resumed}:\n{excerpt(text)}")
    s = summary(out)
    check(s is not None and all(pp["steps"] == go_on for pp in s["peers"]),
          f"resume: the peers did not finish at step {go_on}: {s and [pp.get('steps') for pp in s['peers']]}")


def examples(peer, d):
    cases = [("train.py", ["--max-steps", "60"], "ring.yaml", 0.5),
             ("train.py", ["--max-steps", "40", "--model", "resnet"], "sgp.yaml", 0.3),
             ("char_transformer.py", ["--steps", "40", "--eval-every", "20"], "exponential.yaml", 0.1)]
    for script, args, config, floor in cases:
        out = os.path.join(d, "example-" + script + config)
        t0 = time.time()
        rc, text = launch(peer, 2, os.path.join(ROOT, "configs", config), out,
                          [PY, os.path.join(ROOT, "examples", "pytorch", script)] + args, timeout=280)
        s = summary(out)
        avg = (s or {}).get("average_model", {}).get("test_accuracy")
        check(rc == 0 and avg is not None and avg > floor,
              f"examples/pytorch/{script} {' '.join(args)} on {config}: exit {rc}, average model {avg}:\n{excerpt(text)}")
        print(f"pytorch_test: examples/pytorch/{script} {' '.join(args)}: average model "
              f"{avg}, {time.time() - t0:.1f} s", flush=True)


def python_path():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(peer))), "python")


def main():
    peer = sys.argv[sys.argv.index("--peer") + 1]
    try:
        import torch  # noqa: F401
    except ImportError:
        check.skip("no python3-torch")
    if not os.path.exists(os.path.join(python_path(), "murmur", "__init__.py")):
        check.skip(f"no murmur Python package in {python_path()} (python3-dev and pybind11-dev)")
    with tempfile.TemporaryDirectory(prefix="murmur-pytorch-") as d:
        for part in (algorithms, buffers, primitives, refusals, interrupt, examples):
            t0 = time.time()
            part(peer, d)
            print(f"pytorch_test: {part.__name__}: {time.time() - t0:.1f} s", flush=True)
    return check.result()


if __name__ == "__main__":
    sys.exit(main())

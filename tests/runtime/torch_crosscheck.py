#!/usr/bin/python3
"""Cross-check a murmur checkpoint against PyTorch.

Trains the MLP and the CNN briefly with murmur-peer on Fashion-MNIST, reads each
rank0/final.safetensors with numpy alone (the format parsed by hand), loads every tensor of it
into a torch.nn model of the same shape with strict=True (so a tensor that is not the model's,
such as resume state, fails it), and checks that torch computes the test accuracy murmur
reported in summary.json, within 0.1 points. Exits 77 (CTest: skipped) without torch or data.

Needs Debian's python3-numpy and python3-torch (hence /usr/bin/python3).
"""
import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
DATA = "/usr/share/datasets/fashion-mnist"


def read_safetensors(path):
    """Returns {name: numpy array} using numpy alone, following the safetensors spec."""
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
              "U8": np.uint8, "U64": np.uint64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw[16:], dtype=np.uint8).reshape(count, 1, rows, cols)
    return np.frombuffer(raw[8:], dtype=np.uint8)


def torch_model(name):
    import torch.nn as nn

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 256), nn.Linear(256, 10)

        def forward(self, x):
            x = x.flatten(1)
            return self.fc3(self.fc2(self.fc1(x).relu()).relu())

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 32, 5), nn.Conv2d(32, 64, 5)
            self.fc1, self.fc2 = nn.Linear(1024, 512), nn.Linear(512, 10)

        def forward(self, x):
            pool = nn.functional.max_pool2d
            x = pool(self.conv1(x).relu(), 2)
            x = pool(self.conv2(x).relu(), 2)
            return self.fc2(self.fc1(x.flatten(1)).relu())

    return Mlp() if name == "mlp" else Cnn()


def check(peer, model, steps, workdir):
    import numpy as np
    import torch
    out = os.path.join(workdir, model)
    single = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "single.yaml")
    cmd = [peer, "--config", single, "--out", out, "--set", f"model.name={model}", "--set", f"train.max_steps={steps}",
           "--set", "run.threads=1", "--set", "checkpoint.every_steps=0"]
    subprocess.run(cmd, check=True, timeout=600)
    with open(os.path.join(out, "summary.json")) as f:
        reported = json.load(f)["peers"][0]["test_accuracy"]
    tensors = read_safetensors(os.path.join(out, "rank0", "final.safetensors"))
    # Every tensor, as a user would load the file: no filter for murmur's own.
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    net = torch_model(model)
    net.load_state_dict(state, strict=True)  # names, shapes and layouts must be PyTorch's
    x = read_idx(f"{DATA}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    x = (x - 0.2860) / 0.3530
    y = read_idx(f"{DATA}/t10k-labels-idx1-ubyte.gz").astype(np.int64)
    torch.set_num_threads(1)
    with torch.no_grad():
        pred = net(torch.from_numpy(x)).argmax(1).numpy()
    ours = float((pred == y).mean())
    print(f"{model}: murmur reported {100 * reported:.2f}%, torch on the same tensors {100 * ours:.2f}%")
    return abs(ours - reported) * 100 <= 0.1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, help="path to build/bin/murmur-peer")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (install Debian's python3-torch and python3-numpy)")
        return SKIP
    if not os.path.exists(f"{DATA}/t10k-images-idx3-ubyte.gz"):
        print(f"SKIP: no Fashion-MNIST under {DATA} (install dataset-fashion-mnist)")
        return SKIP
    with tempfile.TemporaryDirectory() as workdir:
        ok = check(args.peer, "mlp", 400, workdir) and check(args.peer, "cnn", 150, workdir)
    print("PASS" if ok else "FAIL: accuracies differ by more than 0.1 points")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""A model murmur's own nn does not have: a character-level Transformer, trained by murmur.

    tools/murmur-launch -n 4 --config configs/exponential.yaml -- /usr/bin/python3 examples/pytorch/char_transformer.py

A small GPT-style language model (causal self-attention, 2 layers, 0.4 M parameters) learns to
predict the next byte of the license texts every Debian system ships (/usr/share/common-licenses,
from base-files: 300 kB of English). The last tenth of each text is held out; the figures are
next-character accuracy and bits per character on it. Each peer draws its training windows
from its own RNG; murmur averages the parameters after every step, with any config's
algorithm. The lines marked "murmur" are all it adds to a plain PyTorch loop.
Needs Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import glob
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import murmur
except ImportError:  # run from murmur's checkout without the launcher: the build's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import murmur

TEXTS = "/usr/share/common-licenses"


def load_texts(directory=TEXTS, held_out=0.1):
    """(train, test) byte tensors: every regular file's text, its last `held_out` kept for testing."""
    train, test = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        if os.path.islink(path) or not os.path.isfile(path):
            continue  # GPL -> GPL-3: each text once
        with open(path, "rb") as f:
            data = f.read()
        cut = int(len(data) * (1 - held_out))
        train.append(data[:cut])
        test.append(data[cut:])
    if not train:
        raise SystemExit(f"char_transformer: no texts in {directory}")
    as_tensor = lambda parts: torch.tensor(list(b"\n".join(parts)), dtype=torch.long)  # noqa: E731
    return as_tensor(train), as_tensor(test)


class CharTransformer(nn.Module):
    def __init__(self, context=64, width=128, heads=4, layers=2, vocab=256, dropout=0.1):
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        # True above the diagonal: a position sees only itself and those before it.
        self.register_buffer("causal", torch.triu(torch.ones(context, context, dtype=torch.bool), 1),
                             persistent=False)

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.embed(tokens) + self.position[:n]
        x = self.blocks(x, mask=self.causal[:n, :n])
        return self.head(self.norm(x))


def windows(data, starts, context):
    """Inputs and next-byte targets of the windows at `starts`."""
    idx = starts[:, None] + torch.arange(context + 1)
    chunk = data[idx]
    return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def evaluate(model, test, context, batch=64):
    """(next-character accuracy, bits per character) over non-overlapping windows of `test`."""
    was = model.training
    model.eval()
    starts = torch.arange(0, len(test) - context - 1, context)
    right = total = 0
    nll = 0.0
    for i in range(0, len(starts), batch):
        x, y = windows(test, starts[i:i + batch], context)
        out = model(x)
        nll += F.cross_entropy(out.flatten(0, 1), y.flatten(), reduction="sum").item()
        right += (out.argmax(-1) == y).sum().item()
        total += y.numel()
    model.train(was)
    return right / total, nll / total / math.log(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600, help="steps per peer")
    ap.add_argument("--batch-size", type=int, default=32, help="windows per peer and step")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    comm = murmur.init()  # murmur
    train, test = load_texts()
    torch.manual_seed(args.seed)
    model = CharTransformer(context=args.context)
    adam = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    opt = murmur.DecentralizedOptimizer(adam, model)  # murmur
    draw = torch.Generator().manual_seed(args.seed * 1000 + comm.rank)  # each peer its own windows
    start = time.time()
    step = opt.step_count
    while step < args.steps:
        starts = torch.randint(0, len(train) - args.context - 1, (args.batch_size,), generator=draw)
        x, y = windows(train, starts, args.context)
        adam.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step(loss=loss, samples=args.batch_size)  # murmur
        step += 1
        if step % args.eval_every == 0 or step == args.steps:
            opt.flush()
            accuracy, bpc = evaluate(model, test, args.context)
            murmur.log_eval(accuracy, bpc)  # murmur: the "loss" of this model is bits per character
            if comm.rank == 0:
                print(f"step {step}/{args.steps} ({time.time() - start:.0f} s): rank 0 next-character "
                      f"accuracy {100 * accuracy:.1f}%, {bpc:.3f} bits/char", flush=True)
    result = opt.finish(evaluate=lambda: evaluate(model, test, args.context))  # murmur
    if "accuracy" in result:
        print(f"average model: next-character accuracy {100 * result['accuracy']:.1f}%, "
              f"{result['loss']:.3f} bits/char", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

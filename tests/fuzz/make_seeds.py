#!/usr/bin/python3
"""Writes the seed corpus of each fuzz target into tests/fuzz/corpus/<target>/: small valid inputs
that the fuzzer mutates from. Run it again only to change the seeds (tools/fuzz --update-corpus
adds what the fuzzer found on top)."""
import gzip
import json
import pathlib
import struct

here = pathlib.Path(__file__).resolve().parent
repo = here.parent.parent
out = here / "corpus"


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def write(target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def frame(tag, payload, offset, total):
    head = struct.pack("<IHHQQQQII", 0x464D524D, 1, 1, tag, len(payload), offset, total, 0, 0)
    crc = crc32c(payload, crc32c(head))
    return head[:40] + struct.pack("<I", crc) + head[44:] + payload


write("frame", "whole", frame(7, b"0123456789abcdef", 0, 16))
write("frame", "middle_chunk", frame(7, b"middle", 1024, 4096))
write("frame", "empty", frame(0, b"", 0, 0))

nonce_a, nonce_b, mac = bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96))
prefix = lambda step: struct.pack("<IHH", 0x484D524D, 1, step)
write("handshake", "hello", b"\x00" + prefix(1) + struct.pack("<II", 0, 4) + nonce_a)
write("handshake", "reply", b"\x01" + prefix(2) + struct.pack("<II", 1, 4) + nonce_b + mac)
write("handshake", "proof", b"\x02" + prefix(3) + mac)

for f in sorted((repo / "configs").glob("*.yaml")):
    write("config", f.name, f.read_bytes())
write("config", "overrides", (repo / "configs" / "ring.yaml").read_bytes() +
      b"\0train.epochs=3\0model.hidden=[256,128]\0topology.graph=custom\0topology.edges=[[0,1],[1,0]]")
write("config", "empty_with_override", b"\0run.name=x\0algorithm.compressor.name=topk")

def safetensors(tensors, metadata):
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    meta = dict(metadata, **{"murmur.crc32c": "%08x" % crc32c(data)})
    text = json.dumps({"__metadata__": meta, **header}).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


write("safetensors", "two_tensors", safetensors(
    [("fc1.weight", "F32", [2, 3], struct.pack("<6f", *range(6))),
     ("fc1.bias", "F32", [2], struct.pack("<2f", 0.5, -0.5)),
     ("murmur.step", "I64", [], struct.pack("<q", 42))], {"murmur.config": "x"}))
no_crc = b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
no_crc += b" " * (-len(no_crc) % 8)
write("safetensors", "no_crc", struct.pack("<Q", len(no_crc)) + no_crc + b"\x01\x02")

images = struct.pack(">IIII", 0x803, 2, 3, 3) + bytes(range(18))
labels = struct.pack(">II", 0x801, 4) + bytes([0, 9, 3, 1])
write("idx", "images", b"\x01" + images)
write("idx", "images_gz", b"\x01" + gzip.compress(images, mtime=0))
write("idx", "labels", b"\x12" + labels)  # selector 0x12: labels with 10 classes
write("idx", "labels_gz", b"\x12" + gzip.compress(labels, mtime=0))

# membership: the first byte picks the message (0 request, 1 answer, 2 commit, 3 + 4 (n - 1):
# an agreement of a world of n ranks).
write("membership", "join_request", b"\x00" + struct.pack("<q", 705))
write("membership", "join_answer", b"\x01" + struct.pack("<qqQQ", 700, 906, 3, 28125))
write("membership", "join_commit", b"\x02" + struct.pack("<q", 906))
write("membership", "agreement_4", bytes([3 + 4 * 3]) + struct.pack("<q", 17) + bytes([0, 1, 0, 0]))

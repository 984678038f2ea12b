"""The fixed-length features of a batch of tf.Examples, serialized as one numpy block.

A feature whose encoding has the same length in every row of a batch -- floats (4
bytes a value), and ints whose varints all have one length (e.g. 0/1 labels, dates,
millisecond times) -- is a constant header plus its values, so the rows' bytes for all
such features form an (n, C) array built with column slices, no per-row work. With
``[x] = varint(byte length of x)``, one feature's map entry in the ``Features``
message (the canonical protobuf encoding of tf.train.Example, proto3 packed)::

    0x0A [E] E,   E = 0x0A [key] key 0x12 [V] V,   V = t [L] L,   L = 0x0A [P] P
    t = 0x12, P = float32 little endian (floats);  t = 0x1A, P = the varints (ints)

and the block's row is an Example of those features, ``0x0A [C] entries``. Protobuf
parsers merge a message field that occurs twice, so a record written as the tfx-bsl
encoder's Example of the other features followed by the block's row parses to the
Example of all features (TensorFlow's example parser reads concatenated Examples the
same way); tests/components/log_example_gen/test_bulk.py checks both parsers.
"""
from typing import Tuple

import numpy as np


def varint(x: int) -> bytes:
    out = bytearray()
    while True:
        b, x = x & 0x7F, x >> 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out)


def varint_length(values: np.ndarray) -> np.ndarray:
    """Varint bytes of each int64 (two's complement: 10 bytes if negative)."""
    u = values.astype(np.int64).view(np.uint64)
    n = np.ones(len(u), dtype=np.int64)
    for k in range(1, 10):
        n += u >= np.uint64(1 << (7 * k))
    return n


def fixed_length(kind: str, values: np.ndarray) -> int:
    """Bytes per value if every value encodes to the same length (floats: 4), else 0."""
    if kind == "float":
        return 4
    if kind != "int" or not len(values):
        return 0
    ends = varint_length(np.array([values.min(), values.max()], dtype=np.int64))
    # non-decreasing in the value among non-negative values; every negative value takes 10 bytes
    return int(ends[0]) if ends[0] == ends[1] and (values.min() >= 0 or values.max() < 0) else 0


def _payload(kind: str, values: np.ndarray, n: int, size: int) -> np.ndarray:
    if kind == "float":
        return np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(n, -1)
    u = values.astype(np.int64).view(np.uint64).reshape(-1)
    digits = np.empty((len(u), size), dtype=np.uint8)
    for k in range(size):
        digits[:, k] = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | (0x80 if k < size - 1 else 0)
    return digits.reshape(n, -1)


def entry_header(name: str, kind: str, payload_len: int) -> bytes:
    """The bytes of a map entry before its payload (module doc)."""
    key = name.encode("utf-8")
    list_ = b"\x0a" + varint(payload_len)
    value = (b"\x12" if kind == "float" else b"\x1a") + varint(len(list_) + payload_len) + list_
    entry = b"\x0a" + varint(len(key)) + key + b"\x12" + varint(len(value) + payload_len) + value
    return b"\x0a" + varint(len(entry) + payload_len) + entry


def block(features, n: int) -> Tuple[np.ndarray, int]:
    """[(name, kind, values, width, bytes per value)] of n rows -> ((n, C') uint8 rows, C'):
    row i is the serialized Example of those features for row i."""
    parts = []
    for name, kind, values, width, size in features:
        parts.append(np.broadcast_to(np.frombuffer(entry_header(name, kind, width * size), dtype=np.uint8),
                                     (n, len(entry_header(name, kind, width * size)))))
        parts.append(_payload(kind, values, n, size))
    body = sum(p.shape[1] for p in parts)
    head = b"\x0a" + varint(body)
    out = np.empty((n, len(head) + body), dtype=np.uint8)
    out[:, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    at = len(head)
    for p in parts:
        out[:, at:at + p.shape[1]] = p
        at += p.shape[1]
    return out, out.shape[1]

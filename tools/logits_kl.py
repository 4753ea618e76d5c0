#!/usr/bin/env python3
"""logits_kl.py - how far one run's logits are from a reference run's.

usage: logits_kl.py REF.f32 TEST.f32 VOCAB

Both files are `k3 eval --logits` output (float32 little-endian, rows of
VOCAB). Per row: KL(p_ref || p_test) in nats of the two softmaxes, and
whether the two argmaxes agree. Prints the mean and 99th-percentile KL and
the top-1 agreement, as the GGUF issue measures a quantized type. Plain
Python (no numpy): a few seconds per million logits.
"""
import math
import struct
import sys


def rows_of(path, vocab):
    """The file's rows as lists of floats; exits with a one-line error on a
    file whose size is not a whole number of rows."""
    with open(path, "rb") as f:
        data = f.read()
    row_bytes = 4 * vocab
    if not data or len(data) % row_bytes:
        sys.exit(f"logits_kl: {path}: {len(data)} bytes is not a whole number of {vocab}-float rows")
    n = len(data) // row_bytes
    return [struct.unpack_from(f"<{vocab}f", data, i * row_bytes) for i in range(n)]


def log_softmax(row):
    """log p of a row of logits (max-shifted)."""
    top = max(row)
    log_sum = math.log(sum(math.exp(v - top) for v in row)) + top
    return [v - log_sum for v in row]


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: logits_kl.py REF.f32 TEST.f32 VOCAB")
    vocab = int(sys.argv[3])
    ref, test = rows_of(sys.argv[1], vocab), rows_of(sys.argv[2], vocab)
    if len(ref) != len(test):
        sys.exit(f"logits_kl: {len(ref)} reference rows against {len(test)} test rows")
    kls, agree = [], 0
    for a, b in zip(ref, test):
        la, lb = log_softmax(a), log_softmax(b)
        kls.append(max(0.0, sum(math.exp(x) * (x - y) for x, y in zip(la, lb))))
        agree += max(range(vocab), key=a.__getitem__) == max(range(vocab), key=b.__getitem__)
    kls.sort()
    p99 = kls[min(len(kls) - 1, int(math.ceil(0.99 * len(kls))) - 1)]
    print(f"rows {len(kls)}  mean KL {sum(kls) / len(kls):.3e} nats  p99 KL {p99:.3e}  "
          f"max KL {kls[-1]:.3e}  top-1 agreement {100.0 * agree / len(kls):.2f}%")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""compare_logits.py NAME ENGINE.f32 REFERENCE.f32 N_TOKENS [TOL]

Compares two float32 [n_tokens x vocab] logit files position by position:
max |engine - reference| / max |reference| must be <= TOL (default 1e-4) at
every position. Prints one PASS/FAIL line with the worst position."""
import sys
import numpy as np

name, a_path, b_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-4
a = np.fromfile(a_path, dtype="<f4")
b = np.fromfile(b_path, dtype="<f4")
if a.size != b.size or a.size % n:
    print(f"FAIL {name}: sizes differ ({a.size} vs {b.size} floats for {n} tokens)")
    sys.exit(1)
a = a.reshape(n, -1).astype(np.float64)
b = b.reshape(n, -1).astype(np.float64)
if not np.all(np.isfinite(a)):
    print(f"FAIL {name}: engine logits contain NaN/inf")
    sys.exit(1)
rel = np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)
worst = int(rel.argmax())
if rel.max() <= tol:
    print(f"PASS {name} (max rel err {rel.max():.2e} at position {worst} of {n})")
else:
    print(f"FAIL {name}: max rel err {rel.max():.2e} at position {worst} of {n} > {tol:g}")
    sys.exit(1)

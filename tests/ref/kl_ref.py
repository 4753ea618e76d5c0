#!/usr/bin/python3
"""kl_ref.py - the figures of `k3 eval --kl-base`, computed independently in numpy (float64).

usage: kl_ref.py BASE.k3kl TEST.f32      (TEST.f32: `k3 eval --logits` of the same ids)
       kl_ref.py BASE.k3kl --ids         (print the base's ids)

Written from the base file's layout and the definitions in docs/COMMANDS.md ("KL divergence"),
which restate llama-perplexity's: over every position t that has a next id, with p the base's
softmax and q the test's,
  KLD_t = sum_i p_i (log p_i - log q_i)        NLL_t = -log q[id_{t+1}], NLL_base_t likewise
  PPL = exp(mean NLL); its error PPL * se(NLL); ln(PPL ratio) = mean (NLL - NLL_base), its error
  sqrt(se^2 + se_base^2 - 2 cov), cov = sum (a - mean a)(b - mean b) / n / (n - 1);
  se = sqrt(population variance / (n - 1)); median, percentiles interpolated at f * (n - 1);
  same top-1: argmax p == argmax q (the lowest index on ties), its error sqrt(f (1 - f) / (n - 1)).
Prints one JSON object with the keys k3 eval --kl-base --json prints.
"""
import json
import struct
import sys

import numpy as np

HEADER = 152


def read_base(path):
    """(ids, rows [n-1 x vocab] float64) of a base file; exits on a malformed one."""
    data = open(path, "rb").read()
    if data[:8] != b"K3KLBASE":
        sys.exit("kl_ref: %s: bad magic" % path)
    version, vocab, n, _ = struct.unpack_from("<4I", data, 8)
    want = HEADER + 4 * n + 4 * vocab * (n - 1) + 8
    if version != 1 or len(data) != want:
        sys.exit("kl_ref: %s: version %d, %d bytes (want %d)" % (path, version, len(data), want))
    ids = np.frombuffer(data, "<i4", n, HEADER)
    rows = np.frombuffer(data, "<f4", (n - 1) * vocab, HEADER + 4 * n).reshape(n - 1, vocab)
    return ids, rows.astype(np.float64)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def mean_se(v):
    n = len(v)
    m = v.mean()
    return m, (np.sqrt(((v - m) ** 2).sum() / n / (n - 1)) if n > 1 else 0.0)


def percentile(s, f):
    p = f * (len(s) - 1)
    i = int(p)
    p -= i
    return (1 - p) * s[i] + p * s[min(i + 1, len(s) - 1)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    ids, base = read_base(sys.argv[1])
    if sys.argv[2] == "--ids":
        print(" ".join(str(int(i)) for i in ids))
        return
    n, vocab = base.shape
    test = np.fromfile(sys.argv[2], "<f4").reshape(-1, vocab)[:n].astype(np.float64)
    lp, lq = log_softmax(base), log_softmax(test)
    # KLD = sum p (log p - log q) = sum p d + log sum p e^-d for d = x_base - x_test less any constant
    # per row (here its value at the base's argmax): summed so because p (log p - log q) directly
    # rounds to ~1e-15 x |logit| absolute, above the smallest divergences compared to 1e-9 relative.
    p = np.exp(lp)
    d = base - test
    d -= d[np.arange(len(d)), base.argmax(axis=1)][:, None]
    psum = p.sum(axis=1)
    kld = (p * d).sum(axis=1) / psum + np.log1p((p * np.expm1(-d)).sum(axis=1) / psum)
    nxt = ids[1:]
    nll, nll_base = -lq[np.arange(n), nxt], -lp[np.arange(n), nxt]
    m, se = mean_se(nll)
    mb, seb = mean_se(nll_base)
    cov = ((nll - m) * (nll_base - mb)).sum() / n / (n - 1)
    km, kse = mean_se(kld)
    s = np.sort(kld)
    same = float((base.argmax(axis=1) == test.argmax(axis=1)).mean())
    out = {"tokens_scored": n, "vocab": vocab,
           "ppl": np.exp(m), "ppl_err": np.exp(m) * se, "ppl_base": np.exp(mb), "ppl_base_err": np.exp(mb) * seb,
           "ln_ppl_ratio": (nll - nll_base).mean(), "ln_ppl_ratio_err": np.sqrt(max(se * se + seb * seb - 2 * cov, 0.0)),
           "kld_mean": km, "kld_mean_err": kse,
           "kld_median": s[n // 2] if n % 2 else 0.5 * (s[n // 2] + s[n // 2 - 1]),
           "kld_p90": percentile(s, 0.90), "kld_p99": percentile(s, 0.99), "kld_p999": percentile(s, 0.999),
           "kld_max": s[-1], "kld_min": s[0],
           "same_top": same, "same_top_err": np.sqrt(same * (1 - same) / (n - 1))}
    print(json.dumps({k: (float(v) if isinstance(v, np.floating) else v) for k, v in out.items()}))


if __name__ == "__main__":
    main()

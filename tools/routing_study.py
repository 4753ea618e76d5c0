#!/usr/bin/python3
"""routing_study.py - how a trained model routes: the expert-cache study on real routing.

  routing_study.py MODEL HELDOUT.jsonl OUT_DIR [--docs N] [--slots "4 8 16"]

Feeds N held-out documents (tools/demo_corpus.py: dialogues as chats, texts as prompts) through
`k3 run --trace` (teacher-forced prompt plus a greedy answer of 32 tokens), concatenates the
traces ("token layer expert" lines, token numbers made global) and prints, as Markdown:
  * per MoE layer: lookups, the share of the most used quarter of the experts, the normalised
    entropy of expert use (1 = uniform), and the median / 90th percentile reuse distance (tokens
    since the same expert was last used in that layer);
  * build/tools/trace_replay's hit rates of LRU, LFRU and Belady at several cache sizes.
"""
import json
import math
import os
import subprocess
import sys


def run_docs(model, heldout, out, n_docs):
    lines, base = [], 0
    with open(heldout) as f:
        docs = [json.loads(l) for l in f][:n_docs]
    for i, d in enumerate(docs):
        tr = os.path.join(out, "doc.trace")
        cmd = ["./k3", "run", model, "-n", "32", "--trace", tr]
        if "chat" in d:
            cmd += ["--chat", "-p", d["chat"][0]]
        else:
            cmd += ["-p", d["text"][:400]]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        last = -1
        for l in open(tr):
            t, L, e = (int(x) for x in l.split())
            lines.append((base + t, L, e))
            last = max(last, t)
        base += last + 1
    path = os.path.join(out, "all.trace")
    with open(path, "w") as f:
        for t, L, e in lines:
            f.write("%d %d %d\n" % (t, L, e))
    return path, lines, base


def layer_table(lines, n_experts):
    by_layer = {}
    for t, L, e in lines:
        by_layer.setdefault(L, []).append((t, e))
    rows = []
    for L in sorted(by_layer):
        v = by_layer[L]
        counts = [0] * n_experts
        for _, e in v:
            counts[e] += 1
        n = len(v)
        top = sorted(counts, reverse=True)[:max(1, n_experts // 4)]
        ent = -sum(c / n * math.log(c / n) for c in counts if c) / math.log(n_experts)
        last, dist = {}, []
        for t, e in v:
            if e in last:
                dist.append(t - last[e])
            last[e] = t
        dist.sort()
        med = dist[len(dist) // 2] if dist else 0
        p90 = dist[int(len(dist) * 0.9)] if dist else 0
        rows.append("| %d | %d | %.1f%% | %.3f | %d / %d |" % (L, n, 100.0 * sum(top) / n, ent, med, p90))
    return rows


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    model, heldout, out = argv[:3]
    n_docs = int(argv[argv.index("--docs") + 1]) if "--docs" in argv else 40
    slots = (argv[argv.index("--slots") + 1] if "--slots" in argv else "4 8 12 16 24 32").split()
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(model, "config.json")))
    tc = cfg.get("text_config", cfg)
    n_experts, topk = tc["num_experts"], tc["num_experts_per_token"]
    path, lines, n_tokens = run_docs(model, heldout, out, n_docs)
    print("%d documents, %d tokens, %d lookups (%d experts per MoE layer, top-%d)\n"
          % (n_docs, n_tokens, len(lines), n_experts, topk))
    print("| layer | lookups | top quarter's share | entropy | reuse distance median / p90 |")
    print("|---|---|---|---|---|")
    print("\n".join(layer_table(lines, n_experts)))
    print()
    r = subprocess.run(["build/tools/trace_replay", path] + slots, capture_output=True, text=True, check=True)
    print(r.stdout.strip())


if __name__ == "__main__":
    main(sys.argv[1:])

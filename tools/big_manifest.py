#!/usr/bin/env python3
"""big_manifest.py OUT_DIR [LAYERS EXPERTS] - a packed directory's manifest.json
and tables.bin of the real Kimi K3's size (93 layers x 896 MXFP4 experts by
default: ~500,000 tensors) with sparse .bin files of the sizes they record, to
measure the manifest reader (tools/manifest_bench.c). No weights are written:
the files are holes. The tables.bin layout is the one in
engine/formats/manifest.h, written here independently of the C writer."""
import json, os, struct, sys

out = sys.argv[1]
n_layers = int(sys.argv[2]) if len(sys.argv) > 2 else 93
n_experts = int(sys.argv[3]) if len(sys.argv) > 3 else 896
A, TA = 4096, 64
hidden, inter, latent, vocab = 7168, 2048, 3072, 163840
os.makedirs(out, exist_ok=True)

def up(x, a): return (x + a - 1) // a * a

tensors = []
def add(name, dtype, shape, file, off, size):
    tensors.append({"name": name, "dtype": dtype, "shape": shape, "file": file, "offset": off, "bytes": size})

# trunk: one run per layer of a few norms and projections (bf16)
trunk_off, layers = 0, []
for l in range(n_layers):
    start, pos = trunk_off, trunk_off
    for name, shape in [("input_layernorm.weight", [hidden]), ("post_attention_layernorm.weight", [hidden]),
                        ("self_attn.q_proj.weight", [4096, hidden]), ("self_attn.o_proj.weight", [hidden, 4096]),
                        ("block_sparse_moe.gate.weight", [n_experts, hidden])]:
        size = 2
        for d in shape: size *= d
        add(f"model.layers.{l}.{name}", "BF16", shape, "trunk", pos, size)
        pos = up(pos + size, TA)
    trunk_off = up(pos, A)
    layers.append({"trunk_offset": start, "trunk_bytes": trunk_off - start})

# experts: one page per (layer, expert) with w1 w3 w2 as MXFP4 packed + scale
mats = [("w1", inter, latent), ("w3", inter, latent), ("w2", latent, inter)]
page = 0
for _, r, c in mats: page = up(page + r * c // 2, TA); page = up(page + r * c // 32, TA)
page = up(page, A)
pages, eoff = [], 0
for l in range(n_layers):
    for e in range(n_experts):
        pos = eoff
        for w, r, c in mats:
            base = f"model.layers.{l}.block_sparse_moe.experts.{e}.{w}.weight"
            add(base + "_packed", "U8", [r, c // 2], "experts", pos, r * c // 2); pos = up(pos + r * c // 2, TA)
            add(base + "_scale", "U8", [r, c // 32], "experts", pos, r * c // 32); pos = up(pos + r * c // 32, TA)
        pages.append([l, e, eoff])
        eoff += page

embed_bytes = vocab * hidden * 2
add("model.embed_tokens.weight", "BF16", [vocab, hidden], "embed", 0, embed_bytes)
add("model.norm.weight", "BF16", [hidden], "head", 0, hidden * 2)
add("lm_head.weight", "BF16", [vocab, hidden], "head", up(hidden * 2, TA), embed_bytes)
sizes = {"trunk.bin": trunk_off, "experts.bin": eoff, "embed.bin": up(embed_bytes, A),
         "head.bin": up(up(hidden * 2, TA) + embed_bytes, A)}
for name, size in sizes.items():
    with open(os.path.join(out, name), "wb") as f: f.truncate(size)
# tables.bin: header, tensor records, layer records, page records, names
FILES = {"trunk": 0, "experts": 1, "embed": 2, "head": 3}
dtypes = sorted({t["dtype"] for t in tensors})
body = bytearray()
for t in tensors:
    shape = t["shape"] + [0] * (8 - len(t["shape"]))
    body += struct.pack("<QQ8qBBB5x", t["offset"], t["bytes"], *shape, dtypes.index(t["dtype"]), len(t["shape"]),
                        FILES[t["file"]])
for L in layers: body += struct.pack("<QQ", L["trunk_offset"], L["trunk_bytes"])
for l, e, o in pages: body += struct.pack("<IIQ", l, e, o)
names = b"".join(t["name"].encode() + b"\0" for t in tensors)
body += names
h = 1469598103934665603   # K3_FNV_INIT (include/k3.h)
for c in bytes(body): h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
header = struct.pack("<8sIIIIIIQQ16x", b"K3TABLES", 1, 64, len(tensors), len(layers), len(pages), 88, len(names), h)
with open(os.path.join(out, "tables.bin"), "wb") as f: f.write(header + body)
m = {"format": "k3-packed", "version": 2, "alignment": A,
     "source": {"fingerprint": "0123456789abcdef", "shards": []},
     "config": {"model_type": "kimi_k3", "num_hidden_layers": n_layers, "n_routed_experts": n_experts},
     "tables": {"bytes": len(header) + len(body), "checksum": "%016x" % h, "dtypes": dtypes},
     "experts": {"page_bytes": page, "n_layers_moe": n_layers, "n_experts": n_experts},
     "embed": {"name": "model.embed_tokens.weight", "row_bytes": hidden * 2, "rows": vocab, "dtype": "BF16"},
     "head": {"norm": "model.norm.weight", "lm_head": "lm_head.weight", "tied": False},
     "files": sizes, "checksums": {k: "0000000000000000" for k in sizes}}
with open(os.path.join(out, "manifest.json"), "w") as f: json.dump(m, f, indent=1)
print(f"{len(tensors)} tensors, {len(pages)} pages, manifest {os.path.getsize(os.path.join(out, 'manifest.json'))} "
      f"bytes, tables.bin {len(header) + len(body)} bytes")

#!/usr/bin/python3
"""corrupt_ckpt.py SRC_DIR DST_DIR MODE - copy a one-shard checkpoint, then break it.

MODE is one of: truncated, header_past_end, overlap, out_of_range,
wrong_dtype, wrong_shape, missing_tensor, bad_header_json, config_missing_field,
config_bad_json, config_wrong_type, config_bad_layers, no_tokenizer,
header_short1 .. header_short7 (header length N bytes short, JSON still valid),
trailing_bytes, index_slash, index_dotdot, index_empty, index_nonstring (an
index whose weight_map names a bad file), fewer_ranks (added tokens past the
256 + 2 reserved slots, below vocab_size), added_token_rank (an added token
on a BPE rank), added_token_past_vocab.
Used by tests/t_badinput.sh: each broken copy must make k3 fail with one clear
line naming the file, never crash."""
import json
import os
import shutil
import struct
import sys

src, dst, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if os.path.exists(dst):
    shutil.rmtree(dst)
shutil.copytree(src, dst)
shard = os.path.join(dst, "model.safetensors")


def read_shard():
    raw = open(shard, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_shard(header, data, length=None):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(shard, "wb") as f:
        f.write(struct.pack("<Q", length if length is not None else len(h)) + h + data)


def first(header, suffix):
    return next(k for k in header if k.endswith(suffix))


def edit_config(fn):
    p = os.path.join(dst, "config.json")
    c = json.load(open(p))
    fn(c)
    json.dump(c, open(p, "w"))


if mode == "truncated":
    size = os.path.getsize(shard)
    os.truncate(shard, size - size // 3)
elif mode == "header_past_end":
    h, d = read_shard()
    write_shard(h, d, length=10 ** 12)
elif mode == "overlap":
    h, d = read_shard()
    a, b = first(h, "q_proj.weight"), first(h, "k_proj.weight")
    h[b]["data_offsets"] = [h[a]["data_offsets"][0] + 2, h[a]["data_offsets"][1] + 2]
    write_shard(h, d)
elif mode == "out_of_range":
    h, d = read_shard()
    k = first(h, "o_proj.weight")
    size = h[k]["data_offsets"][1] - h[k]["data_offsets"][0]
    h[k]["data_offsets"] = [len(d) + 64, len(d) + 64 + size]
    write_shard(h, d)
elif mode == "wrong_dtype":
    h, d = read_shard()
    k = first(h, "A_log")            # F32, same byte count as I32
    h[k]["dtype"] = "I32"
    write_shard(h, d)
elif mode == "wrong_shape":
    h, d = read_shard()
    k = first(h, "o_proj.weight")
    h[k]["shape"] = h[k]["shape"][::-1]
    write_shard(h, d)
elif mode == "missing_tensor":
    h, d = read_shard()
    gone = first(h, "post_attention_layernorm.weight")
    lo, hi = h.pop(gone)["data_offsets"]
    for k, v in h.items():           # close the gap so only the name is missing
        if k != "__metadata__" and v["data_offsets"][0] >= hi:
            v["data_offsets"] = [v["data_offsets"][0] - (hi - lo), v["data_offsets"][1] - (hi - lo)]
    write_shard(h, d[:lo] + d[hi:])
elif mode.startswith("header_short"):
    short = int(mode[len("header_short"):])
    h, d = read_shard()
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8 + 8)    # at least 8 padding spaces: JSON stays valid when cut
    with open(shard, "wb") as f:
        f.write(struct.pack("<Q", len(j) - short) + j + d)
elif mode == "trailing_bytes":
    h, d = read_shard()
    write_shard(h, d + b"\0" * 8)
elif mode.startswith("index_"):
    h, d = read_shard()
    names = sorted(k for k in h if k != "__metadata__")
    wm = {k: "model.safetensors" for k in names}
    wm[names[len(names) // 2]] = {"index_slash": "sub/model.safetensors", "index_dotdot": "..model.safetensors",
                                  "index_empty": "", "index_nonstring": 7}[mode]
    json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(dst, "model.safetensors.index.json"), "w"))
elif mode == "fewer_ranks":
    # 64 fewer BPE ranks: the added tokens at 766, 767 now sit past the
    # 256 + 2 reserved slots after n_base, but still below vocab_size
    p = os.path.join(dst, "tiktoken.model")
    lines = open(p).read().splitlines(True)
    open(p, "w").write("".join(lines[:-64]))
elif mode == "added_token_rank":
    p = os.path.join(dst, "tokenizer_config.json")
    tc = json.load(open(p))
    tc["added_tokens_decoder"]["5"] = {"content": "<|on_a_rank|>", "special": True}
    json.dump(tc, open(p, "w"))
elif mode == "added_token_past_vocab":
    p = os.path.join(dst, "tokenizer_config.json")
    tc = json.load(open(p))
    vocab = json.load(open(os.path.join(dst, "config.json")))["vocab_size"]
    tc["added_tokens_decoder"][str(vocab + 5)] = {"content": "<|past_vocab|>", "special": True}
    json.dump(tc, open(p, "w"))
elif mode == "bad_header_json":
    raw = bytearray(open(shard, "rb").read())
    raw[8] = ord("[")
    raw[9:20] = b"{{{{{{{{{{{"
    open(shard, "wb").write(raw)
elif mode == "config_missing_field":
    edit_config(lambda c: c.pop("kv_lora_rank"))
elif mode == "config_bad_json":
    open(os.path.join(dst, "config.json"), "a").write("{,")
elif mode == "config_wrong_type":
    edit_config(lambda c: c.__setitem__("hidden_size", "sixty-four"))
elif mode == "config_bad_layers":
    edit_config(lambda c: c["linear_attn_config"].__setitem__("full_attn_layers", [0, 99]))
elif mode == "no_tokenizer":
    os.remove(os.path.join(dst, "tiktoken.model"))
else:
    sys.exit("unknown mode " + mode)

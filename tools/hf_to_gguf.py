#!/usr/bin/python3
"""hf_to_gguf.py - a Kimi Linear checkpoint (Hugging Face layout, as `k3 gen` or tests/ref/gen_ckpt.py
write it) to a GGUF file of architecture `kimi-linear`, written with llama.cpp's own gguf-py.

llama.cpp's converter (convert_hf_to_gguf.py, conversion/kimi_linear.py) needs torch and transformers,
which this machine does not have. This script makes the same file from the same inputs: the same
metadata keys and values, tensor names, transforms and tensor types, and the same vocabulary (the
tiktoken path of that converter), restated in our own words and read back by llama.cpp itself
(tests/fixtures/gguf/kimi_linear/make_fixtures.sh). docs/MODEL.md, "Kimi Linear in a GGUF", lists the
mapping. One deliberate addition: k3 gen's config.json has no context length, so the converter's
search for one (max_position_embeddings, model_max_length, ...) is extended to generation_config.json's
max_length; without a context length llama.cpp refuses the file.

    PYTHONPATH=/tmp/llama.cpp/gguf-py hf_to_gguf.py MODEL_DIR OUT.gguf [--outtype f32|bf16|f16|q8_0]
"""
import argparse
import base64
import json
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("hf_to_gguf: needs llama.cpp's gguf-py: PYTHONPATH=/path/to/llama.cpp/gguf-py")

OUTTYPES = {
    "f32": (gguf.LlamaFileType.ALL_F32, gguf.GGMLQuantizationType.F32),
    "bf16": (gguf.LlamaFileType.MOSTLY_BF16, gguf.GGMLQuantizationType.BF16),
    "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
    "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
}
ARCH = gguf.MODEL_ARCH.KIMI_LINEAR
# tensors the converter always keeps in F32 (besides 1-D tensors, *_norm.weight and names not ending in
# .weight): the router, and KDA's short convolutions
KEEP_F32 = (gguf.MODEL_TENSOR.FFN_GATE_INP, gguf.MODEL_TENSOR.SSM_CONV1D_Q, gguf.MODEL_TENSOR.SSM_CONV1D_K,
            gguf.MODEL_TENSOR.SSM_CONV1D_V)


# ------------------------------------------------------------------------------ safetensors input

class Shards:
    """Every tensor of the checkpoint's *.safetensors files, read as float32 on demand (the converter
    turns every dtype other than f16/f32 into f32 before writing)."""

    def __init__(self, model_dir):
        self.where = {}
        files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
        if not files:
            raise SystemExit("hf_to_gguf: %s: no *.safetensors files" % model_dir)
        for fn in files:
            path = os.path.join(model_dir, fn)
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                head = json.loads(f.read(n))
            head.pop("__metadata__", None)
            for name in sorted(head):
                self.where[name] = (path, 8 + n, head[name])

    def names(self):
        return list(self.where)

    def shape(self, name):
        return tuple(self.where[name][2]["shape"])

    def get(self, name):
        path, base, e = self.where[name]
        b, en = e["data_offsets"]
        raw = np.fromfile(path, dtype=np.uint8, count=en - b, offset=base + b)
        dt = e["dtype"]
        if dt == "F32":
            a = raw.view("<f4")
        elif dt == "BF16":
            a = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F16":
            a = raw.view("<f2")          # the converter keeps f16 as f16 until the output type
        else:
            raise SystemExit("hf_to_gguf: tensor %s: dtype %s is not supported" % (name, dt))
        return a.reshape(e["shape"])


# ------------------------------------------------------------------------------ tensors

def layer_of(name):
    for part in name.split("."):
        if part.isdecimal():
            return int(part)
    return None


def gguf_tensors(cfg, shards):
    """Yield (GGUF name, numpy array) in the converter's order, applying its transforms:
    conv weights to [1, C, 1, W]; A_log to -exp(A_log); dt_bias renamed dt_proj.bias; kv_b_proj split
    per head into k_b (each head's nope block transposed to [kv_lora, nope]) and v_b; all experts of
    a layer stacked into gate (w1), down (w2) and up (w3) tensors of [E, rows, cols]."""
    n_layers = cfg["num_hidden_layers"]
    tmap = gguf.get_tensor_name_map(ARCH, n_layers)
    n_experts = cfg["num_experts"]
    experts = {}
    for hf in shards.names():
        name = hf
        if name.endswith("e_score_correction_bias"):
            name = name.replace("e_score_correction_bias", "e_score_correction.bias")
        bid = layer_of(name)
        data = shards.get(hf)
        if name.endswith((".q_conv1d.weight", ".k_conv1d.weight", ".v_conv1d.weight")):
            data = data.reshape(1, data.shape[0], 1, data.shape[-1])
        if name.endswith(".A_log"):
            data = -np.exp(data.astype(np.float32))
        if name.endswith(".dt_bias"):
            name = name[:-len(".dt_bias")] + ".dt_proj.bias"
        if "block_sparse_moe.experts" in name:
            experts.setdefault(bid, {})[name] = data
            if len(experts[bid]) == 3 * n_experts:
                for wid, key in (("w1", gguf.MODEL_TENSOR.FFN_GATE_EXP), ("w2", gguf.MODEL_TENSOR.FFN_DOWN_EXP),
                                 ("w3", gguf.MODEL_TENSOR.FFN_UP_EXP)):
                    stack = np.stack([experts[bid].pop("model.layers.%d.block_sparse_moe.experts.%d.%s.weight"
                                                       % (bid, e, wid)) for e in range(n_experts)])
                    yield gguf.TENSOR_NAMES[key].format(bid=bid) + ".weight", stack
            continue
        if name.endswith("kv_b_proj.weight"):
            h, nope, v = cfg["num_key_value_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
            if data.shape[0] != h * (nope + v):
                raise SystemExit("hf_to_gguf: %s has %d rows, expected %d heads x (%d + %d)"
                                 % (hf, data.shape[0], h, nope, v))
            kv = data.reshape(h, nope + v, data.shape[-1])
            yield map_name(tmap, name.replace("kv_b_proj", "k_b_proj"), hf), np.ascontiguousarray(
                kv[:, :nope, :].transpose(0, 2, 1))
            yield map_name(tmap, name.replace("kv_b_proj", "v_b_proj"), hf), np.ascontiguousarray(kv[:, nope:, :])
            continue
        yield map_name(tmap, name, hf), data
    left = [n for d in experts.values() for n in d]
    if left:
        raise SystemExit("hf_to_gguf: experts left unstacked (num_experts=%d): %s" % (n_experts, left[:3]))


def map_name(tmap, name, hf):
    new = tmap.get_name(key=name, try_suffixes=(".weight", ".bias"))
    if new is None:
        raise SystemExit("hf_to_gguf: no GGUF name for tensor %s" % hf)
    return new


def is_tensor(new_name, key, bid):
    base = gguf.TENSOR_NAMES[key]
    if "{bid}" in base:
        if bid is None:
            return False
        base = base.format(bid=bid)
    return new_name == base + ".weight"


def tensor_type(new_name, data, want):
    """The converter's choice: F32 for 1-D tensors, norms, names not ending .weight, the router and
    the convolutions; else the output type."""
    bid = layer_of(new_name)
    if data.ndim <= 1 or new_name.endswith("_norm.weight") or not new_name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    if any(is_tensor(new_name, k, bid) for k in KEEP_F32):
        return gguf.GGMLQuantizationType.F32
    return want


# ------------------------------------------------------------------------------ vocabulary

def byte_to_unicode():
    """GPT-2's reversible spelling of bytes as printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def bpe_parts(ranks, token, max_rank):
    """Split token bytes by applying merges of rank < max_rank, lowest rank first (tiktoken's rule)."""
    parts = [bytes([b]) for b in token]
    while True:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best_rank is None or best_rank >= max_rank:
            return parts
        parts = parts[:best] + [parts[best] + parts[best + 1]] + parts[best + 2:]


def write_vocab(w, model_dir, cfg):
    """The converter's tiktoken path: tokens in GPT-2 spelling, [PADi] for unused ids, type CONTROL for
    the specials, merges rebuilt from the ranks, pre-tokenizer kimi-k2, special ids from config.json
    (gguf-py's SpecialVocab) with eos replaced by the tokenizer's own eos."""
    ranks = {}
    with open(os.path.join(model_dir, "tiktoken.model")) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    enc = byte_to_unicode()
    spell = lambda b: "".join(enc[x] for x in b)  # noqa: E731
    vocab, merges = {}, []
    for tok, rank in ranks.items():
        vocab[spell(tok)] = rank
        if len(tok) > 1:
            parts = bpe_parts(ranks, tok, rank)
            if len(parts) == 2:
                merges.append(spell(parts[0]) + " " + spell(parts[1]))
    n_base = len(ranks)
    named = {int(i): t["content"] for i, t in tc.get("added_tokens_decoder", {}).items()}
    specials = {named.get(i, "<|reserved_token_%d|>" % i): i for i in range(n_base, n_base + 256)}
    reverse = {i: t for t, i in {**vocab, **specials}.items()}
    special_ids = set(specials.values())
    tokens, types = [], []
    for i in range(cfg["vocab_size"]):
        if i not in reverse:
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.CONTROL if i in special_ids else gguf.TokenType.NORMAL)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("kimi-k2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    gguf.SpecialVocab(model_dir, load_merges=False).add_to_gguf(w, quiet=True)
    eos = tc.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    if eos in specials:
        w.add_eos_token_id(specials[eos])


# ------------------------------------------------------------------------------ metadata

def find(cfg, keys):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


def write_metadata(w, model_dir, cfg, ftype):
    """The converter's keys, in its order (its generic text-model keys, then Kimi Linear's)."""
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    n_layers = cfg["num_hidden_layers"]
    w.add_block_count(n_layers)
    n_ctx = find(cfg, ["max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length",
                       "model_max_length"])
    gen_path = os.path.join(model_dir, "generation_config.json")
    if n_ctx is None and os.path.exists(gen_path):
        with open(gen_path) as f:
            n_ctx = json.load(f).get("max_length")       # our addition (see the header)
    if n_ctx is not None:
        w.add_context_length(n_ctx)
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(1)              # Kimi Linear sets num_key_value_heads = 1 first (replaced below)
    if cfg.get("rope_theta") is not None:
        w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(find(cfg, ["num_experts_per_tok", "num_experts_per_token"]))
    act = cfg.get("moe_router_activation_func", "sigmoid")
    w.add_expert_gating_func({"sigmoid": gguf.ExpertGatingFuncType.SIGMOID,
                              "softmax": gguf.ExpertGatingFuncType.SOFTMAX}[act])
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])      # overwritten below; value_length stays head_dim (unused)
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(ftype)
    w.add_vocab_size(cfg["vocab_size"])
    la = cfg["linear_attn_config"]
    full = la["full_attn_layers"]
    w.add_head_count_kv([1 if L + 1 in full else 0 for L in range(n_layers)])
    w.add_ssm_conv_kernel(la["short_conv_kernel_size"])
    w.add_kda_head_dim(la["head_dim"])
    if cfg.get("q_lora_rank") is not None:
        w.add_q_lora_rank(cfg["q_lora_rank"])
    kv_lora, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    w.add_kv_lora_rank(kv_lora)
    w.add_rope_dimension_count(rope)
    w.add_key_length(kv_lora + rope)
    w.add_key_length_mla(cfg["qk_nope_head_dim"] + rope)
    w.add_value_length_mla(cfg["v_head_dim"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_count(cfg["num_shared_experts"])
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


# ------------------------------------------------------------------------------ main

def convert(model_dir, out, outtype):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "kimi_linear":
        raise SystemExit("hf_to_gguf: %s: model_type %r, only kimi_linear is converted" % (model_dir, cfg.get("model_type")))
    ftype, want = OUTTYPES[outtype]
    shards = Shards(model_dir)
    w = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[ARCH])
    write_metadata(w, model_dir, cfg, ftype)
    write_vocab(w, model_dir, cfg)
    # pass 1: names, shapes and types, so the header can be written before any data (the data is
    # converted again in pass 2, one tensor at a time, so a model of many GB needs little memory)
    plan = []
    for name, data in gguf_tensors(cfg, shards):
        t = tensor_type(name, data, want)
        if t == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
            t = gguf.GGMLQuantizationType.F16    # the converter's fallback when rows are not whole blocks
        byte_shape = gguf.quant_shape_to_byte_shape(data.shape, t)
        plain = t in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
        plan.append((name, t))
        w.add_tensor_info(name, data.shape if plain else byte_shape,
                          np.dtype(np.float32 if t == gguf.GGMLQuantizationType.F32 else
                                   np.float16 if t == gguf.GGMLQuantizationType.F16 else np.uint8),
                          int(np.prod(byte_shape)), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for (name, t), (name2, data) in zip(plan, gguf_tensors(cfg, shards)):
        assert name == name2
        arr = data.astype(np.float32) if t != gguf.GGMLQuantizationType.F16 else data.astype(np.float16)
        if t not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            arr = gguf.quants.quantize(arr, t)
        w.write_tensor_data(arr)
    w.close()
    return plan


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kimi Linear (HF layout) -> GGUF kimi-linear, as llama.cpp's converter")
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", default="bf16", choices=sorted(OUTTYPES))
    a = ap.parse_args(argv)
    plan = convert(a.model_dir, a.out, a.outtype)
    counts = {}
    for _, t in plan:
        counts[t.name] = counts.get(t.name, 0) + 1
    print("hf_to_gguf: wrote %s: %d tensors (%s), %d bytes" % (a.out, len(plan),
          ", ".join("%s %d" % kv for kv in sorted(counts.items())), os.path.getsize(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

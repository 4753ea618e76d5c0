#!/usr/bin/python3
"""hf_to_gguf.py - a Kimi Linear or Kimi K3 checkpoint (Hugging Face layout, as `k3 gen` or
tests/ref/gen_ckpt.py write it) to a GGUF file of architecture `kimi-linear` or `kimi-k3`, written
with llama.cpp's own gguf-py.

Kimi K3 follows upstream llama.cpp's conversion/kimi_k3.py as read (the fetched snapshot's gguf-py
predates kimi-k3, so its names and keys are written here as strings, docs/MODEL.md "Kimi K3 in a
GGUF"): the `language_model.` prefix dropped, the vision tower skipped, the AttnRes norm and
projection folded into one score vector, -exp(A_log) of the heads only, g_proj as ssm_g (KDA) or
attn_gate (MLA), the latent MoE as ffn_routed_*, and the compressed-tensors MXFP4 experts repacked
into ggml MXFP4 blocks (the scale byte kept, the nibbles reordered) under file type MXFP4_MOE.

llama.cpp's converter (convert_hf_to_gguf.py, conversion/kimi_linear.py) needs torch and transformers,
which this machine does not have. This script makes the same file from the same inputs: the same
metadata keys and values, tensor names, transforms and tensor types, and the same vocabulary (the
tiktoken path of that converter), restated in our own words and read back by llama.cpp itself
(tests/fixtures/gguf/kimi_linear/make_fixtures.sh). docs/MODEL.md, "Kimi Linear in a GGUF", lists the
mapping. One deliberate addition: k3 gen's config.json has no context length, so the converter's
search for one (max_position_embeddings, model_max_length, ...) is extended to generation_config.json's
max_length; without a context length llama.cpp refuses the file.

    PYTHONPATH=/tmp/llama.cpp/gguf-py hf_to_gguf.py MODEL_DIR OUT.gguf [--outtype f32|bf16|f16|q8_0]

For Kimi K3 --outtype is the dense weights' type; the routed experts stay MXFP4.
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

    def get_raw(self, name):
        """A U8 tensor's bytes (MXFP4 nibbles and scales)."""
        path, base, e = self.where[name]
        b, en = e["data_offsets"]
        if e["dtype"] != "U8":
            raise SystemExit("hf_to_gguf: tensor %s: dtype %s, expected U8" % (name, e["dtype"]))
        return np.fromfile(path, dtype=np.uint8, count=en - b, offset=base + b).reshape(e["shape"])

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


# ------------------------------------------------------------------------------ Kimi K3

K3_ARCH = "kimi-k3"
# Hugging Face name inside a layer -> the GGUF name inside a block (upstream's tensor names)
K3_BLOCK = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.f_a_proj.weight": "ssm_f_a.weight", "self_attn.f_b_proj.weight": "ssm_f_b.weight",
    "self_attn.b_proj.weight": "ssm_beta.weight", "self_attn.dt_bias": "ssm_dt.bias",
    "self_attn.o_norm.weight": "ssm_norm.weight",
    "self_attn.q_a_proj.weight": "attn_q_a.weight", "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
    "self_attn.q_b_proj.weight": "attn_q_b.weight",
    "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
    "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "block_sparse_moe.gate.e_score_correction_bias": "exp_probs_b.bias",
    "block_sparse_moe.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
    "block_sparse_moe.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "block_sparse_moe.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
    "block_sparse_moe.routed_expert_down_proj.weight": "ffn_routed_down.weight",
    "block_sparse_moe.routed_expert_up_proj.weight": "ffn_routed_up.weight",
    "block_sparse_moe.routed_expert_norm.weight": "ffn_routed_norm.weight",
}
K3_KEEP_F32 = ("ffn_gate_inp.weight", "ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight")


def mxfp4_blocks(packed, scale):
    """compressed-tensors MXFP4 (U8 [rows, cols/2], column 2k in the low nibble of byte k; E8M0
    [rows, cols/32]) -> ggml MXFP4 blocks [rows, cols/32 * 17]: the scale byte, then 16 bytes whose
    low nibbles are the block's weights 0-15 and high nibbles 16-31. ggml's doubled E2M1 values times
    2^(e - 128) equal E2M1 times 2^(e - 127): the byte is kept."""
    rows, half = packed.shape
    nb = half * 2 // 32
    codes = np.empty((rows, half * 2), np.uint8)
    codes[:, 0::2] = packed & 15
    codes[:, 1::2] = packed >> 4
    codes = codes.reshape(rows, nb, 32)
    out = np.empty((rows, nb, 17), np.uint8)
    out[:, :, 0] = scale.reshape(rows, nb)
    out[:, :, 1:] = codes[:, :, :16] | (codes[:, :, 16:] << 4)
    return out.reshape(rows, nb * 17)


def k3_tensors(cfg, shards):
    """Yield (GGUF name, array, raw ggml type or None) for a K3 checkpoint, in a fixed order."""
    P = "language_model."
    la = cfg["linear_attn_config"]
    mla = {x - 1 for x in la["full_attn_layers"]}
    heads = la["num_heads"]
    H, nope, v = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    get = lambda n: shards.get(P + n)  # noqa: E731
    have = set(shards.names())
    yield "token_embd.weight", get("model.embed_tokens.weight"), None
    yield "output_norm.weight", get("model.norm.weight"), None
    if P + "lm_head.weight" in have:
        yield "output.weight", get("lm_head.weight"), None
    yield "output_res_score.weight", (get("model.output_attn_res_norm.weight").astype(np.float32) *
                                      get("model.output_attn_res_proj.weight").astype(np.float32).reshape(-1)), None
    for l in range(cfg["num_hidden_layers"]):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        for hf, gg in K3_BLOCK.items():
            if P + p + hf in have:
                yield b + gg, get(p + hf), None
        for what, gg in (("self_attention_res", "attn_res_score"), ("mlp_res", "ffn_res_score")):
            yield b + gg + ".weight", (get(p + what + "_norm.weight").astype(np.float32) *
                                       get(p + what + "_proj.weight").astype(np.float32).reshape(-1)), None
        if P + p + "self_attn.g_proj.weight" in have:
            yield b + ("attn_gate.weight" if l in mla else "ssm_g.weight"), get(p + "self_attn.g_proj.weight"), None
        if P + p + "self_attn.A_log" in have:
            yield b + "ssm_a", (-np.exp(get(p + "self_attn.A_log").astype(np.float32).reshape(-1)[:heads])).reshape(1, 1, heads, 1), None
            for x in "qkv":
                t = get(p + "self_attn.%s_conv1d.weight" % x)
                yield b + "ssm_conv1d_%s.weight" % x, t.reshape(1, t.shape[0], 1, t.shape[-1]), None
        if P + p + "self_attn.kv_b_proj.weight" in have:
            kv = get(p + "self_attn.kv_b_proj.weight").reshape(H, nope + v, -1)
            yield b + "attn_k_b.weight", np.ascontiguousarray(kv[:, :nope, :].transpose(0, 2, 1)), None
            yield b + "attn_v_b.weight", np.ascontiguousarray(kv[:, nope:, :]), None
        e0 = P + p + "block_sparse_moe.experts.0.w1.weight_packed"
        if e0 in have:
            for wid, gg in (("w1", "ffn_gate_exps"), ("w2", "ffn_down_exps"), ("w3", "ffn_up_exps")):
                e = p + "block_sparse_moe.experts.%d." + wid + ".weight_"
                stack = np.stack([mxfp4_blocks(shards.get_raw(P + (e % i) + "packed"), shards.get_raw(P + (e % i) + "scale"))
                                  for i in range(cfg["num_experts"])])
                yield b + gg + ".weight", stack, gguf.GGMLQuantizationType.MXFP4


def convert_k3(model_dir, out, outtype):
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    cfg = top["text_config"]
    ftype_dense, want = OUTTYPES[outtype]
    shards = Shards(model_dir)
    w = gguf.GGUFWriter(out, K3_ARCH)
    A = K3_ARCH
    la = cfg["linear_attn_config"]
    n_layers = cfg["num_hidden_layers"]
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_uint32(A + ".block_count", n_layers)
    w.add_uint32(A + ".context_length", cfg.get("max_position_embeddings", 4096))
    w.add_uint32(A + ".embedding_length", cfg["hidden_size"])
    w.add_uint32(A + ".feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(A + ".attention.head_count", cfg["num_attention_heads"])
    w.add_array(A + ".attention.head_count_kv", [1 if L + 1 in la["full_attn_layers"] else 0 for L in range(n_layers)])
    w.add_float32(A + ".attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    w.add_uint32(A + ".expert_count", cfg["num_experts"])
    w.add_uint32(A + ".expert_used_count", cfg["num_experts_per_token"])
    w.add_uint32(A + ".vocab_size", cfg["vocab_size"])
    w.add_uint32(A + ".ssm.conv_kernel", la["short_conv_kernel_size"])
    w.add_uint32(A + ".kda.head_dim", la["head_dim"])
    w.add_float32(A + ".kda.gate_lower_bound", la["gate_lower_bound"])
    if cfg.get("q_lora_rank") is not None:
        w.add_uint32(A + ".attention.q_lora_rank", cfg["q_lora_rank"])
    w.add_uint32(A + ".attention.kv_lora_rank", cfg["kv_lora_rank"])
    w.add_uint32(A + ".rope.dimension_count", cfg["qk_rope_head_dim"])
    w.add_uint32(A + ".attention.key_length", cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
    w.add_uint32(A + ".attention.value_length", cfg["kv_lora_rank"])
    w.add_uint32(A + ".attention.key_length_mla", cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
    w.add_uint32(A + ".attention.value_length_mla", cfg["v_head_dim"])
    w.add_uint32(A + ".expert_feed_forward_length", cfg["moe_intermediate_size"])
    w.add_uint32(A + ".expert_shared_count", cfg["num_shared_experts"])
    w.add_uint32(A + ".leading_dense_block_count", cfg["first_k_dense_replace"])
    w.add_float32(A + ".expert_weights_scale", cfg["routed_scaling_factor"])
    w.add_bool(A + ".expert_weights_norm", bool(cfg["moe_renormalize"]))
    w.add_uint32(A + ".expert_gating_func", int(gguf.ExpertGatingFuncType.SIGMOID))
    if cfg.get("routed_expert_hidden_size") is not None:
        w.add_uint32(A + ".expert_latent_length", cfg["routed_expert_hidden_size"])
    w.add_float32(A + ".activation.situ_beta", cfg["activation_situ_beta"])
    w.add_float32(A + ".activation.situ_linear_beta", cfg["activation_situ_linear_beta"])
    w.add_uint32(A + ".attn_res.block_size", cfg["attn_res_block_size"])
    mxfp4 = (cfg.get("quantization_config") or top.get("quantization_config") or {}).get("format") == "mxfp4-pack-quantized"
    w.add_file_type(38 if mxfp4 else ftype_dense)        # LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    write_vocab(w, model_dir, {**cfg, "vocab_size": cfg["vocab_size"]})
    eos = top.get("eos_token_id", cfg.get("eos_token_id"))
    if eos is not None:
        w.add_eos_token_id(eos)                          # upstream restores the configured <|end_of_msg|>
    plan = []
    for name, data, raw in k3_tensors(cfg, shards):
        if raw is not None:
            t = raw
        elif data.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or \
                name.endswith(("res_score.weight",) + K3_KEEP_F32):
            t = gguf.GGMLQuantizationType.F32
        else:
            t = want
            if t == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
                t = gguf.GGMLQuantizationType.F16
        plan.append((name, t))
        if raw is not None:
            w.add_tensor(name, data, raw_dtype=raw)
        else:
            arr = data.astype(np.float16 if t == gguf.GGMLQuantizationType.F16 else np.float32)
            if t == gguf.GGMLQuantizationType.BF16:
                w.add_tensor(name, gguf.quants.quantize(arr, t), raw_dtype=t)
            elif t not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
                w.add_tensor(name, gguf.quants.quantize(arr, t), raw_dtype=t)
            else:
                w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return plan


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kimi Linear / Kimi K3 (HF layout) -> GGUF kimi-linear / kimi-k3, "
                                             "as llama.cpp's converters")
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", default="bf16", choices=sorted(OUTTYPES))
    a = ap.parse_args(argv)
    with open(os.path.join(a.model_dir, "config.json")) as f:
        k3 = json.load(f).get("model_type") == "kimi_k3"
    plan = (convert_k3 if k3 else convert)(a.model_dir, a.out, a.outtype)
    counts = {}
    for _, t in plan:
        counts[t.name] = counts.get(t.name, 0) + 1
    print("hf_to_gguf: wrote %s: %d tensors (%s), %d bytes" % (a.out, len(plan),
          ", ".join("%s %d" % kv for kv in sorted(counts.items())), os.path.getsize(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
